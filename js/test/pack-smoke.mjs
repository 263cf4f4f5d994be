// Run by tests/js/test_js_package.py in an empty folder where only the packed
// tarball was installed: the package imports by its name and decodes a stream.
import { Client, parseEvent, SSEDecoder, VERSION, validate } from "tokenwire";
import { createTokenwire } from "tokenwire/ai-sdk";

const envelope = (seq, type, fields) => JSON.stringify({ v: "1.0", seq, type, ...fields });
const body = [
  ["stream.start", { model: "m", created: 1 }],
  ["content.delta", { index: 0, role: "assistant", delta: { text: "hé" } }],
  ["content.stop", { index: 0, stop_reason: "end_turn" }],
  ["usage", { input_tokens: 1, output_tokens: 1 }],
  ["stream.end", {}],
]
  .map(([type, fields], seq) => `event: ${type}\ndata: ${envelope(seq, type, fields)}\n\n`)
  .join("");

const bytes = new TextEncoder().encode(body);
const decoder = new SSEDecoder();
const events = [];
for (let i = 0; i < bytes.length; i += 3) {
  for (const m of decoder.feed(bytes.subarray(i, i + 3))) events.push(parseEvent(m.event, m.data));
}
const model = createTokenwire({ baseURL: "http://127.0.0.1:9" })("demo");
console.log(
  JSON.stringify({
    types: events.map((e) => e.type),
    text: events
      .filter((e) => e.type === "content.delta")
      .map((e) => e.delta.text)
      .join(""),
    ok: validate(body).ok,
    version: VERSION,
    client: typeof new Client({ baseURL: "http://127.0.0.1:9" }).stream,
    spec: model.specificationVersion,
  }),
);
