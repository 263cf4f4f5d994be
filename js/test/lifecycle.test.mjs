// The package's Validator / validate against the shared lifecycle vectors
// (tests/vectors/lifecycle/cases.json), the ones tests/test_lifecycle.py runs.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { lifecycleCases, MODULE, wire } from "./helpers.mjs";

const { RULES, TRANSITIONS, REFUSALS, Validator, parseEvent, validate, EventDecodeError, isKnown } =
  await import(MODULE);

const CASES = lifecycleCases();

describe("shared lifecycle vectors", () => {
  for (const c of CASES) {
    test(c.name, () => {
      const report = validate(wire(c), { request: c.request ?? null });
      assert.deepEqual(
        report.violations.map((v) => v.rule),
        c.rules,
      );
      assert.equal(report.ok, c.ok);
      for (const v of report.violations) {
        assert.equal(v.section, RULES[v.rule].section);
        assert.equal(v.level, RULES[v.rule].level);
      }
    });
    test(`${c.name} (byte by byte)`, () => {
      const body = wire(c);
      const chunks = Array.from(body, (b) => Uint8Array.of(b));
      const report = validate(chunks, { request: c.request ?? null });
      assert.deepEqual(
        report.violations.map((v) => v.rule),
        c.rules,
      );
    });
  }
});

test("every rule has a vector that triggers it alone", () => {
  const alone = new Set(CASES.filter((c) => new Set(c.rules).size === 1).map((c) => c.rules[0]));
  const untested = Object.keys(RULES).filter(
    (r) => !alone.has(r) && r !== "framing" && r !== "seq-exhausted",
  );
  assert.deepEqual(untested, []);
});

test("the rule table names the brief's codes", () => {
  for (const code of [
    "seq-gap",
    "start-not-first",
    "missing-end",
    "type-mismatch",
    "invalid-json",
    "block-not-stopped",
    "after-end",
  ]) {
    assert.ok(RULES[code], code);
    assert.equal(RULES[code].level, "must");
  }
});

test("the transition table: only stream.start leaves idle; nothing leaves closed", () => {
  const fromIdle = Object.keys(TRANSITIONS).filter((k) => k.startsWith("idle "));
  assert.deepEqual(fromIdle, ["idle stream.start"]);
  assert.ok(!Object.keys(TRANSITIONS).some((k) => k.startsWith("closed ")));
  assert.equal(REFUSALS["closed *"], "after-end");
});

describe("parseEvent", () => {
  test("returns the envelope with unknown fields kept", () => {
    const ev = parseEvent(
      "usage",
      '{"v":"1.0","seq":3,"type":"usage","input_tokens":1,"output_tokens":2,"x-extra":true}',
    );
    assert.equal(ev.output_tokens, 2);
    assert.equal(ev["x-extra"], true);
  });

  test("an unknown type is returned as is", () => {
    const ev = parseEvent("x.note", '{"v":"1.0","seq":2,"type":"x.note","anything":[1]}');
    assert.equal(isKnown(ev.type), false);
  });

  for (const [name, data, rule, seq] of [
    ["usage", "{", "invalid-json", null],
    ["usage", "[1]", "invalid-json", null],
    ["usage", "null", "invalid-json", null],
    ["content.delta", '{"v":"1.0","seq":4,"type":"usage"}', "type-mismatch", 4],
    ["message", '{"v":"1.0","seq":1,"type":"content.delta"}', "type-mismatch", 1],
    ["usage", '{"v":"1.0","seq":5,"type":"usage","input_tokens":1}', "invalid-field", 5],
    [
      "usage",
      '{"v":"1.0","seq":5,"type":"usage","input_tokens":-1,"output_tokens":0}',
      "invalid-field",
      5,
    ],
    [
      "content.delta",
      '{"v":"1.0","seq":1,"type":"content.delta","index":0,"role":"assistant","delta":{}}',
      "invalid-field",
      1,
    ],
    [
      "stream.start",
      '{"v":"1.0","seq":-1,"type":"stream.start","model":"m","created":1}',
      "invalid-field",
      null,
    ],
    [
      "stream.start",
      '{"v":1,"seq":0,"type":"stream.start","model":"m","created":1}',
      "invalid-field",
      0,
    ],
  ]) {
    test(`${rule}: ${data}`, () => {
      assert.throws(
        () => parseEvent(name, data),
        (exc) => exc instanceof EventDecodeError && exc.rule === rule && exc.seq === seq,
      );
    });
  }
});

describe("verdicts", () => {
  const start = '{"v":"1.0","seq":0,"type":"stream.start","model":"m","created":1}';
  const delta = (seq, text = "a") =>
    `{"v":"1.0","seq":${seq},"type":"content.delta","index":0,"role":"assistant","delta":{"text":"${text}"}}`;
  const frame = (name, data) => `event: ${name}\ndata: ${data}\n\n`;

  test("§5.5 shape: conformant, no violations", () => {
    const body =
      frame("stream.start", start) +
      frame("content.delta", delta(1)) +
      frame(
        "content.stop",
        '{"v":"1.0","seq":2,"type":"content.stop","index":0,"stop_reason":"end_turn"}',
      ) +
      frame("usage", '{"v":"1.0","seq":3,"type":"usage","input_tokens":1,"output_tokens":1}') +
      frame("stream.end", '{"v":"1.0","seq":4,"type":"stream.end"}');
    const report = validate(body);
    assert.equal(report.ok, true);
    assert.deepEqual(report.violations, []);
    assert.equal(report.events, 5);
  });

  test("a truncated stream: missing-end, with the last seq", () => {
    const report = validate(frame("stream.start", start) + frame("content.delta", delta(1)));
    assert.equal(report.ok, false);
    assert.deepEqual(
      report.violations.map((v) => [v.rule, v.seq]),
      [["missing-end", 1]],
    );
  });

  test("an empty body: missing-start", () => {
    assert.deepEqual(
      validate("").violations.map((v) => v.rule),
      ["missing-start"],
    );
  });

  test("a framing failure is reported alone", () => {
    const body =
      frame("stream.start", start) + `event: content.delta\ndata: ${"x".repeat(200)}\n\n`;
    const report = validate(body, { maxEventBytes: 100 });
    assert.deepEqual(
      report.violations.map((v) => [v.rule, v.seq]),
      [["framing", 0]],
    );
  });

  test("errors and warnings are split by level", () => {
    const body =
      frame("stream.start", start) +
      frame("content.delta", delta(1)) +
      frame(
        "content.stop",
        '{"v":"1.0","seq":2,"type":"content.stop","index":0,"stop_reason":"end_turn"}',
      ) +
      frame("stream.end", '{"v":"1.0","seq":3,"type":"stream.end"}');
    const report = validate(body);
    assert.equal(report.ok, true);
    assert.deepEqual(
      report.warnings.map((v) => v.rule),
      ["missing-usage"],
    );
    assert.deepEqual(report.errors, []);
  });

  test("Validator.feed returns the violations of that one event", () => {
    const validator = new Validator();
    assert.deepEqual(validator.feed(parseEvent("stream.start", start)), []);
    const got = validator.feed(parseEvent("content.delta", delta(3)));
    assert.deepEqual(
      got.map((v) => [v.rule, v.seq, v.section]),
      [["seq-gap", 3, "5.2.1"]],
    );
    assert.match(got[0].message, /expected seq 1, got 3: 2 lost/);
  });
});
