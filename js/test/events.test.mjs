// Event type names (docs/conformance.md ruling 13) and tokenwire's extension events
// (docs/extensions.md): parseEvent, the Validator and the Client, as in the Python core.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MODULE } from "./helpers.mjs";

const {
  Client,
  EventDecodeError,
  EXTENSION_EVENTS,
  EXTENSIONS,
  TYPE_NAME,
  isExtensionEvent,
  isKnown,
  isTypeName,
  parseEvent,
  validate,
} = await import(MODULE);

// The names of tests/test_events.py (VALID_NAMES / INVALID_NAMES).
const VALID_NAMES = [
  "stream.start",
  "tool.call",
  "x.vendor.note",
  "response.output_text.delta",
  "a-b_c.9",
];
const INVALID_NAMES = [
  "",
  "a".repeat(65),
  "vendor:note",
  "x note",
  " x",
  "x.",
  ".x",
  "a..b",
  "-x",
  "x\n",
  "x\r",
  "x\0",
  "caf\u00e9",
  "x/y",
];

const data = (type, fields = {}) => JSON.stringify({ v: "1.0", seq: 1, type, ...fields });

describe("type names", () => {
  for (const name of VALID_NAMES) {
    test(`valid: ${JSON.stringify(name)}`, () => {
      assert.ok(isTypeName(name));
      assert.ok(TYPE_NAME.test(name));
      if (isKnown(name)) return; // a registered type has its own fields
      assert.deepEqual(parseEvent(name, data(name)), { v: "1.0", seq: 1, type: name });
    });
  }
  for (const name of INVALID_NAMES) {
    test(`bad-type-name: ${JSON.stringify(name)}`, () => {
      assert.equal(isTypeName(name), false);
      assert.throws(
        () => parseEvent(name, data(name)),
        (exc) =>
          exc instanceof EventDecodeError &&
          exc.rule === "bad-type-name" &&
          exc.seq === null &&
          /is not a valid name/.test(exc.message),
      );
    });
  }

  test("the name is checked before the data: bad JSON under a bad name is bad-type-name", () => {
    assert.throws(
      () => parseEvent("vendor:note", "{"),
      (exc) => exc.rule === "bad-type-name",
    );
  });

  test("64 characters pass, 65 do not; a long name is cut short in the message", () => {
    assert.ok(isTypeName("a".repeat(64)));
    assert.equal(isTypeName(42), false);
    assert.throws(
      () => parseEvent("x".repeat(10_000), "{}"),
      (exc) => exc.rule === "bad-type-name" && exc.message.length < 300,
    );
  });

  test("the validator reports bad-type-name (MUST, §5.1) and keeps counting seqs", () => {
    const frame = (name, fields) =>
      `event: ${name}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...fields })}\n\n`;
    const body =
      frame("stream.start", { seq: 0, model: "m", created: 1 }) +
      frame("vendor:note", { seq: 1 }) +
      frame("content.delta", { seq: 2, index: 0, role: "assistant", delta: { text: "a" } }) +
      frame("content.stop", { seq: 3, index: 0, stop_reason: "end_turn" }) +
      frame("usage", { seq: 4, input_tokens: 1, output_tokens: 1 }) +
      frame("stream.end", { seq: 5 });
    const report = validate(body);
    assert.deepEqual(
      report.violations.map((v) => [v.rule, v.seq, v.section, v.level]),
      [["bad-type-name", null, "5.1", "must"]],
    );
    assert.equal(report.ok, false);
  });
});

// What the Anthropic translator emits (src/tokenwire/translate/anthropic/stream.py).
const BLOCK = {
  index: 0,
  [EXTENSIONS.reasoning]: true,
  [EXTENSIONS.signature]: "sig==",
  [EXTENSIONS.vendor]: "anthropic",
};
const CACHE = {
  [EXTENSIONS.cacheReadInputTokens]: 7,
  [EXTENSIONS.cacheCreationInputTokens]: 3,
};
const STOP = { [EXTENSIONS.rawStopReason]: "pause_turn" };

function extensionStream() {
  const frame = (name, fields) =>
    `event: ${name}\nid: ${fields.seq}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...fields })}\n\n`;
  return [
    frame("stream.start", { seq: 0, model: "demo", created: 1, request_id: "r-1" }),
    frame("content.delta", {
      seq: 1,
      index: 0,
      role: "assistant",
      delta: { text: "think" },
      "tokenwire:reasoning": true,
    }),
    frame("tokenwire.block", { seq: 2, ...BLOCK }),
    frame("content.delta", { seq: 3, index: 1, role: "assistant", delta: { text: "Hi" } }),
    frame("usage", { seq: 4, input_tokens: 10, output_tokens: 2 }),
    frame("tokenwire.usage", { seq: 5, ...CACHE }),
    frame("tokenwire.stop", { seq: 6, ...STOP }),
    frame("content.stop", { seq: 7, index: 0, stop_reason: "end_turn" }),
    frame("content.stop", { seq: 8, index: 1, stop_reason: "end_turn" }),
    frame("stream.end", { seq: 9, request_id: "r-1" }),
  ].join("");
}

describe("extension events", () => {
  test("the three type names, valid names, never registered", () => {
    assert.deepEqual(Object.values(EXTENSION_EVENTS), [
      "tokenwire.block",
      "tokenwire.usage",
      "tokenwire.stop",
    ]);
    for (const name of Object.values(EXTENSION_EVENTS)) assert.ok(isTypeName(name));
  });

  test("isExtensionEvent tells them apart, by kind when given", () => {
    const block = parseEvent("tokenwire.block", data("tokenwire.block", BLOCK));
    const stop = parseEvent("tokenwire.stop", data("tokenwire.stop", STOP));
    const other = parseEvent("x.progress", data("x.progress"));
    assert.ok(isExtensionEvent(block));
    assert.ok(isExtensionEvent(block, "tokenwire.block"));
    assert.equal(isExtensionEvent(block, "tokenwire.stop"), false);
    assert.ok(isExtensionEvent(stop, "tokenwire.stop"));
    assert.equal(stop[EXTENSIONS.rawStopReason], "pause_turn");
    assert.equal(isExtensionEvent(other), false);
    assert.equal(
      isExtensionEvent(parseEvent("usage", data("usage", { input_tokens: 1, output_tokens: 1 }))),
      false,
    );
  });

  test("a stream with them is conformant: accepted anywhere inside the stream", () => {
    const report = validate(extensionStream());
    assert.deepEqual(report.violations, []);
    assert.equal(report.ok, true);
  });

  test("the Client passes them through, in order, with their fields", async () => {
    const client = new Client({
      baseURL: "http://gateway.test",
      resume: false,
      fetch: async () =>
        new Response(extensionStream(), { headers: { "content-type": "text/event-stream" } }),
    });
    const stream = client.stream({
      model: "demo",
      messages: [{ role: "user", content: "hi" }],
      metadata: { request_id: "r-1" },
    });
    const got = [];
    for await (const event of stream) got.push(event);
    assert.deepEqual(
      got.map((e) => e.type),
      [
        "stream.start",
        "content.delta",
        "tokenwire.block",
        "content.delta",
        "usage",
        "tokenwire.usage",
        "tokenwire.stop",
        "content.stop",
        "content.stop",
        "stream.end",
      ],
    );
    const extensions = got.filter((e) => isExtensionEvent(e));
    assert.deepEqual(
      extensions.map(({ v, seq, type, ...fields }) => [type, fields]),
      [
        ["tokenwire.block", BLOCK],
        ["tokenwire.usage", CACHE],
        ["tokenwire.stop", STOP],
      ],
    );
    assert.deepEqual(stream.violations, []);
  });
});

test("the Client skips an event with a bad type name and records bad-type-name", async () => {
  const frame = (name, fields) =>
    `event: ${name}\nid: ${fields.seq}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...fields })}\n\n`;
  const body = [
    frame("stream.start", { seq: 0, model: "demo", created: 1, request_id: "r-1" }),
    frame("vendor:note", { seq: 1 }),
    frame("content.delta", { seq: 2, index: 0, role: "assistant", delta: { text: "a" } }),
    frame("content.stop", { seq: 3, index: 0, stop_reason: "end_turn" }),
    frame("usage", { seq: 4, input_tokens: 1, output_tokens: 1 }),
    frame("stream.end", { seq: 5, request_id: "r-1" }),
  ].join("");
  const client = new Client({
    baseURL: "http://gateway.test",
    resume: false,
    fetch: async () => new Response(body, { headers: { "content-type": "text/event-stream" } }),
  });
  const stream = client.stream({
    model: "demo",
    messages: [{ role: "user", content: "hi" }],
    metadata: { request_id: "r-1" },
  });
  const types = [];
  for await (const event of stream) types.push(event.type);
  assert.deepEqual(types, ["stream.start", "content.delta", "content.stop", "usage", "stream.end"]);
  assert.deepEqual(
    stream.violations.map((v) => [v.rule, v.seq]),
    [["bad-type-name", null]],
  );
});
