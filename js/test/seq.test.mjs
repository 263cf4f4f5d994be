// Seq-gap detection on its own (§5.2.1) and as the page sees it, per item.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MODULE } from "./helpers.mjs";

const { SeqTracker, StreamResponse, MAX_SAFE_SEQ } = await import(MODULE);

test("§5.2.1: 0, 1, 2, 5 means events 3 and 4 were lost", () => {
  const seq = new SeqTracker();
  assert.deepEqual(
    [0, 1, 2, 5].map((s) => seq.feed(s)),
    [null, null, null, { expected: 3, got: 5, lost: 2 }],
  );
  assert.equal(seq.lost, 2);
  assert.equal(seq.expected, 6);
});

test("a repeated or older seq is not a gap", () => {
  const seq = new SeqTracker();
  assert.deepEqual(
    [0, 1, 1, 0, 2].map((s) => seq.feed(s)),
    [null, null, null, null, null],
  );
  assert.equal(seq.lost, 0);
});

test("two gaps add up", () => {
  const seq = new SeqTracker();
  const gaps = [0, 2, 3, 7].map((s) => seq.feed(s)).filter(Boolean);
  assert.deepEqual(
    gaps.map((g) => g.lost),
    [1, 3],
  );
  assert.equal(seq.lost, 4);
});

test("past 2^53 no gap is computed (§8.4)", () => {
  const seq = new SeqTracker();
  seq.feed(0);
  assert.equal(seq.feed(MAX_SAFE_SEQ + 8), null);
});

function bodyOf(text, chunkSize = 7) {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.length; i += chunkSize)
        controller.enqueue(bytes.slice(i, i + chunkSize));
      controller.close();
    },
  });
}

const frame = (name, data) =>
  `event: ${name}\nid: ${data.seq}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...data })}\n\n`;
const delta = (seq, text) =>
  frame("content.delta", { seq, index: 0, role: "assistant", delta: { text } });

test("StreamResponse marks the gap on the item that reveals it, and the verdict names seq-gap", async () => {
  const text =
    frame("stream.start", { seq: 0, model: "m", created: 1 }) +
    delta(1, "Hel") +
    delta(4, "lo") +
    frame("content.stop", { seq: 5, index: 0, stop_reason: "end_turn" }) +
    frame("usage", { seq: 6, input_tokens: 1, output_tokens: 2 }) +
    frame("stream.end", { seq: 7 });
  const response = new StreamResponse(bodyOf(text));
  const items = [];
  for await (const item of response) items.push(item);
  assert.deepEqual(
    items.map((i) => i.event.seq),
    [0, 1, 4, 5, 6, 7],
  );
  assert.deepEqual(items[2].gap, { expected: 2, got: 4, lost: 2 });
  assert.deepEqual(
    items[2].violations.map((v) => v.rule),
    ["seq-gap"],
  );
  assert.equal(items.filter((i) => i.gap).length, 1);
  assert.equal(response.text, "Hello");
  assert.equal(response.report.ok, false);
  assert.deepEqual(
    response.report.violations.map((v) => v.rule),
    ["seq-gap"],
  );
});
