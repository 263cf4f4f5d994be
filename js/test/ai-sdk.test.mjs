// The real `ai` package (Vercel AI SDK) through createTokenwire, against a real
// gateway (`tokenwire serve`, demo model: TOKENWIRE_GATEWAY, set by
// tests/js/test_js_package.py) and, for reasoning, a replay server serving a
// recorded standard stream (tests/vectors/js/reasoning-stream.json).
import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { AI_SDK, MODULE, VECTORS } from "./helpers.mjs";

const { createTokenwire, PartMapper } = await import(AI_SDK);
const { Client, RequestError } = await import(MODULE);

const GATEWAY = process.env.TOKENWIRE_GATEWAY;
const needsGateway = { skip: GATEWAY ? false : "TOKENWIRE_GATEWAY is not set" };
const demoVector = (name) =>
  JSON.parse(readFileSync(join(VECTORS, "demo", `${name}.json`), "utf8"));

const weather = () =>
  tool({
    description: "Get the current weather for a city",
    inputSchema: jsonSchema({
      type: "object",
      properties: {
        city: { type: "string" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    }),
  });

describe("the AI SDK against tokenwire serve (demo)", needsGateway, () => {
  test("streamText: text, usage and finish reason; the same text as the Client", async () => {
    const tokenwire = createTokenwire({ baseURL: GATEWAY });
    const result = streamText({ model: tokenwire("demo"), prompt: "Tell me about streams." });
    let streamed = "";
    for await (const piece of result.textStream) streamed += piece;
    assert.ok(streamed.length > 0);
    assert.equal(await result.text, streamed);
    assert.equal(await result.finishReason, "stop");
    const usage = await result.usage;
    assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, JSON.stringify(usage));

    // The demo is deterministic: the Client sees the same answer for the same prompt.
    const client = new Client({ baseURL: GATEWAY });
    let direct = "";
    const events = client.stream({
      model: "demo",
      messages: [{ role: "user", content: "Tell me about streams." }],
      extensions: { "tokenwire:reasoning": true },
    });
    for await (const event of events)
      if (event.type === "content.delta") direct += event.delta.text;
    assert.equal(streamed, direct);
    assert.deepEqual(events.violations, []);
  });

  test("streamText: a tool call, mapped to the AI SDK's tool-call part", async () => {
    const expect = demoVector("tool-call-weather").expect;
    const tokenwire = createTokenwire({ baseURL: GATEWAY });
    const result = streamText({
      model: tokenwire("demo"),
      prompt: "What is the weather in Vienna?",
      tools: { get_weather: weather() },
    });
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    const calls = await result.toolCalls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].toolName, expect.tool_call.name);
    assert.deepEqual(calls[0].input, expect.tool_call.arguments);
    assert.equal(await result.finishReason, "tool-calls");
    const usage = await result.usage;
    assert.equal(usage.inputTokens, expect.input_tokens);
    assert.equal(usage.outputTokens, expect.output_tokens);
    assert.ok(parts.some((p) => p.type === "tool-input-start" && p.toolName === "get_weather"));
  });

  test("generateText: the tool result goes back as a §4.8 tool message and is answered", async () => {
    const expect = demoVector("tool-result-answer").expect;
    const tokenwire = createTokenwire({ baseURL: GATEWAY });
    const seen = [];
    const result = await generateText({
      model: tokenwire("demo"),
      prompt: "What is the weather in Vienna?",
      tools: {
        get_weather: tool({
          ...weather(),
          execute: async (input) => {
            seen.push(input);
            return "Vienna: 24C, sunny";
          },
        }),
      },
      stopWhen: stepCountIs(2),
    });
    assert.deepEqual(seen, [{ city: "Vienna" }]);
    assert.equal(result.steps.length, 2);
    // The demo's answer to a tool result starts by quoting it (tests/vectors/demo).
    const quoted = expect.text.slice(0, expect.text.indexOf(".") + 1);
    assert.equal(quoted, 'The get_weather tool returned: "Vienna: 24C, sunny".');
    assert.ok(result.text.startsWith(quoted), result.text);
    assert.equal(result.finishReason, "stop");
    // The second request carried the assistant tool_calls and the tool result.
    const sent = result.steps[1].request.body;
    assert.deepEqual(
      sent.messages.map((m) => m.role),
      ["user", "assistant", "tool"],
    );
    assert.equal(sent.messages[2].content, "Vienna: 24C, sunny");
    assert.equal(sent.messages[2].tool_call_id, sent.messages[1].tool_calls[0].id);
  });

  test("parameters map to §4.5: maxOutputTokens is max_tokens (finish reason length)", async () => {
    const tokenwire = createTokenwire({ baseURL: GATEWAY });
    const result = streamText({
      model: tokenwire("demo"),
      prompt: "Tell me about streams.",
      maxOutputTokens: 7,
      temperature: 0,
    });
    await result.consumeStream();
    assert.equal(await result.finishReason, "length");
    assert.equal((await result.usage).outputTokens, 7);
    assert.deepEqual((await result.request).body.parameters, { max_tokens: 7, temperature: 0 });
  });

  test("abortSignal cancels the generation on the server", async () => {
    const rid = `ai-abort-${Date.now()}`;
    // The resume token (when the gateway gives one) is needed to read the stored stream.
    let token = null;
    const capture = async (url, init) => {
      const response = await fetch(url, init);
      token ??= response.headers.get("tokenwire-resume-token");
      return response;
    };
    const tokenwire = createTokenwire({ baseURL: GATEWAY, fetch: capture, resume: true });
    const controller = new AbortController();
    const result = streamText({
      model: tokenwire("demo"),
      prompt: "Tell me a long story about streams.",
      maxOutputTokens: 200,
      abortSignal: controller.signal,
      providerOptions: {
        tokenwire: {
          metadata: { request_id: rid },
          extensions: { "tokenwire:demo": { delay_ms: 20 } },
        },
      },
    });
    let pieces = 0;
    try {
      for await (const _ of result.textStream) if (++pieces === 2) controller.abort();
    } catch (exc) {
      if (exc?.name !== "AbortError") throw exc;
    }
    // The stored stream (GET /v1/streams/{id}) ends as cancelled, well before 200 tokens.
    const headers = { "Last-Event-ID": "0" };
    if (token) headers["Tokenwire-Resume-Token"] = token;
    const response = await fetch(`${GATEWAY}/v1/streams/${rid}`, { headers });
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.match(text, /"code":"cancelled"/);
    assert.ok(text.trimEnd().endsWith('"type":"stream.end"}') || /event: stream\.end/.test(text));
    assert.ok((text.match(/event: content\.delta/g) ?? []).length < 200);
  });

  test("a refused request rejects with the package's RequestError (4xx)", async () => {
    const tokenwire = createTokenwire({ baseURL: GATEWAY });
    await assert.rejects(
      generateText({ model: tokenwire("no-such-model"), prompt: "hi", maxRetries: 0 }),
      (exc) => {
        const cause = exc instanceof RequestError ? exc : (exc?.lastError ?? exc?.cause ?? exc);
        assert.ok(cause instanceof RequestError, String(exc));
        assert.equal(cause.status, 404);
        assert.equal(cause.code, "model_not_found");
        assert.equal(cause.path, "model");
        return true;
      },
    );
  });
});

describe("reasoning, from a recorded standard stream", () => {
  const vector = JSON.parse(readFileSync(join(VECTORS, "js", "reasoning-stream.json"), "utf8"));
  const body = vector.events
    .map((e) => `event: ${e.type}\nid: ${e.seq}\ndata: ${JSON.stringify(e)}\n\n`)
    .join("");
  let server;
  let baseURL;
  const requests = [];

  before(async () => {
    server = createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => (raw += c));
      req.on("end", () => {
        requests.push({ method: req.method, url: req.url, type: req.headers["content-type"], raw });
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        // Sent in small pieces, as a live stream arrives.
        const bytes = Buffer.from(body);
        for (let i = 0; i < bytes.length; i += 50) res.write(bytes.subarray(i, i + 50));
        res.end();
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    baseURL = `http://127.0.0.1:${server.address().port}`;
  });
  after(() => server.close());

  test("streamText: reasoning parts, then the text, usage and stop", async () => {
    const tokenwire = createTokenwire({ baseURL, resume: false });
    const result = streamText({ model: tokenwire("recorded-thinker"), prompt: "Hi!" });
    const types = [];
    for await (const part of result.fullStream) types.push(part.type);
    assert.equal(await result.reasoningText, vector.expect.reasoning);
    assert.equal(await result.text, vector.expect.text);
    assert.equal(await result.finishReason, vector.expect.finish_reason);
    const usage = await result.usage;
    assert.equal(usage.inputTokens, vector.expect.input_tokens);
    assert.equal(usage.outputTokens, vector.expect.output_tokens);
    assert.ok(types.indexOf("reasoning-start") < types.indexOf("text-start"), types.join(" "));
    // The request asked for reasoning (docs/extensions.md) in the standard envelope.
    const sent = JSON.parse(requests.at(-1).raw);
    assert.equal(requests.at(-1).type, "application/llm-request+json");
    assert.equal(sent.extensions["tokenwire:reasoning"], true);
    assert.deepEqual(sent.messages, [{ role: "user", content: "Hi!" }]);
    assert.equal(sent.version, "1.0");
    assert.equal(sent.stream, true);
  });
});

describe("tokenwire extension events in the parts (docs/extensions.md)", () => {
  const env = (seq, type, fields) => ({ v: "1.0", seq, type, ...fields });
  const finishOf = (events) => {
    const mapper = new PartMapper();
    const parts = events.flatMap((e) => mapper.feed(e));
    return parts.find((p) => p.type === "finish");
  };

  test("tokenwire.usage gives the cache counts; a citation is a source; .stop makes no part", () => {
    const mapper = new PartMapper();
    const parts = [
      env(0, "stream.start", { model: "m", created: 1 }),
      env(1, "content.delta", { index: 0, role: "assistant", delta: { text: "Hi" } }),
      env(2, "tokenwire.block", { index: 0, "tokenwire:citation": { url: "https://x" } }),
      env(3, "usage", { input_tokens: 10, output_tokens: 2 }),
      env(4, "tokenwire.usage", {
        "tokenwire:cache_read_input_tokens": 7,
        "tokenwire:cache_creation_input_tokens": 3,
      }),
      env(5, "tokenwire.stop", { "tokenwire:raw_stop_reason": "end_turn" }),
      env(6, "content.stop", { index: 0, stop_reason: "end_turn" }),
      env(7, "stream.end", {}),
    ].flatMap((e) => mapper.feed(e));
    assert.deepEqual(
      parts.map((p) => p.type),
      ["response-metadata", "text-start", "text-delta", "source", "text-end", "finish"],
    );
    assert.deepEqual(parts[3], {
      type: "source",
      sourceType: "url",
      id: "source-1",
      url: "https://x",
    });
    const { usage, finishReason } = parts.at(-1);
    assert.deepEqual(usage.inputTokens, {
      total: 10,
      noCache: undefined,
      cacheRead: 7,
      cacheWrite: 3,
    });
    assert.deepEqual(usage.raw, {
      input_tokens: 10,
      output_tokens: 2,
      "tokenwire:cache_read_input_tokens": 7,
      "tokenwire:cache_creation_input_tokens": 3,
    });
    assert.deepEqual(finishReason, { unified: "stop", raw: "end_turn" });
  });

  test("without tokenwire.usage the cache counts stay undefined", () => {
    const finish = finishOf([
      env(0, "stream.start", { model: "m", created: 1 }),
      env(1, "usage", { input_tokens: 1, output_tokens: 1 }),
      env(2, "stream.end", {}),
    ]);
    assert.equal(finish.usage.inputTokens.cacheRead, undefined);
    assert.equal(finish.usage.inputTokens.cacheWrite, undefined);
    assert.deepEqual(finish.usage.raw, { input_tokens: 1, output_tokens: 1 });
  });
});

describe("tokenwire extensions 1.1 in the parts (docs/extensions.md, New in 1.1)", () => {
  const env = (seq, type, fields) => ({ v: "1.0", seq, type, ...fields });
  const feed = (events) => {
    const mapper = new PartMapper();
    return events.flatMap((e) => mapper.feed(e));
  };

  test("an approval request is a provider-executed call and a tool-approval-request", () => {
    const approval = { id: "mcpr_1", name: "ask", arguments: '{"q":"?"}', server_label: "wiki" };
    const parts = feed([
      env(0, "stream.start", { model: "m", created: 1 }),
      env(1, "tokenwire.block", { index: 0, "tokenwire:approval": approval }),
      env(2, "content.stop", { index: 0, stop_reason: "end_turn" }),
      env(3, "stream.end", {}),
    ]);
    assert.deepEqual(parts.slice(1, 3), [
      {
        type: "tool-call",
        toolCallId: "mcpr_1",
        toolName: "ask",
        input: '{"q":"?"}',
        providerExecuted: true,
      },
      { type: "tool-approval-request", approvalId: "mcpr_1", toolCallId: "mcpr_1" },
    ]);
  });

  test("audio output is one file when its block stops; Gemini inline data a file", () => {
    const parts = feed([
      env(0, "stream.start", { model: "m", created: 1 }),
      env(1, "tokenwire.block", { index: 0, "tokenwire:audio": { id: "audio_1", data: "UklG" } }),
      env(2, "tokenwire.block", {
        index: 0,
        "tokenwire:audio": { data: "RgAA", transcript: "Hi" },
      }),
      env(3, "tokenwire.block", {
        index: 1,
        "tokenwire:raw": { inlineData: { mimeType: "image/png", data: "iVBO" } },
        "tokenwire:vendor": "gemini",
      }),
      env(4, "content.stop", { index: 0, stop_reason: "end_turn" }),
      env(5, "content.stop", { index: 1, stop_reason: "end_turn" }),
      env(6, "stream.end", {}),
    ]);
    const files = parts.filter((p) => p.type === "file");
    assert.deepEqual(files, [
      { type: "file", mediaType: "image/png", data: "iVBO" },
      { type: "file", mediaType: "audio/wav", data: "UklGRgAA" },
    ]);
  });

  test("tool approval responses in the prompt become tokenwire:approvals", async () => {
    let sent;
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        sent = JSON.parse(body);
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(
          'event: stream.start\ndata: {"v":"1.0","seq":0,"type":"stream.start","model":"m","created":1}\n\n' +
            'event: stream.end\ndata: {"v":"1.0","seq":1,"type":"stream.end"}\n\n',
        );
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const provider = createTokenwire({ baseURL: `http://127.0.0.1:${server.address().port}` });
      const model = provider("m");
      const { stream } = await model.doStream({
        prompt: [
          { role: "user", content: [{ type: "text", text: "Ask the wiki." }] },
          {
            role: "tool",
            content: [{ type: "tool-approval-response", approvalId: "mcpr_1", approved: true }],
          },
        ],
      });
      for await (const _ of stream) {
        // drain
      }
    } finally {
      server.close();
    }
    assert.deepEqual(sent.extensions["tokenwire:approvals"], [{ id: "mcpr_1", approve: true }]);
  });
});
