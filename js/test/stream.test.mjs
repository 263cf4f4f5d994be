// stream(): fetch + ReadableStream, with a fetch stand-in (no network in unit tests).
import assert from "node:assert/strict";
import { test } from "node:test";
import { MODULE } from "./helpers.mjs";

const { stream, open, HTTPStatusError, TokenwireError, REQUEST_MEDIA_TYPE } = await import(MODULE);

const REQUEST = {
  version: "1.0",
  stream: true,
  model: "demo",
  messages: [{ role: "user", content: "hi" }],
  metadata: { request_id: "r-1" },
  tools: [{ name: "get_weather", description: "Weather.", parameters: { type: "object" } }],
};

const frame = (name, data) =>
  `event: ${name}\nid: ${data.seq}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...data })}\n\n`;

function sse(text, { status = 200, type = "text/event-stream", split = 5 } = {}) {
  const bytes = new TextEncoder().encode(text);
  const body = new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.length; i += split) controller.enqueue(bytes.slice(i, i + split));
      controller.close();
    },
  });
  return new Response(body, { status, headers: { "content-type": type } });
}

const GOOD =
  frame("stream.start", { seq: 0, model: "demo", created: 1, request_id: "r-1" }) +
  frame("content.delta", { seq: 1, index: 0, role: "assistant", delta: { text: "Hé" } }) +
  frame("content.delta", { seq: 2, index: 0, role: "assistant", delta: { text: "llo" } }) +
  frame("content.stop", { seq: 3, index: 0, stop_reason: "end_turn" }) +
  frame("usage", { seq: 4, input_tokens: 1, output_tokens: 2 }) +
  frame("stream.end", { seq: 5, request_id: "r-1" });

test("POSTs the request as application/llm-request+json and yields every event", async () => {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init });
    return sse(GOOD, { split: 3 });
  };
  const response = await stream("/v1/stream", REQUEST, { fetch });
  const items = [];
  for await (const item of response) items.push(item);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.headers["Content-Type"], REQUEST_MEDIA_TYPE);
  assert.deepEqual(JSON.parse(calls[0].init.body), REQUEST);
  assert.deepEqual(
    items.map((i) => i.event.type),
    ["stream.start", "content.delta", "content.delta", "content.stop", "usage", "stream.end"],
  );
  assert.ok(items.every((i) => typeof i.time === "number" && i.time >= 0));
  assert.equal(response.text, "Héllo");
  assert.equal(typeof response.ttft, "number");
  assert.equal(response.report.ok, true);
  assert.deepEqual(response.report.violations, []);
});

test("the request is used for the §4.6 echo and §8.2 declared-tool checks", async () => {
  const text =
    frame("stream.start", { seq: 0, model: "demo", created: 1 }) +
    frame("tool.call", { seq: 1, index: 0, id: "c1", name: "rm_rf", arguments: "{}" }) +
    frame("content.stop", { seq: 2, index: 0, stop_reason: "tool_use" }) +
    frame("usage", { seq: 3, input_tokens: 1, output_tokens: 2 }) +
    frame("stream.end", { seq: 4 });
  const response = await stream("/v1/stream", REQUEST, { fetch: async () => sse(text) });
  for await (const _ of response);
  assert.deepEqual(
    response.report.violations.map((v) => v.rule),
    ["request-id-not-echoed", "undeclared-tool", "request-id-not-echoed"],
  );
  assert.equal(response.report.ok, false);
});

test("a body cut short gives missing-end, not an exception", async () => {
  const cut = GOOD.slice(0, GOOD.indexOf("event: content.stop"));
  const response = await stream("/v1/stream", REQUEST, { fetch: async () => sse(cut) });
  const types = [];
  for await (const item of response) types.push(item.event.type);
  assert.equal(types.length, 3);
  assert.deepEqual(
    response.report.violations.map((v) => v.rule),
    ["missing-end"],
  );
});

test("an undecodable event is an item with its error, and the stream goes on", async () => {
  // seq 2 carries index "zero": invalid-field, and the next events still decode.
  const text = GOOD.replace('"seq":2,"index":0,', '"seq":2,"index":"zero",');
  assert.notEqual(text, GOOD);
  const response = await stream("/v1/stream", REQUEST, { fetch: async () => sse(text) });
  const items = [];
  for await (const item of response) items.push(item);
  assert.equal(items.length, 6);
  const bad = items.filter((i) => i.error);
  assert.equal(bad.length, 1);
  assert.equal(bad[0].event, null);
  assert.equal(bad[0].message.id, "2");
  assert.equal(bad[0].error.rule, "invalid-field");
  assert.equal(bad[0].error.seq, 2);
  assert.deepEqual(
    bad[0].violations.map((v) => v.rule),
    ["invalid-field"],
  );
  assert.equal(response.text, "Hé"); // the undecodable delta is not text
});

test("a non-2xx answer throws HTTPStatusError with the JSON error body", async () => {
  const fetch = async () =>
    new Response(
      JSON.stringify({
        error: { code: "invalid_request", message: "messages: required", path: "messages" },
      }),
      {
        status: 400,
        headers: { "content-type": "application/json" },
      },
    );
  await assert.rejects(stream("/v1/stream", REQUEST, { fetch }), (exc) => {
    assert.ok(exc instanceof HTTPStatusError);
    assert.equal(exc.status, 400);
    assert.equal(exc.code, "invalid_request");
    assert.match(exc.message, /messages: required/);
    return true;
  });
});

test("a 200 that is not text/event-stream is refused", async () => {
  const fetch = async () => sse("{}", { type: "application/json" });
  await assert.rejects(stream("/v1/stream", REQUEST, { fetch }), TokenwireError);
});

test("aborting: the iteration throws AbortError and the response says aborted", async () => {
  const controller = new AbortController();
  const head = new TextEncoder().encode(GOOD.slice(0, GOOD.indexOf("event: content.delta")));
  const fetch = async (_url, init) => {
    const body = new ReadableStream({
      start(c) {
        c.enqueue(head);
        init.signal.addEventListener("abort", () =>
          c.error(new DOMException("aborted", "AbortError")),
        );
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  };
  const response = await stream("/v1/stream", REQUEST, { fetch, signal: controller.signal });
  const seen = [];
  await assert.rejects(
    async () => {
      for await (const item of response) {
        seen.push(item.event.type);
        controller.abort();
      }
    },
    (exc) => exc.name === "AbortError",
  );
  assert.deepEqual(seen, ["stream.start"]);
  assert.equal(response.aborted, true);
  // An aborted stream is not judged for what never came (no missing-end).
  assert.deepEqual(response.report.violations, []);
});

test("open() wraps an existing response (a replayed capture)", async () => {
  const response = await open(sse(GOOD));
  let n = 0;
  for await (const _ of response) n++;
  assert.equal(n, 6);
  assert.equal(response.report.ok, true);
});
