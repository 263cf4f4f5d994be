// The binary binding's FrameDecoder against the shared frame vectors
// (tests/vectors/binary/frames.json), the ones tests/test_binary.py runs against Python.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { MODULE, VECTORS, lifecycleCases, prng, randomChunks } from "./helpers.mjs";

const { FrameDecoder, FramingError, decodeFrames, encodeFrame, validate, FrameType } = await import(
  MODULE
);

const CASES = JSON.parse(readFileSync(join(VECTORS, "binary", "frames.json"), "utf8")).cases;
const fromHex = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

function decodeAll(c, chunks) {
  const decoder = new FrameDecoder({ maxFrameBytes: c.max_frame_bytes, channels: c.channels });
  const frames = [];
  for (const chunk of chunks) frames.push(...decoder.feed(chunk));
  frames.push(...decoder.close());
  return frames;
}

function check(c, chunks) {
  if (c.error) {
    assert.throws(
      () => decodeAll(c, chunks),
      (exc) =>
        exc instanceof FramingError &&
        exc.offset === c.error.offset &&
        exc.message.includes(c.error.contains) &&
        exc.message.includes(`(at byte ${c.error.offset})`),
    );
    return;
  }
  const frames = decodeAll(c, chunks);
  assert.equal(frames.length, c.frames.length);
  frames.forEach((f, i) => {
    const want = c.frames[i];
    assert.equal(f.type, want.type);
    assert.equal(f.channel, want.channel ?? null);
    if ("json" in want) assert.deepEqual(JSON.parse(new TextDecoder().decode(f.body)), want.json);
    else assert.equal(toHex(f.body), want.hex);
  });
}

describe("frame vectors", () => {
  for (const c of CASES) {
    test(`${c.name}: whole`, () => check(c, [fromHex(c.hex)]));
    test(`${c.name}: byte by byte`, () => {
      const data = fromHex(c.hex);
      check(
        c,
        Array.from(data, (_, i) => data.subarray(i, i + 1)),
      );
    });
    test(`${c.name}: random splits`, () => {
      const rand = prng(c.name.length);
      for (let i = 0; i < 10; i++) check(c, randomChunks(fromHex(c.hex), rand));
    });
  }
});

describe("events in frames", () => {
  test("the lifecycle vectors validate as in SSE", () => {
    for (const c of lifecycleCases()) {
      if (c.rules.includes("type-mismatch")) continue; // SSE's second type carrier
      const parts = c.events.map((item) => {
        const data = "raw" in item ? item.raw : JSON.stringify(item.data);
        return encodeFrame(FrameType.EVENT, new TextEncoder().encode(data));
      });
      const body = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        body.set(p, at);
        at += p.length;
      }
      const report = validate(body, { framing: "binary", request: c.request ?? null });
      assert.deepEqual(
        report.violations.map((v) => v.rule),
        c.rules,
        c.name,
      );
    }
  });

  test("decodeFrames gives typed events", () => {
    const start = { v: "1.0", seq: 0, type: "stream.start", model: "m", created: 1 };
    const body = encodeFrame(FrameType.EVENT, new TextEncoder().encode(JSON.stringify(start)));
    const [event] = decodeFrames(body);
    assert.equal(event.type, "stream.start");
    assert.equal(event.seq, 0);
  });
});
