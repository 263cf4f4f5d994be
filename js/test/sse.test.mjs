// The package's SSEDecoder against the shared WHATWG vectors (tests/vectors/sse/*.json),
// the same ones tests/test_sse.py runs against the Python decoder.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { concat, latin1, MODULE, prng, randomChunks, sseCases } from "./helpers.mjs";

const { SSEDecoder, FramingError, TokenwireError } = await import(MODULE);

const CASES = sseCases();

function decode(chunks, options) {
  const decoder = new SSEDecoder(options);
  const events = [];
  const perChunk = [];
  for (const chunk of chunks) {
    const got = decoder.feed(chunk);
    perChunk.push(got.length);
    events.push(...got);
  }
  assert.deepEqual(decoder.close(), []);
  return { decoder, events, perChunk };
}

/** Events and the FramingError offset (null: none), as tests/test_sse.py's decode_until_error. */
function decodeUntilError(chunks, maxEventBytes) {
  const decoder = new SSEDecoder({ maxEventBytes });
  const events = [];
  try {
    for (const chunk of chunks) events.push(...decoder.feed(chunk));
    events.push(...decoder.close());
  } catch (exc) {
    if (!(exc instanceof FramingError)) throw exc;
    return { events, offset: exc.offset };
  }
  return { events, offset: null };
}

function check(c, chunks, mode) {
  if ("max_event_bytes" in c) {
    // limits.json: the events before the error and its offset, however the input is cut.
    const got = decodeUntilError(chunks, c.max_event_bytes);
    assert.deepEqual(got, { events: c.expected, offset: c.error_offset });
    return;
  }
  const { decoder, events, perChunk } = decode(chunks);
  assert.deepEqual(events, c.expected);
  if ("last_event_id" in c) assert.equal(decoder.lastEventId, c.last_event_id);
  if ("reconnect_ms" in c) assert.equal(decoder.reconnectMs, c.reconnect_ms);
  if (mode === "given" && "per_chunk" in c) assert.deepEqual(perChunk, c.per_chunk);
  assert.equal(
    decoder.bytesFed,
    chunks.reduce((n, ch) => n + ch.length, 0),
  );
}

test("the vectors cover all 29 facts of sse-parsing-rules.md", () => {
  const covered = new Set(CASES.flatMap((c) => c.fact));
  for (let fact = 1; fact <= 29; fact++) assert.ok(covered.has(fact), `fact ${fact}`);
  assert.equal(new Set(CASES.map((c) => c.name)).size, CASES.length);
});

for (const mode of ["given", "bytewise", "whole", "random"]) {
  describe(`shared SSE vectors, ${mode} chunks`, () => {
    for (const c of CASES) {
      test(`${c.file} ${c.name}`, () => {
        const given = c.chunks.map(latin1);
        const all = concat(given);
        if (mode === "given") check(c, given, mode);
        else if (mode === "whole") check(c, [all], mode);
        else if (mode === "bytewise")
          check(
            c,
            Array.from(all, (b) => Uint8Array.of(b)),
            mode,
          );
        else {
          const random = prng(c.name.length * 7919 + all.length);
          for (let k = 0; k < 20; k++) check(c, randomChunks(all, random), mode);
        }
      });
    }
  });
}

describe("decoder details", () => {
  test("a string chunk is UTF-8 encoded", () => {
    const { events } = decode(["data: é\u2028x\n\n"]);
    assert.deepEqual(events, [{ event: "message", data: "é\u2028x", id: "", retry: null }]);
  });

  test("chunks are copied: a reused buffer does not corrupt a pending line", () => {
    const decoder = new SSEDecoder();
    const buffer = new TextEncoder().encode("data: ab");
    assert.deepEqual(decoder.feed(buffer), []);
    buffer.fill(0x7a); // the caller reuses its buffer
    assert.deepEqual(decoder.feed(new TextEncoder().encode("c\n\n")), [
      { event: "message", data: "abc", id: "", retry: null },
    ]);
  });

  test("feed after close throws", () => {
    const decoder = new SSEDecoder();
    decoder.close();
    assert.throws(() => decoder.feed("data: x\n\n"), TokenwireError);
  });

  test("maxEventBytes: an event over the limit throws FramingError with its offset", () => {
    const decoder = new SSEDecoder({ maxEventBytes: 16 });
    assert.deepEqual(decoder.feed("data: a\n\n"), [
      { event: "message", data: "a", id: "", retry: null },
    ]);
    assert.throws(
      () => decoder.feed("data: 0123456789abcdef"),
      (exc) => exc instanceof FramingError && exc.offset === 9 + 16,
    );
    // The decoder stays failed.
    assert.throws(() => decoder.feed("\n\n"), FramingError);
    assert.throws(() => decoder.close(), FramingError);
  });

  test("maxEventBytes: events completed before the limit are returned first", () => {
    const decoder = new SSEDecoder({ maxEventBytes: 10 });
    const got = decoder.feed("data: a\n\ndata: 0123456789\n\n");
    assert.deepEqual(got, [{ event: "message", data: "a", id: "", retry: null }]);
    assert.throws(
      () => decoder.close(),
      (exc) => exc instanceof FramingError && exc.offset === 19,
    );
  });

  test("maxEventBytes: a block exactly at the limit passes", () => {
    const decoder = new SSEDecoder({ maxEventBytes: 8 });
    assert.deepEqual(decoder.feed("data: x\n\n"), [
      { event: "message", data: "x", id: "", retry: null },
    ]);
  });

  test("maxEventBytes must be positive", () => {
    assert.throws(() => new SSEDecoder({ maxEventBytes: 0 }), RangeError);
  });
});
