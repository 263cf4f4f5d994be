// The Client on the binary binding's transports (docs/binary.md 6): frames over HTTP
// and frames over a WebSocket (Node: the `ws` package), against a real gateway
// (TOKENWIRE_GATEWAY): a tool loop, cancel, resume after a cut, 20 streams on one
// connection. The same flow as over SSE; only the transport differs.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { MODULE, replay as replayStored } from "./helpers.mjs";

const { Client } = await import(MODULE);

const GATEWAY = process.env.TOKENWIRE_GATEWAY;
const WEATHER = {
  name: "get_weather",
  description: "Get current weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** A WebSocket constructor that remembers its sockets (so that a test can cut one). */
function recordingWebSocket() {
  const made = [];
  class Recorded extends WebSocket {
    constructor(url, protocols, options) {
      super(url, protocols, options);
      made.push(this);
    }
  }
  return { made, Recorded };
}

/** A fetch whose first stream answer is cut after `bytes` bytes (a dropped connection). */
function cuttingFetch(bytes) {
  let cut = false;
  const fetches = [];
  const wrapped = async (input, init) => {
    fetches.push(`${init?.method ?? "GET"} ${new URL(input).pathname}`);
    const response = await fetch(input, init);
    if (cut || response.body === null || response.status !== 200) return response;
    cut = true;
    let sent = 0;
    const reader = response.body.getReader();
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        if (sent + value.length >= bytes) {
          controller.enqueue(value.slice(0, bytes - sent));
          await reader.cancel();
          return controller.error(new TypeError("the test cut the connection"));
        }
        sent += value.length;
        controller.enqueue(value);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { fetches, wrapped };
}

const replay = (rid, token) => replayStored(GATEWAY, rid, token);

const slow = (rid, delay = 20) => ({
  model: "demo",
  messages: [{ role: "user", content: "Tell me a long story about streams." }],
  parameters: { max_tokens: 120 },
  metadata: { request_id: rid },
  extensions: { "tokenwire:demo": { delay_ms: delay } },
});

// resume: true: the abort test reads back the stored (resumable) stream.
const TRANSPORTS = {
  http: () => ({ binding: "binary", resume: true }),
  ws: (webSocket = WebSocket) => ({ transport: "ws", webSocket, resume: true }),
};

describe(
  "the binary binding's transports against tokenwire serve",
  { skip: GATEWAY ? false : "TOKENWIRE_GATEWAY is not set" },
  () => {
    for (const [name, options] of Object.entries(TRANSPORTS)) {
      test(`${name}: a tool loop`, async () => {
        const client = new Client({ baseURL: GATEWAY, ...options() });
        try {
          const messages = [{ role: "user", content: "What is the weather in Vienna?" }];
          const first = [];
          for await (const e of client.stream({ model: "demo", messages, tools: [WEATHER] })) {
            first.push(e);
          }
          const call = first.find((e) => e.type === "tool.call");
          assert.equal(call.name, "get_weather");
          assert.deepEqual(JSON.parse(call.arguments), { city: "Vienna" });
          messages.push(
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: call.id, name: call.name, arguments: call.arguments }],
            },
            { role: "tool", tool_call_id: call.id, content: "Vienna: 24C, sunny" },
          );
          let text = "";
          for await (const e of client.stream({ model: "demo", messages, tools: [WEATHER] })) {
            if (e.type === "content.delta") text += e.delta.text;
          }
          assert.match(text, /Vienna: 24C, sunny/);
        } finally {
          client.close();
        }
      });

      test(`${name}: abort cancels the generation on the server`, async () => {
        const rid = `js-${name}-abort-${Date.now()}`;
        const client = new Client({ baseURL: GATEWAY, ...options() });
        try {
          const controller = new AbortController();
          const stream = client.stream(slow(rid), { signal: controller.signal });
          let deltas = 0;
          await assert.rejects(async () => {
            for await (const event of stream) {
              if (event.type === "content.delta" && ++deltas === 3) controller.abort();
            }
          });
          const stored = await replay(rid, stream.resumeToken);
          const tail = stored.slice(-3).map((e) => [e.type, e.code ?? null]);
          assert.deepEqual(tail, [
            ["error", "cancelled"],
            ["usage", null],
            ["stream.end", null],
          ]);
          // The connection outlives the cancelled stream.
          let text = "";
          const messages = [{ role: "user", content: "after" }];
          for await (const e of client.stream({ model: "demo", messages })) {
            if (e.type === "content.delta") text += e.delta.text;
          }
          assert.match(text, /after/);
        } finally {
          client.close();
        }
      });
    }

    test("http: a cut stream resumes in frames, every seq once", async () => {
      const { fetches, wrapped } = cuttingFetch(3000);
      const client = new Client({
        baseURL: GATEWAY,
        binding: "binary",
        fetch: wrapped,
        resume: true,
      });
      const seqs = [];
      for await (const e of client.stream(slow(`js-http-cut-${Date.now()}`, 2))) seqs.push(e.seq);
      assert.deepEqual(
        seqs,
        seqs.map((_, i) => i),
      );
      assert.equal(seqs.length > 40, true);
      assert.equal(fetches.filter((f) => f.startsWith("GET /v1/streams/")).length >= 1, true);
    });

    test("ws: a cut socket resumes on a new one, every seq once", async () => {
      const { made, Recorded } = recordingWebSocket();
      const client = new Client({
        baseURL: GATEWAY,
        transport: "ws",
        webSocket: Recorded,
        resume: true,
      });
      try {
        const seqs = [];
        for await (const e of client.stream(slow(`js-ws-cut-${Date.now()}`, 2))) {
          seqs.push(e.seq);
          if (seqs.length === 20) made[0].terminate(); // the TCP connection drops
        }
        assert.deepEqual(
          seqs,
          seqs.map((_, i) => i),
        );
        assert.equal(made.length, 2); // cut, then resumed on a new socket
        assert.equal(seqs.length > 40, true);
      } finally {
        client.close();
      }
    });

    test("ws: 20 streams at once on one socket", async () => {
      const { made, Recorded } = recordingWebSocket();
      const client = new Client({ baseURL: GATEWAY, transport: "ws", webSocket: Recorded });
      try {
        const one = async (i) => {
          let text = "";
          const messages = [{ role: "user", content: `Hello number ${i}` }];
          const request = { model: "demo", messages, parameters: { max_tokens: 12 } };
          for await (const e of client.stream(request)) {
            if (e.type === "content.delta") text += e.delta.text;
          }
          return text;
        };
        await one(-1); // the socket is open before the 20 start
        const texts = await Promise.all(Array.from({ length: 20 }, (_, i) => one(i)));
        texts.forEach((text, i) => assert.match(text, new RegExp(`Hello number ${i}\\b`)));
        assert.equal(made.length, 1);
      } finally {
        client.close();
      }
    });
  },
);
