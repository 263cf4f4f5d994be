// Shared by the node tests: where things are, and the vectors' byte encoding.
// The tests run on the built package (js/dist, `npm run build`), against the
// Python project's shared vectors (tests/vectors/).
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = join(PACKAGE, "..");
/** The package's entry point, as a file URL (what `import "tokenwire"` loads). */
export const MODULE = pathToFileURL(join(PACKAGE, "dist", "index.js")).href;
export const AI_SDK = pathToFileURL(join(PACKAGE, "dist", "ai-sdk.js")).href;
export const VECTORS = join(ROOT, "tests", "vectors");

/** Every case of tests/vectors/sse/*.json, with its file name. */
export function sseCases() {
  const dir = join(VECTORS, "sse");
  const cases = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()) {
    const doc = JSON.parse(readFileSync(join(dir, file), "utf8"));
    for (const c of doc.cases) cases.push({ ...c, file });
  }
  return cases;
}

/** The lifecycle vectors (tests/vectors/lifecycle/cases.json). */
export function lifecycleCases() {
  return JSON.parse(readFileSync(join(VECTORS, "lifecycle", "cases.json"), "utf8")).cases;
}

/**
 * The vectors' byte encoding: each character U+0000-U+00FF of the JSON
 * string stands for one byte (latin-1).
 */
export function latin1(text) {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0xff) throw new Error(`not a byte: U+${code.toString(16)}`);
    out[i] = code;
  }
  return out;
}

export function concat(chunks) {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** A lifecycle vector's events as an SSE body, as tests/test_lifecycle.py renders it. */
export function wire(c) {
  let out = "";
  for (const item of c.events) {
    const data = "raw" in item ? item.raw : JSON.stringify(item.data);
    if (item.event !== null) out += `event: ${item.event}\n`;
    for (const line of data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
    out += "\n";
  }
  return new TextEncoder().encode(out);
}

/** A small deterministic PRNG (mulberry32), for reproducible random chunkings. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `bytes` cut at `cuts` random points (empty chunks included). */
export function randomChunks(bytes, random, cuts = 6) {
  const points = Array.from({ length: cuts }, () => Math.floor(random() * (bytes.length + 1)));
  points.sort((a, b) => a - b);
  const out = [];
  let prev = 0;
  for (const p of points) {
    out.push(bytes.subarray(prev, p));
    prev = p;
  }
  out.push(bytes.subarray(prev));
  return out;
}

/**
 * GET /v1/streams/{rid} from seq 0 on `gateway`: the stream the gateway stored, to its
 * stream.end, as typed events (what a test reads back after a cancel or a cut).
 */
export async function replay(gateway, rid, token) {
  const { SSEDecoder, parseEvent } = await import(MODULE);
  const headers = { "Last-Event-ID": "0" };
  if (token) headers["Tokenwire-Resume-Token"] = token;
  const response = await fetch(`${gateway}/v1/streams/${rid}`, { headers });
  if (response.status !== 200) throw new Error(`replay of ${rid}: HTTP ${response.status}`);
  const decoder = new SSEDecoder();
  const events = [];
  for await (const chunk of response.body) {
    for (const m of decoder.feed(chunk)) events.push(parseEvent(m.event, m.data));
  }
  return events;
}
