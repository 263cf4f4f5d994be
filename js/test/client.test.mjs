// Client: errors by status, resume with Last-Event-ID and the resume token,
// duplicate dropping, cancellation on the server, the §8.2 tool-call checks.
// With a fetch stand-in, then against a real gateway (TOKENWIRE_GATEWAY).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MODULE } from "./helpers.mjs";

const {
  Client,
  HTTPStatusError,
  ProtocolError,
  RequestError,
  ServerError,
  StreamTruncatedError,
  UnsupportedMediaTypeError,
  prepareRequest,
  parseEvent,
  SSEDecoder,
} = await import(MODULE);

const BASE = "http://gateway.test";
const frame = (name, data) =>
  `event: ${name}\nid: ${data.seq}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...data })}\n\n`;
const delta = (seq, text, index = 0) =>
  frame("content.delta", { seq, index, role: "assistant", delta: { text } });

function story(rid) {
  return [
    frame("stream.start", { seq: 0, model: "demo", created: 1, request_id: rid }),
    delta(1, "He"),
    delta(2, "ll"),
    delta(3, "o"),
    frame("content.stop", { seq: 4, index: 0, stop_reason: "end_turn" }),
    frame("usage", { seq: 5, input_tokens: 1, output_tokens: 3 }),
    frame("stream.end", { seq: 6, request_id: rid }),
  ];
}

/** A body that sends `frames`, then either ends, fails, or stays open until aborted. */
function body(frames, { then = "end", signal } = {}) {
  const bytes = new TextEncoder().encode(frames.join(""));
  const chunks = [];
  for (let i = 0; i < bytes.length; i += 11) chunks.push(bytes.slice(i, i + 11));
  // Pull-based: an error only comes after every chunk was read (c.error() drops a queue).
  return new ReadableStream({
    start(c) {
      signal?.addEventListener("abort", () => c.error(new DOMException("aborted", "AbortError")));
    },
    pull(c) {
      if (chunks.length) return c.enqueue(chunks.shift());
      if (then === "end") c.close();
      else if (then === "fail") c.error(new TypeError("terminated: the connection was reset"));
      else return new Promise(() => {}); // "hang": until aborted
    },
  });
}

const sse = (stream, headers = {}) =>
  new Response(stream, { headers: { "content-type": "text/event-stream", ...headers } });

const REQUEST = { model: "demo", messages: [{ role: "user", content: "hi" }] };

describe("prepareRequest", () => {
  test("fills version, stream, a request_id and the resumable extension", () => {
    const r = prepareRequest(REQUEST);
    assert.equal(r.version, "1.0");
    assert.equal(r.stream, true);
    assert.match(r.metadata.request_id, /^[0-9a-f-]{36}$/);
    // Not resumable unless asked, as in the Python client, and said explicitly.
    assert.equal(r.extensions["tokenwire:resumable"], false);
    assert.equal(prepareRequest(REQUEST, { resume: true }).extensions["tokenwire:resumable"], true);
    assert.equal(REQUEST.metadata, undefined, "the caller's object is not changed");
  });

  test("keeps the caller's request_id and an explicit resumable: false", () => {
    const r = prepareRequest({
      ...REQUEST,
      metadata: { request_id: "r-7" },
      extensions: { "tokenwire:resumable": false },
    });
    assert.equal(r.metadata.request_id, "r-7");
    assert.equal(r.extensions["tokenwire:resumable"], false);
    const kept = prepareRequest(
      { ...REQUEST, extensions: { "tokenwire:resumable": false } },
      { resume: true },
    );
    assert.equal(kept.extensions["tokenwire:resumable"], false);
  });

  test("a malformed tokenwire:side_effects is refused before sending", () => {
    assert.throws(() =>
      prepareRequest({ ...REQUEST, extensions: { "tokenwire:side_effects": "x" } }),
    );
  });
});

describe("errors by status", () => {
  const answer = (status, error) => async () =>
    new Response(JSON.stringify({ error }), {
      status,
      headers: { "content-type": "application/json" },
    });
  const drain = async (stream) => {
    for await (const _ of stream);
  };

  for (const [status, cls, error] of [
    [
      415,
      UnsupportedMediaTypeError,
      { code: "unsupported_media_type", message: "not llm-request" },
    ],
    [400, RequestError, { code: "invalid_request", message: "required", path: "messages" }],
    [404, RequestError, { code: "model_not_found", message: "unknown model", path: "model" }],
    [429, RequestError, { code: "rate_limited", message: "slow down" }],
    [500, ServerError, { code: "internal_error", message: "boom" }],
    [503, ServerError, { code: "overloaded", message: "busy" }],
  ]) {
    test(`${status} is ${cls.name}`, async () => {
      const methods = [];
      const fetch = async (url, init) => (methods.push(init.method), answer(status, error)());
      const client = new Client({ baseURL: BASE, fetch, resume: true });
      await assert.rejects(drain(client.stream(REQUEST)), (exc) => {
        assert.ok(exc instanceof cls, exc.name);
        assert.ok(exc instanceof HTTPStatusError);
        assert.equal(exc.status, status);
        assert.equal(exc.code, error.code);
        assert.equal(exc.path, error.path ?? null);
        assert.match(exc.message, new RegExp(`HTTP ${status}: ${error.message}`));
        return true;
      });
      assert.deepEqual(methods, ["POST"], "a refused request has nothing to cancel");
    });
  }

  test("a 200 that is not text/event-stream is a ProtocolError", async () => {
    const fetch = async () =>
      new Response("{}", { headers: { "content-type": "application/json" } });
    await assert.rejects(
      drain(new Client({ baseURL: BASE, fetch, resume: true }).stream(REQUEST)),
      ProtocolError,
    );
  });
});

describe("delivery, resume and cancel (fetch stand-in)", () => {
  test("POSTs the prepared request and yields typed events", async () => {
    const calls = [];
    const fetch = async (url, init) => {
      calls.push({ url, init });
      return sse(body(story(JSON.parse(init.body).metadata.request_id)));
    };
    const client = new Client({
      baseURL: `${BASE}/`,
      headers: { Authorization: "Bearer k" },
      fetch,
    });
    const stream = client.stream(REQUEST);
    const types = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "content.delta") text += event.delta.text;
    }
    assert.equal(text, "Hello");
    assert.deepEqual(types.slice(0, 2), ["stream.start", "content.delta"]);
    assert.equal(types.at(-1), "stream.end");
    assert.equal(calls.length, 1);
    assert.equal(calls[0].url, `${BASE}/v1/stream`);
    assert.equal(calls[0].init.method, "POST");
    assert.equal(calls[0].init.headers["Content-Type"], "application/llm-request+json");
    assert.equal(calls[0].init.headers.Authorization, "Bearer k");
    assert.equal(stream.connections, 1);
    assert.equal(stream.done, true);
    assert.deepEqual(stream.violations, []);
  });

  test("a drop resumes with Last-Event-ID and the resume token; replayed seqs are dropped", async () => {
    const calls = [];
    let rid;
    const fetch = async (url, init) => {
      calls.push({ url, method: init.method, headers: init.headers });
      if (init.method === "POST") {
        rid = JSON.parse(init.body).metadata.request_id;
        return sse(body(story(rid).slice(0, 3), { then: "fail" }), {
          "tokenwire-resume-token": "tok-1",
        });
      }
      // The resume answers from seq 1 on: 1 and 2 are duplicates and must be dropped.
      return sse(body(story(rid).slice(1)));
    };
    const stream = new Client({ baseURL: BASE, fetch, resume: true }).stream(REQUEST);
    const seqs = [];
    for await (const event of stream) seqs.push(event.seq);
    assert.deepEqual(seqs, [0, 1, 2, 3, 4, 5, 6]);
    assert.equal(stream.connections, 2);
    assert.equal(stream.resumeToken, "tok-1");
    assert.equal(calls[1].method, "GET");
    assert.equal(calls[1].url, `${BASE}/v1/streams/${encodeURIComponent(rid)}`);
    assert.equal(calls[1].headers["Last-Event-ID"], "2");
    assert.equal(calls[1].headers["Tokenwire-Resume-Token"], "tok-1");
    assert.deepEqual(stream.violations, []);
  });

  test("resume off: a drop is a StreamTruncatedError with the last seq", async () => {
    let sent;
    const fetch = async (_url, init) => {
      sent = JSON.parse(init.body);
      return sse(body(story("r").slice(0, 3), { then: "fail" }));
    };
    const stream = new Client({ baseURL: BASE, fetch, resume: false }).stream(REQUEST);
    const seqs = [];
    await assert.rejects(
      async () => {
        for await (const event of stream) seqs.push(event.seq);
      },
      (exc) => exc instanceof StreamTruncatedError && exc.lastSeq === 2,
    );
    assert.deepEqual(seqs, [0, 1, 2]);
    assert.deepEqual(sent.extensions, { "tokenwire:resumable": false });
  });

  test("resume attempts that bring nothing new end in StreamTruncatedError", async () => {
    const methods = [];
    const fetch = async (_url, init) => {
      methods.push(init.method);
      if (init.method === "DELETE") return new Response(null, { status: 204 });
      const frames = init.method === "POST" ? story("r").slice(0, 2) : [];
      return sse(body(frames, { then: "fail" }));
    };
    const stream = new Client({ baseURL: BASE, fetch, resume: true }).stream(REQUEST);
    await assert.rejects(async () => {
      for await (const _ of stream);
    }, StreamTruncatedError);
    // The POST, three fruitless resumes, then the abandoned stream is cancelled.
    assert.deepEqual(methods, ["POST", "GET", "GET", "GET", "DELETE"]);
  });

  test("aborting the signal aborts the fetch and DELETEs the stream with its token", async () => {
    const calls = [];
    const fetch = async (url, init) => {
      calls.push({ url, method: init.method, headers: init.headers, signal: init.signal });
      if (init.method === "DELETE") return new Response(null, { status: 204 });
      return sse(body(story("r").slice(0, 2), { then: "hang", signal: init.signal }), {
        "tokenwire-resume-token": "tok-9",
      });
    };
    const controller = new AbortController();
    const stream = new Client({ baseURL: BASE, fetch, resume: true }).stream(REQUEST, {
      signal: controller.signal,
    });
    const seen = [];
    await assert.rejects(
      async () => {
        for await (const event of stream) {
          seen.push(event.type);
          if (event.type === "content.delta") controller.abort();
        }
      },
      (exc) => exc.name === "AbortError",
    );
    assert.deepEqual(seen, ["stream.start", "content.delta"]);
    assert.ok(calls[0].signal.aborted, "the POST's fetch was aborted");
    const del = calls.find((c) => c.method === "DELETE");
    assert.ok(del, "a DELETE was sent");
    assert.equal(del.url, `${BASE}/v1/streams/${encodeURIComponent(stream.requestId)}`);
    assert.equal(del.headers["Tokenwire-Resume-Token"], "tok-9");
  });

  test("leaving the loop early cancels too; a finished stream is not cancelled", async () => {
    const methods = [];
    const fetch = async (_url, init) => {
      methods.push(init.method);
      if (init.method === "DELETE") return new Response(null, { status: 204 });
      return sse(body(story("r")));
    };
    const client = new Client({ baseURL: BASE, fetch, resume: true });
    for await (const _ of client.stream(REQUEST)) break;
    assert.deepEqual(methods, ["POST", "DELETE"]);
    methods.length = 0;
    for await (const _ of client.stream(REQUEST));
    assert.deepEqual(methods, ["POST"]);
  });
});

describe("§8.2 tool-call checks", () => {
  const TOOLS = [
    {
      name: "get_weather",
      description: "Weather.",
      parameters: {
        type: "object",
        properties: { city: { type: "string", minLength: 1 } },
        required: ["city"],
        additionalProperties: false,
      },
    },
    { name: "delete_file", description: "Deletes.", parameters: { type: "object" } },
  ];
  const call = (seq, id, name, args, index) =>
    frame("tool.call", { seq, index, id, name, arguments: args });

  async function run(calls, options = {}, extensions = {}) {
    const frames = [
      frame("stream.start", { seq: 0, model: "demo", created: 1 }),
      ...calls.map((c, i) => call(i + 1, c[0], c[1], c[2], i)),
      ...calls.map((_c, i) =>
        frame("content.stop", { seq: calls.length + 1 + i, index: i, stop_reason: "tool_use" }),
      ),
      frame("stream.end", { seq: 2 * calls.length + 1 }),
    ];
    const client = new Client({ baseURL: BASE, fetch: async () => sse(body(frames)), ...options });
    const stream = client.stream({ ...REQUEST, tools: TOOLS, extensions });
    const delivered = [];
    for await (const event of stream) if (event.type === "tool.call") delivered.push(event.id);
    return {
      delivered,
      rejected: stream.rejectedToolCalls.map((r) => [r.event.id, r.error.reason]),
    };
  }

  test("declared, valid calls pass; undeclared, bad JSON, schema-invalid and duplicates do not", async () => {
    const { delivered, rejected } = await run([
      ["ok", "get_weather", '{"city":"Vienna"}'],
      ["undeclared", "rm_rf", "{}"],
      ["not-json", "get_weather", "{city"],
      ["array", "get_weather", "[1]"],
      ["missing", "get_weather", "{}"],
      ["extra", "get_weather", '{"city":"Graz","x":1}'],
      ["empty", "get_weather", '{"city":""}'],
      ["ok", "get_weather", '{"city":"Linz"}'],
    ]);
    assert.deepEqual(delivered, ["ok"]);
    assert.deepEqual(rejected, [
      ["undeclared", "undeclared-tool"],
      ["not-json", "bad-arguments-json"],
      ["array", "bad-arguments-json"],
      ["missing", "invalid-arguments"],
      ["extra", "invalid-arguments"],
      ["empty", "invalid-arguments"],
      ["ok", "duplicate-tool-id"],
    ]);
  });

  test("a tokenwire:side_effects tool needs the confirm hook's yes", async () => {
    const side = { "tokenwire:side_effects": ["delete_file"] };
    const calls = [["d1", "delete_file", '{"path":"/tmp/x"}']];
    assert.deepEqual(await run(calls, {}, side), {
      delivered: [],
      rejected: [["d1", "not-confirmed"]],
    });
    const asked = [];
    const yes = await run(calls, { confirm: async (c) => (asked.push(c), true) }, side);
    assert.deepEqual(yes.delivered, ["d1"]);
    assert.deepEqual(
      asked.map((c) => [c.name, c.arguments, c.tool.name]),
      [["delete_file", { path: "/tmp/x" }, "delete_file"]],
    );
    const no = await run(calls, { confirm: () => false }, side);
    assert.deepEqual(no, { delivered: [], rejected: [["d1", "not-confirmed"]] });
    // Tools without side effects never ask.
    const quiet = await run(
      [["w", "get_weather", '{"city":"Wels"}']],
      {
        confirm: () => assert.fail("asked"),
      },
      side,
    );
    assert.deepEqual(quiet.delivered, ["w"]);
  });

  test("an error thrown by the confirm hook reaches the caller (it is not a drop)", async () => {
    const side = { "tokenwire:side_effects": ["delete_file"] };
    const hook = () => {
      throw new RangeError("hook failed");
    };
    await assert.rejects(run([["d1", "delete_file", "{}"]], { confirm: hook }, side), RangeError);
  });
});

const GATEWAY = process.env.TOKENWIRE_GATEWAY;

describe(
  "against tokenwire serve",
  { skip: GATEWAY ? false : "TOKENWIRE_GATEWAY is not set" },
  () => {
    const slow = (rid) => ({
      model: "demo",
      messages: [{ role: "user", content: "Tell me a long story about streams." }],
      parameters: { max_tokens: 200 },
      metadata: { request_id: rid },
      extensions: { "tokenwire:demo": { delay_ms: 20 } },
    });

    async function replay(rid, token) {
      // GET /v1/streams/{id} from the start: the stored stream, to its stream.end.
      const headers = { "Last-Event-ID": "0" };
      if (token) headers["Tokenwire-Resume-Token"] = token;
      const response = await fetch(`${GATEWAY}/v1/streams/${rid}`, { headers });
      assert.equal(response.status, 200);
      const decoder = new SSEDecoder();
      const events = [];
      for await (const chunk of response.body) {
        for (const m of decoder.feed(chunk)) events.push(parseEvent(m.event, m.data));
      }
      return events;
    }

    test("abort cancels the generation on the server (error cancelled, stream.end)", async () => {
      const rid = `js-abort-${Date.now()}`;
      const controller = new AbortController();
      const stream = new Client({ baseURL: GATEWAY, resume: true }).stream(slow(rid), {
        signal: controller.signal,
      });
      let deltas = 0;
      await assert.rejects(
        async () => {
          for await (const event of stream) {
            if (event.type === "content.delta" && ++deltas === 3) controller.abort();
          }
        },
        (exc) => exc.name === "AbortError",
      );
      const stored = await replay(rid, stream.resumeToken);
      // After the error, the usage so far (estimated by the gateway), then stream.end.
      const tail = stored.slice(-3).map((e) => [e.type, e.code ?? null]);
      assert.deepEqual(tail, [
        ["error", "cancelled"],
        ["usage", null],
        ["stream.end", null],
      ]);
      assert.equal(stored.at(-2)["tokenwire:estimated"], true);
      const generated = stored.filter((e) => e.type === "content.delta").length;
      assert.ok(generated < 200, `the generation went on: ${generated} deltas`);
    });

    test("a dropped connection is resumed from the gateway: no gap, no duplicate", async () => {
      const rid = `js-resume-${Date.now()}`;
      let cut = false;
      // Cut the POST's body after its first 600 bytes, as a network drop would.
      const dropping = async (url, init) => {
        const response = await fetch(url, init);
        if (init.method !== "POST" || cut) return response;
        cut = true;
        const reader = response.body.getReader();
        let sent = 0;
        const body = new ReadableStream({
          async pull(c) {
            const { done, value } = await reader.read();
            if (done) return c.close();
            if (sent + value.length >= 600) {
              c.enqueue(value.slice(0, 600 - sent));
              await reader.cancel();
              return c.error(new TypeError("terminated"));
            }
            sent += value.length;
            c.enqueue(value);
          },
        });
        return new Response(body, { status: response.status, headers: response.headers });
      };
      const request = {
        ...slow(rid),
        parameters: { max_tokens: 40 },
        extensions: { "tokenwire:demo": { delay_ms: 5 } },
      };
      const stream = new Client({ baseURL: GATEWAY, fetch: dropping, resume: true }).stream(
        request,
      );
      const seqs = [];
      let text = "";
      for await (const event of stream) {
        seqs.push(event.seq);
        if (event.type === "content.delta") text += event.delta.text;
      }
      assert.equal(stream.connections, 2);
      assert.deepEqual(
        seqs,
        seqs.map((_s, i) => i),
      );
      assert.deepEqual(stream.violations, []);
      // The same words as an uninterrupted stream of the same request.
      let clean = "";
      const again = { ...request, metadata: { request_id: `${rid}-clean` } };
      for await (const event of new Client({ baseURL: GATEWAY }).stream(again)) {
        if (event.type === "content.delta") clean += event.delta.text;
      }
      assert.equal(text, clean);
    });
  },
);
