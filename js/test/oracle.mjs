// A long-lived helper for tests/js/test_js_differential.py (on the built package): one JSON
// request per stdin line, one JSON answer per stdout line.
//   {"op": "decode", "chunks": [base64...], "max": N}
//     -> {"events": [...], "last_event_id", "reconnect_ms", "error_offset"}
//   {"op": "validate", "chunks": [base64...], "request": {...}|null}
//     -> {"rules": [...], "seqs": [...], "ok": bool}
// (Not a test file: node --test only picks up *.test.mjs.)
import { createInterface } from "node:readline";
import { MODULE } from "./helpers.mjs";

const { SSEDecoder, FramingError, validate } = await import(MODULE);

const bytes = (b64) => new Uint8Array(Buffer.from(b64, "base64"));

function decode({ chunks, max }) {
  const decoder = new SSEDecoder({ maxEventBytes: max });
  const events = [];
  let errorOffset = null;
  try {
    for (const chunk of chunks) events.push(...decoder.feed(bytes(chunk)));
    events.push(...decoder.close());
  } catch (exc) {
    if (!(exc instanceof FramingError)) throw exc;
    errorOffset = exc.offset;
  }
  return {
    events,
    last_event_id: decoder.lastEventId,
    reconnect_ms: decoder.reconnectMs,
    error_offset: errorOffset,
  };
}

function check({ chunks, request }) {
  const report = validate(chunks.map(bytes), { request });
  return {
    rules: report.violations.map((v) => v.rule),
    seqs: report.violations.map((v) => v.seq),
    ok: report.ok,
  };
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  let answer;
  try {
    answer = job.op === "decode" ? decode(job) : check(job);
  } catch (exc) {
    answer = { crash: String(exc?.stack ?? exc) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
