// Type-checked by tests/js/test_js_package.py in the folder where the packed
// tarball was installed: the declarations describe the API a TypeScript user sees.
import {
  Client,
  type Event,
  type KnownEvent,
  parseEvent,
  RequestError,
  SSEDecoder,
} from "tokenwire";

const client = new Client({ baseURL: "http://127.0.0.1:8080", headers: { "X-A": "b" } });
const stream = client.stream({ model: "demo", messages: [{ role: "user", content: "hi" }] });
const requestId: string = stream.requestId;

async function text(): Promise<string> {
  let out = "";
  for await (const event of stream) {
    const known = event as KnownEvent;
    if (known.type === "content.delta") out += known.delta.text;
  }
  return out;
}

const decoder = new SSEDecoder({ maxEventBytes: 1024 });
const events: Event[] = decoder.feed("data: x\n\n").map((m) => parseEvent(m.event, m.data));
const status: number | undefined = new RequestError(400, null).status;
export { events, requestId, status, text };
