/**
 * tokenwire.js: a client for the LLM-Stream standard
 * (draft-spk-agentproto-llm-stream), for browsers and Node 18+, with no
 * dependencies and no build step.
 *
 * The layers, each usable alone:
 *
 * - {@link SSEDecoder}: an exact, incremental WHATWG server-sent-events
 *   decoder working on bytes (BOM, CR / LF / CRLF line ends even when split
 *   across chunks, comments, `id` with NUL ignored, `retry` digits only, no
 *   dispatch of an empty data buffer, nothing dispatched at end of input).
 *   It passes the same shared vectors as tokenwire's Python decoder.
 * - {@link parseEvent}: one SSE message to one event envelope (§5.2), keyed on
 *   the SSE `event:` name; raises {@link EventDecodeError} with a rule code.
 * - {@link Validator}: the §5 lifecycle, one event at a time, with the same
 *   rule codes as the Python validator (`seq-gap`, `start-not-first`,
 *   `missing-end`, `type-mismatch`, `invalid-json`, `block-not-stopped`,
 *   `after-end`, ...). {@link validate} runs it over a whole body.
 * - {@link stream}: `fetch` with a POST (EventSource cannot POST) and a
 *   `ReadableStream` reader, yielding each event with its arrival time.
 *
 * @example
 * import { stream } from "/static/tokenwire.js";
 * const controller = new AbortController();
 * const response = await stream("/v1/stream", {
 *   version: "1.0", stream: true, model: "demo",
 *   messages: [{ role: "user", content: "Hello" }],
 * }, { signal: controller.signal });
 * for await (const item of response) {
 *   if (item.event?.type === "content.delta") console.log(item.event.delta.text);
 * }
 * console.log(response.report.ok, response.report.violations);
 *
 * @module tokenwire
 */

/** The protocol version every envelope carries (§5.2). */
export const VERSION = "1.0";

/** The request media type (§4.1). */
export const REQUEST_MEDIA_TYPE = "application/llm-request+json";

/** The seven registered event types (§9.2), in lifecycle order. */
export const EVENT_TYPES = Object.freeze([
  "stream.start",
  "content.delta",
  "content.stop",
  "tool.call",
  "usage",
  "error",
  "stream.end",
]);

/** The registered stop reasons (§5.3.3). */
export const STOP_REASONS = Object.freeze(["end_turn", "max_tokens", "tool_use", "content_filter"]);

/**
 * The registered error codes (§5.3.6). `cancelled` is tokenwire's documented
 * extension code and is accepted beside them.
 */
export const ERROR_CODES = Object.freeze([
  "rate_limited",
  "context_length_exceeded",
  "content_filtered",
  "internal_error",
  "overloaded",
]);

/**
 * @typedef {Object} Rule
 * @property {string} section  The draft section the rule comes from.
 * @property {"must"|"should"} level  `must`: the stream is not conformant; `should`: a warning.
 * @property {string} summary  One sentence.
 */

/**
 * Every rule the validator knows, by stable code: the same codes, sections
 * and levels as `tokenwire.lifecycle.RULES` in Python. `invalid-arguments`
 * (tool arguments against the tool's JSON Schema) is the one rule this module
 * does not check.
 * @type {Readonly<Record<string, Rule>>}
 */
export const RULES = Object.freeze({
  framing: rule("5.1", "must", "the SSE framing could not be read (size limit exceeded)"),
  "invalid-json": rule("5.1", "must", "data is not exactly one complete JSON object"),
  "type-mismatch": rule("5.2", "must", "the JSON type differs from the SSE event: field"),
  "invalid-field": rule("5.3", "must", "a required field is missing or has the wrong type"),
  "bad-version": rule("5.2", "must", 'v is not "1.0"'),
  "start-seq-not-zero": rule("5.2.1", "must", "stream.start does not have seq 0"),
  "seq-gap": rule("5.2.1", "must", "seq skipped values: events were lost"),
  "seq-regression": rule("5.2.1", "must", "seq did not increase (duplicate or reordered event)"),
  "seq-exhausted": rule("8.4", "should", "seq passed 2^53; the stream should be terminated"),
  "missing-start": rule("5.3.1", "must", "the stream has no events at all"),
  "start-not-first": rule("5.3.1", "must", "the first event is not stream.start"),
  "duplicate-start": rule("5.4", "must", "a second stream.start"),
  "bad-role": rule("5.3.2", "must", 'content.delta role is not "assistant"'),
  "block-already-stopped": rule("5.3.3", "must", "an event for a block after its content.stop"),
  "unknown-stop-reason": rule("5.3.3", "must", "stop_reason is not a registered value"),
  "block-not-stopped": rule("5.4", "must", "stream.end while a block has no content.stop"),
  "bad-arguments-json": rule("5.3.4", "must", "tool.call arguments are not a JSON object"),
  "duplicate-tool-id": rule("5.3.4", "must", "two tool.call events share an id"),
  "tool-use-not-signalled": rule(
    "4.8",
    "should",
    "a tool.call block stopped with a stop_reason other than tool_use",
  ),
  "missing-usage": rule("5.3.5", "should", "no usage event in the stream"),
  "unknown-error-code": rule("5.3.6", "should", "error code is not a registered value"),
  "duplicate-error": rule("5.3", "must", "more than one error event"),
  "after-error": rule("5.4", "must", "content after an error: only usage, stream.end may follow"),
  "after-end": rule("5.3.7", "must", "an event after stream.end"),
  "missing-end": rule("5.3.7", "must", "the stream ended without stream.end"),
  "request-id-not-echoed": rule(
    "4.6",
    "should",
    "metadata.request_id is not echoed in stream.start/stream.end",
  ),
  "undeclared-tool": rule("8.2", "must", "tool.call names a tool the request did not declare"),
  "invalid-arguments": rule(
    "8.2",
    "must",
    "tool.call arguments do not match the tool's JSON Schema",
  ),
});

function rule(section, level, summary) {
  return Object.freeze({ section, level, summary });
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** Base class of every error this module throws. */
export class TokenwireError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The SSE framing could not be read: one pending event passed
 * `maxEventBytes`. `offset` is the input offset of the first byte over it.
 */
export class FramingError extends TokenwireError {
  /** @param {string} message @param {number} offset */
  constructor(message, offset) {
    super(message);
    /** @type {number} */
    this.offset = offset;
  }
}

/**
 * One SSE message whose data is not a valid event envelope.
 * `rule` is `invalid-json`, `type-mismatch` or `invalid-field`; `seq` is the
 * envelope's seq when it could be read, else `null`.
 */
export class EventDecodeError extends TokenwireError {
  /** @param {string} message @param {string} rule @param {number|null} seq */
  constructor(message, rule, seq = null) {
    super(message);
    /** @type {string} */
    this.rule = rule;
    /** @type {number|null} */
    this.seq = seq;
  }
}

/**
 * The endpoint answered with a non-2xx status. `status` is the HTTP status,
 * `body` the parsed JSON error body (`{error: {code, message, path}}`) when
 * there was one, else `null`; `code` is `body.error.code` when present.
 */
export class HTTPStatusError extends TokenwireError {
  constructor(status, body, text) {
    const detail = body?.error?.message ?? (text || "");
    super(`HTTP ${status}${detail ? `: ${detail}` : ""}`);
    /** @type {number} */
    this.status = status;
    /** @type {any} */
    this.body = body;
    /** @type {string|null} */
    this.code = body?.error?.code ?? null;
  }
}

// ---------------------------------------------------------------------------
// SSE decoding (WHATWG HTML, "event stream interpretation")
// ---------------------------------------------------------------------------

const LF = 0x0a;
const CR = 0x0d;
const EMPTY = new Uint8Array(0);

/**
 * One dispatched server-sent event.
 * @typedef {Object} Message
 * @property {string} event  The `event:` field, `"message"` when there was none.
 * @property {string} data  The data lines joined with LF.
 * @property {string} id  The last event ID in force when it was dispatched.
 * @property {number|null} retry  A valid `retry` given in this event's own block, else null.
 */

/**
 * Incremental WHATWG event-stream decoder: `feed(bytes) -> Message[]`.
 *
 * Lines are split on CR, LF and CRLF bytes only (never on U+2028 or other
 * Unicode separators), and each complete line is decoded as UTF-8 with
 * replacement characters, so a character split across chunks survives.
 *
 * `maxEventBytes` bounds one pending event (every line from the previous
 * blank line on, terminators included, or an unterminated line). Passing it
 * throws {@link FramingError}; events completed earlier in the same `feed`
 * are returned first and the error is thrown by the next call. After that
 * every call throws the same error.
 */
export class SSEDecoder {
  #max;
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  #pending = []; // pieces of the unterminated line (copies)
  #pendingBytes = 0;
  #fed = 0; // bytes consumed so far
  #blockStart = 0; // input offset of the pending block's first byte
  #skipLF = false; // the last byte was a CR that ended a line
  #atStart = true; // a BOM may still come
  #bomHead = EMPTY; // the first bytes, while they may be the start of a BOM
  #closed = false;
  #error = null;
  #data = [];
  #event = "";
  #id = ""; // the last event ID buffer
  #lastId = ""; // committed at each blank line
  #blockRetry = null;
  #reconnect = null;

  /** @param {{maxEventBytes?: number}} [options]  Default 1 MiB. */
  constructor({ maxEventBytes = 1 << 20 } = {}) {
    if (!(maxEventBytes >= 1)) throw new RangeError("maxEventBytes must be >= 1");
    this.#max = maxEventBytes;
  }

  /** The last event ID committed by a blank line. @type {string} */
  get lastEventId() {
    return this.#lastId;
  }

  /** The last valid `retry` value seen anywhere, or null. @type {number|null} */
  get reconnectMs() {
    return this.#reconnect;
  }

  /** Total bytes consumed so far (`FramingError.offset` counts in the same unit). */
  get bytesFed() {
    return this.#fed;
  }

  /**
   * Consume the next bytes and return the events they complete, in order.
   * Never throws on malformed bytes (invalid UTF-8 becomes U+FFFD, unknown
   * fields are ignored).
   * @param {Uint8Array|ArrayBuffer|string} chunk  A string is encoded as UTF-8.
   * @returns {Message[]}
   * @throws {FramingError} when one event passes `maxEventBytes`.
   * @throws {TokenwireError} when called after `close()`.
   */
  feed(chunk) {
    if (this.#error) throw this.#error;
    if (this.#closed) throw new TokenwireError("SSEDecoder.feed() called after close()");
    let bytes = toBytes(chunk);
    const out = [];
    if (bytes.length === 0) return out;
    this.#fed += bytes.length;
    let base = this.#fed - bytes.length; // offset of bytes[0]
    if (this.#skipLF) {
      // The LF of a CRLF split across chunks belongs to the CR's line.
      this.#skipLF = false;
      if (bytes[0] === LF) {
        if (this.#blockStart === base) this.#blockStart = base + 1; // that CRLF was a blank line
        bytes = bytes.subarray(1);
        base += 1;
      }
    }
    if (this.#atStart && bytes.length) {
      // One BOM, only at the very start of the stream, even split across chunks.
      // Its bytes count toward the first block, like the Python decoder's.
      const head = this.#bomHead.length ? concatBytes(this.#bomHead, bytes) : bytes;
      if (head.length < 3 && isBomPrefix(head)) {
        this.#bomHead = head.slice();
        return out; // wait for the rest of a possible BOM
      }
      this.#atStart = false;
      this.#bomHead = EMPTY;
      bytes = isBomPrefix(head) ? head.subarray(3) : head;
      base = this.#fed - bytes.length;
    }
    const n = bytes.length;
    if (n === 0) return out;
    let pos = 0;
    let nextLF = bytes.indexOf(LF, pos);
    let nextCR = bytes.indexOf(CR, pos);
    while (pos < n) {
      if (nextLF !== -1 && nextLF < pos) nextLF = bytes.indexOf(LF, pos);
      if (nextCR !== -1 && nextCR < pos) nextCR = bytes.indexOf(CR, pos);
      const end = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      if (end === -1) {
        // An unterminated line: keep a copy until its terminator comes.
        this.#pending.push(bytes.slice(pos));
        this.#pendingBytes += n - pos;
        break;
      }
      // The limit is checked at each line start: the block so far must fit.
      if (base + pos - this.#pendingBytes - this.#blockStart > this.#max) {
        this.#fail(this.#blockStart + this.#max);
        break;
      }
      let size = 1;
      if (bytes[end] === CR) {
        if (end + 1 < n) {
          if (bytes[end + 1] === LF) size = 2; // CRLF is one terminator
        } else {
          this.#skipLF = true; // the CR ended its line already; drop an LF that follows
        }
      }
      const blank = this.#line(this.#takeLine(bytes, pos, end), out);
      pos = end + size;
      if (blank) this.#blockStart = base + pos;
    }
    // The pending block (complete lines and the unterminated rest) must fit too.
    if (!this.#error && this.#fed - this.#blockStart > this.#max) {
      this.#fail(this.#blockStart + this.#max);
    }
    if (this.#error && !out.length) throw this.#error;
    return out;
  }

  #fail(offset) {
    this.#error = new FramingError(`SSE event larger than maxEventBytes=${this.#max}`, offset);
  }

  #takeLine(bytes, start, end) {
    if (this.#pendingBytes === 0) return bytes.subarray(start, end);
    const line = new Uint8Array(this.#pendingBytes + (end - start));
    let at = 0;
    for (const piece of this.#pending) {
      line.set(piece, at);
      at += piece.length;
    }
    line.set(bytes.subarray(start, end), at);
    this.#pending = [];
    this.#pendingBytes = 0;
    return line;
  }

  /** Process one complete line; returns true for a blank line. */
  #line(bytes, out) {
    if (bytes.length === 0) {
      // A blank line dispatches; it commits the id even without data, and
      // an empty data buffer dispatches nothing.
      this.#lastId = this.#id;
      if (this.#data.length) {
        out.push({
          event: this.#event || "message",
          data: this.#data.join("\n"),
          id: this.#id,
          retry: this.#blockRetry,
        });
        this.#data = [];
      }
      this.#event = "";
      this.#blockRetry = null;
      return true;
    }
    const text = this.#decoder.decode(bytes);
    const colon = text.indexOf(":");
    if (colon === 0) return; // a comment
    let name = text;
    let value = "";
    if (colon > 0) {
      name = text.slice(0, colon);
      value = text.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1); // exactly one space
    }
    // Field names are compared exactly: case, spaces and NUL matter.
    if (name === "data") this.#data.push(value);
    else if (name === "event") this.#event = value;
    else if (name === "id") {
      if (!value.includes("\0")) this.#id = value;
    } else if (name === "retry") {
      if (/^[0-9]+$/.test(value)) this.#blockRetry = this.#reconnect = Number(value);
    }
    return false;
  }

  /**
   * Signal the end of input. Always returns `[]`: an event without its
   * blank line is dropped and its id never committed.
   * @returns {Message[]}
   * @throws {FramingError} a pending framing error.
   */
  close() {
    if (this.#error) throw this.#error;
    this.#closed = true;
    this.#bomHead = EMPTY;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#data = [];
    this.#event = "";
    this.#blockRetry = null;
    return [];
  }
}

const encoder = new TextEncoder();
const BOM = [0xef, 0xbb, 0xbf];

/** True when `bytes` starts with the UTF-8 BOM, or is a (shorter) start of it. */
function isBomPrefix(bytes) {
  const n = Math.min(bytes.length, 3);
  for (let i = 0; i < n; i++) if (bytes[i] !== BOM[i]) return false;
  return n > 0;
}

function concatBytes(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === "string") return encoder.encode(chunk);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk))
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk == null) return EMPTY;
  throw new TypeError("expected bytes (Uint8Array, ArrayBuffer) or a string");
}

// ---------------------------------------------------------------------------
// Event envelopes (§5.2, §5.3)
// ---------------------------------------------------------------------------

/**
 * A decoded event: the JSON envelope exactly as sent, unknown fields
 * included (§5.2: parsers ignore them, a pass-through keeps them). Known
 * types have been checked field by field; a type outside the §9.2 registry
 * is returned as is (`isKnown(event.type)` is false).
 * @typedef {Object} Event
 * @property {string} type
 * @property {string} v
 * @property {number} seq
 */

const COUNT = "int >= 0";
// §5.3: required (and optional) fields of each registered type, by JSON kind.
const SCHEMAS = {
  "stream.start": { model: "str", created: "int", request_id: "str?" },
  "content.delta": { index: COUNT, role: "str", delta: "delta", "tokenwire:reasoning": "bool?" },
  "content.stop": { index: COUNT, stop_reason: "str" },
  "tool.call": { index: COUNT, id: "str", name: "str", arguments: "str" },
  usage: { input_tokens: COUNT, output_tokens: COUNT },
  error: { code: "str", message: "str" },
  "stream.end": { request_id: "str?" },
};

function kindOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (typeof value === "string") return "str";
  if (typeof value === "boolean") return "bool";
  return typeof value === "object" ? "object" : typeof value;
}

function fieldError(kind, value) {
  const optional = kind.endsWith("?");
  const want = optional ? kind.slice(0, -1) : kind;
  if (value === undefined) return optional ? null : "missing";
  if (optional && value === null) return null;
  const got = kindOf(value);
  switch (want) {
    case "int":
      return got === "int" ? null : `Expected \`int\`, got \`${got}\``;
    case COUNT:
      if (got !== "int") return `Expected \`int\`, got \`${got}\``;
      return value >= 0 ? null : "Expected `int` >= 0";
    case "delta":
      if (got !== "object") return `Expected \`object\`, got \`${got}\``;
      if (value.text === undefined) return "Object missing required field `text`";
      return kindOf(value.text) === "str"
        ? null
        : `Expected \`str\`, got \`${kindOf(value.text)}\``;
    default:
      return got === want ? null : `Expected \`${want}\`, got \`${got}\``;
  }
}

function checkFields(name, obj) {
  const fields = { v: "str", seq: COUNT, ...SCHEMAS[name] };
  for (const [field, kind] of Object.entries(fields)) {
    const problem = fieldError(kind, obj[field]);
    if (problem === "missing") return `${name}: Object missing required field \`${field}\``;
    if (problem) return `${name}: ${problem} - at \`$.${field}\``;
  }
  return null;
}

/**
 * Decode one SSE message into an event envelope. The SSE `event:` name picks
 * the rules (§5.2: the TLV "T"); the JSON `type` must match it.
 * @param {string} name  The SSE `event:` field (`"message"` when absent).
 * @param {string} data  The SSE data.
 * @returns {Event}  The envelope; for a type outside the registry, `isKnown(event.type)` is false.
 * @throws {EventDecodeError} `invalid-json` (not one JSON object), `type-mismatch`
 *   (JSON type differs from `name`) or `invalid-field` (a required field
 *   missing or of the wrong type).
 */
export function parseEvent(name, data) {
  let obj;
  try {
    obj = JSON.parse(data);
  } catch (exc) {
    throw new EventDecodeError(`§5.1: data is not valid JSON: ${exc.message}`, "invalid-json");
  }
  if (kindOf(obj) !== "object") {
    throw new EventDecodeError("§5.1: data is JSON but not a JSON object", "invalid-json");
  }
  const known = Object.hasOwn(SCHEMAS, name);
  const seqOk = Number.isInteger(obj.seq) && (!known || obj.seq >= 0);
  const seq = seqOk ? obj.seq : null;
  if (obj.type !== name) {
    throw new EventDecodeError(
      `§5.2: JSON type ${JSON.stringify(obj.type ?? null)} ` +
        `does not match SSE event ${JSON.stringify(name)}`,
      "type-mismatch",
      seq,
    );
  }
  if (known) {
    const problem = checkFields(name, obj);
    if (problem) throw new EventDecodeError(problem, "invalid-field", seq);
  }
  return obj;
}

/** True when `type` is one of the seven registered event types. */
export function isKnown(type) {
  return Object.hasOwn(SCHEMAS, type);
}

// ---------------------------------------------------------------------------
// Sequence numbers (§5.2.1)
// ---------------------------------------------------------------------------

/** §8.4: past this, JavaScript numbers cannot tell seqs apart. */
export const MAX_SAFE_SEQ = 2 ** 53;

/**
 * A seq gap: `expected` was due, `got` arrived, so `got - expected` events were lost.
 * @typedef {Object} Gap
 * @property {number} expected
 * @property {number} got
 * @property {number} lost
 */

/**
 * Seq-gap detection on its own (§5.2.1: "0, 1, 2, 5 indicates events 3 and 4
 * were lost"). `feed(seq)` returns a {@link Gap} or null.
 */
export class SeqTracker {
  constructor() {
    /** The seq due next. */
    this.expected = 0;
    /** Events lost so far, by gaps. */
    this.lost = 0;
  }

  /**
   * @param {number} seq  The seq of the event that arrived.
   * @returns {Gap|null}  The gap it reveals, or null. A seq that does not
   *   increase is not a gap (the validator calls it `seq-regression`).
   */
  feed(seq) {
    const expected = this.expected;
    if (seq >= MAX_SAFE_SEQ) {
      // §8.4: no arithmetic is exact here any more; the validator warns instead.
      this.expected = seq;
      return null;
    }
    if (seq < expected) return null;
    this.expected = seq + 1;
    if (seq === expected) return null;
    this.lost += seq - expected;
    return { expected, got: seq, lost: seq - expected };
  }
}

// ---------------------------------------------------------------------------
// The lifecycle validator (§5.4): a port of tokenwire.lifecycle
// ---------------------------------------------------------------------------

/**
 * One broken rule.
 * @typedef {Object} Violation
 * @property {string} rule  A stable code from {@link RULES}.
 * @property {number|null} seq  The offending event's seq.
 * @property {string} section  The draft section.
 * @property {"must"|"should"} level
 * @property {string} message  One sentence.
 */

const IDLE = "idle";
const STREAMING = "streaming";
const ERRORED = "errored";
const CLOSED = "closed";
const UNKNOWN = "*";

/** (state, event type) -> next state. Anything missing is refused (REFUSALS). */
export const TRANSITIONS = Object.freeze({
  "idle stream.start": STREAMING,
  "streaming content.delta": STREAMING,
  "streaming tool.call": STREAMING,
  "streaming usage": STREAMING,
  "streaming content.stop": STREAMING,
  "streaming *": STREAMING,
  "streaming error": ERRORED, // §5.4: error may stand for open blocks' stops
  "streaming stream.end": CLOSED,
  "errored usage": ERRORED,
  "errored *": ERRORED,
  "errored stream.end": CLOSED,
});

/** The violation for a move TRANSITIONS does not allow: (state, type), then (state, "*"). */
export const REFUSALS = Object.freeze({
  "idle *": "start-not-first",
  "streaming stream.start": "duplicate-start",
  "errored stream.start": "duplicate-start",
  "errored error": "duplicate-error",
  "errored *": "after-error",
  "closed *": "after-end",
});

/**
 * The §5 lifecycle, fed one event at a time; the same rules, codes and
 * recovery as tokenwire's Python `lifecycle.Validator`.
 *
 * With `request` (the request object that was sent), it also checks the
 * §4.6 request_id echo and that every tool.call names a declared tool (§8.2).
 */
export class Validator {
  /** @param {{request?: any}} [options] */
  constructor({ request = null } = {}) {
    /** `idle`, `streaming`, `errored` or `closed`. */
    this.state = IDLE;
    /** @type {Violation[]} */
    this.violations = [];
    /** Events seen, decodable or not. */
    this.events = 0;
    this._expected = 0;
    this._lastSeq = null;
    this._open = new Set();
    this._stopped = new Set();
    this._toolBlocks = new Set();
    this._toolIds = new Set();
    this._usage = false;
    this._errorSeen = false;
    this._decoded = 0;
    const rid = request?.metadata?.request_id;
    this._requestId = typeof rid === "string" ? rid : null;
    this._tools = Array.isArray(request?.tools) ? new Set(request.tools.map((t) => t?.name)) : null;
  }

  /** True while no MUST has been broken. */
  get ok() {
    return !this.violations.some((v) => v.level === "must");
  }

  _report(code, seq, message) {
    const r = RULES[code];
    const v = Object.freeze({ rule: code, seq, section: r.section, level: r.level, message });
    this.violations.push(v);
    return v;
  }

  _checkSeq(seq) {
    const expected = this._expected;
    if (seq >= MAX_SAFE_SEQ) {
      // §8.4: JSON numbers in JavaScript lose precision here, so seq
      // arithmetic means nothing any more: only warn.
      this._expected = seq;
      this._lastSeq = seq;
      this._report("seq-exhausted", seq, `seq ${seq} is past 2^53`);
      return;
    }
    if (seq === expected) {
      this._expected = seq + 1;
    } else if (seq > expected) {
      this._report("seq-gap", seq, `expected seq ${expected}, got ${seq}: ${seq - expected} lost`);
      this._expected = seq + 1;
    } else {
      this._report("seq-regression", seq, `seq ${seq} after seq ${this._lastSeq}`);
    }
    this._lastSeq = seq;
  }

  /**
   * Record an event that could not be decoded.
   * @param {EventDecodeError} error
   * @returns {Violation[]} the violations it caused.
   */
  feedInvalid(error) {
    const before = this.violations.length;
    this.events += 1;
    this._report(error.rule, error.seq, error.message);
    if (error.seq !== null && error.seq !== undefined) this._checkSeq(error.seq);
    else if (this.state !== IDLE) this._expected += 1; // assume it took the next seq
    if (this.state === IDLE) this.state = STREAMING;
    return this.violations.slice(before);
  }

  /**
   * Check one decoded event.
   * @param {Event} event  From {@link parseEvent}.
   * @returns {Violation[]} the violations it caused (also kept in `violations`).
   */
  feed(event) {
    const before = this.violations.length;
    this.events += 1;
    this._decoded += 1;
    const kind = event.type;
    const registered = isKnown(kind);
    const key = registered ? kind : UNKNOWN;
    const v = typeof event.v === "string" ? event.v : null;
    const seq = Number.isInteger(event.seq) ? event.seq : null;

    if (v !== VERSION) {
      this._report("bad-version", seq, `v is ${JSON.stringify(v)}, not "${VERSION}"`);
    }
    if (seq === null) {
      this._report("invalid-field", null, `${kind}: the required field seq is missing`);
    } else if (kind === "stream.start" && this.state === IDLE && seq !== 0) {
      this._report("start-seq-not-zero", seq, `stream.start has seq ${seq}`);
      this._expected = seq + 1;
      this._lastSeq = seq;
    } else {
      this._checkSeq(seq);
    }

    let next = TRANSITIONS[`${this.state} ${key}`];
    if (next === undefined) {
      const code = REFUSALS[`${this.state} ${kind}`] ?? REFUSALS[`${this.state} *`];
      this._report(code, seq, `${kind} in state ${this.state}`);
      if (this.state !== IDLE) return this.violations.slice(before);
      // Recover as if stream.start had come, so later rules still run.
      this.state = STREAMING;
      next = TRANSITIONS[`${this.state} ${key}`] ?? STREAMING;
    }
    this.state = next;
    if (registered) this._checkEvent(event, seq);
    return this.violations.slice(before);
  }

  _checkEvent(event, seq) {
    switch (event.type) {
      case "content.delta":
        if (event.role !== "assistant") {
          this._report("bad-role", seq, `role is ${JSON.stringify(event.role)}`);
        }
        this._useBlock(event.index, seq, "content.delta");
        break;
      case "tool.call":
        this._useBlock(event.index, seq, "tool.call");
        this._toolBlocks.add(event.index);
        this._checkToolCall(event, seq);
        break;
      case "content.stop": {
        const { index, stop_reason: reason } = event;
        if (!STOP_REASONS.includes(reason)) {
          this._report(
            "unknown-stop-reason",
            seq,
            `stop_reason ${JSON.stringify(reason)} ` +
              `is not one of ${[...STOP_REASONS].sort().join(", ")}`,
          );
        }
        if (this._stopped.has(index)) {
          this._report("block-already-stopped", seq, `block ${index} stopped twice`);
        } else if (this._toolBlocks.has(index) && reason !== "tool_use") {
          this._report(
            "tool-use-not-signalled",
            seq,
            `block ${index} carried a tool.call but stopped with ${JSON.stringify(reason)}`,
          );
        }
        this._open.delete(index);
        this._stopped.add(index);
        break;
      }
      case "usage":
        this._usage = true;
        break;
      case "error":
        this._errorSeen = true;
        if (!ERROR_CODES.includes(event.code) && event.code !== "cancelled") {
          this._report("unknown-error-code", seq, `error code ${JSON.stringify(event.code)}`);
        }
        break;
      case "stream.start":
        this._checkEcho(event.request_id, seq, "stream.start");
        break;
      case "stream.end":
        this._checkEcho(event.request_id, seq, "stream.end");
        if (this._open.size && !this._errorSeen) {
          const blocks = [...this._open].sort((a, b) => a - b).join(", ");
          this._report("block-not-stopped", seq, `block(s) ${blocks} never stopped`);
        }
        break;
    }
  }

  _useBlock(index, seq, kind) {
    if (this._stopped.has(index)) {
      this._report("block-already-stopped", seq, `${kind} for block ${index} after its stop`);
    } else {
      this._open.add(index);
    }
  }

  _checkEcho(rid, seq, where) {
    if (this._requestId !== null && rid !== this._requestId) {
      this._report(
        "request-id-not-echoed",
        seq,
        `${where} request_id is ${JSON.stringify(rid ?? null)}, ` +
          `the request's is ${JSON.stringify(this._requestId)}`,
      );
    }
  }

  _checkToolCall(call, seq) {
    if (this._toolIds.has(call.id)) {
      this._report("duplicate-tool-id", seq, `tool call id ${JSON.stringify(call.id)} used twice`);
    }
    this._toolIds.add(call.id);
    let args;
    try {
      args = JSON.parse(call.arguments);
    } catch {
      this._report(
        "bad-arguments-json",
        seq,
        `arguments of ${JSON.stringify(call.name)} are not JSON`,
      );
      return;
    }
    if (kindOf(args) !== "object") {
      this._report(
        "bad-arguments-json",
        seq,
        `arguments of ${JSON.stringify(call.name)} are not a JSON object`,
      );
      return;
    }
    if (this._tools !== null && !this._tools.has(call.name)) {
      const declared = [...this._tools].sort().join(", ") || "none";
      this._report(
        "undeclared-tool",
        seq,
        `tool ${JSON.stringify(call.name)} was not declared (declared: ${declared})`,
      );
    }
  }

  /**
   * Record that the SSE framing failed: the rest cannot be read.
   * @param {FramingError} error
   */
  feedFramingError(error) {
    this._report("framing", this._lastSeq, error.message);
    this._framingFailed = true;
  }

  /**
   * End of input: report what never came.
   * @returns {Violation[]} the new violations.
   */
  close() {
    const before = this.violations.length;
    if (this._framingFailed) return [];
    if (this.events === 0) {
      this._report("missing-start", null, "no events were received");
    } else if (this._decoded === 0) {
      // nothing was an event at all: the decode violations say it all
    } else if (this.state !== CLOSED) {
      this._report(
        "missing-end",
        this._lastSeq,
        "the input ended before stream.end: truncated stream",
      );
    } else if (!this._usage && !this._errorSeen) {
      this._report("missing-usage", null, "at least one usage event should be sent");
    }
    return this.violations.slice(before);
  }

  /** The verdict so far. @returns {Report} */
  report() {
    return makeReport(this);
  }
}

/**
 * The outcome of a validation.
 * @typedef {Object} Report
 * @property {boolean} ok  True when no MUST was broken (the stream is conformant).
 * @property {number} events  Events seen.
 * @property {Violation[]} violations  Every violation, in order.
 * @property {Violation[]} errors  The MUST violations.
 * @property {Violation[]} warnings  The SHOULD violations.
 */

function makeReport(validator) {
  const violations = [...validator.violations];
  return Object.freeze({
    ok: validator.ok,
    events: validator.events,
    violations,
    errors: violations.filter((v) => v.level === "must"),
    warnings: violations.filter((v) => v.level === "should"),
  });
}

/**
 * Decode a whole SSE body and check it against every rule (but
 * `invalid-arguments`). Never throws for bad input: framing errors,
 * undecodable events and lifecycle breaks all come back as violations.
 * @param {string|Uint8Array|ArrayBuffer|Iterable<Uint8Array|string>} body
 * @param {{request?: any, maxEventBytes?: number}} [options]
 * @returns {Report}
 */
export function validate(body, { request = null, maxEventBytes = 1 << 20 } = {}) {
  const validator = new Validator({ request });
  const decoder = new SSEDecoder({ maxEventBytes });
  const chunks =
    typeof body === "string" || body instanceof Uint8Array || body instanceof ArrayBuffer
      ? [body]
      : body;
  try {
    for (const chunk of chunks) {
      for (const message of decoder.feed(chunk)) feedMessage(validator, message);
    }
    decoder.close();
  } catch (exc) {
    if (!(exc instanceof FramingError)) throw exc;
    validator.feedFramingError(exc);
  }
  validator.close();
  return validator.report();
}

function feedMessage(validator, message) {
  try {
    const event = parseEvent(message.event, message.data);
    return { event, error: null, violations: validator.feed(event) };
  } catch (exc) {
    if (!(exc instanceof EventDecodeError)) throw exc;
    return { event: null, error: exc, violations: validator.feedInvalid(exc) };
  }
}

// ---------------------------------------------------------------------------
// Over HTTP: fetch + ReadableStream
// ---------------------------------------------------------------------------

/**
 * One event as it arrived.
 * @typedef {Object} StreamItem
 * @property {Event|null} event  The envelope, or null when it did not decode.
 * @property {Message} message  The raw SSE message.
 * @property {EventDecodeError|null} error  Why it did not decode.
 * @property {Violation[]} violations  The rules this event broke.
 * @property {Gap|null} gap  The seq gap this event revealed (§5.2.1).
 * @property {number} time  Milliseconds from sending the request to the arrival of
 *   the bytes that completed this event.
 */

const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

/**
 * A standard response being read: iterate it (once) for {@link StreamItem}s.
 * After the iteration, `report` holds the lifecycle verdict; `text` is the
 * answer so far (the `delta.text` of non-reasoning blocks).
 */
export class StreamResponse {
  /**
   * @param {ReadableStream<Uint8Array>} body
   * @param {{request?: any, started?: number, status?: number, headers?: Headers,
   *   maxEventBytes?: number}} [options]
   */
  constructor(
    body,
    { request = null, started = now(), status = 200, headers = null, maxEventBytes } = {},
  ) {
    this.body = body;
    /** HTTP status. */
    this.status = status;
    /** Response headers (a `Headers`), when known. */
    this.headers = headers;
    /** When the request was sent (`performance.now()` time). */
    this.started = started;
    this.validator = new Validator({ request });
    this.decoder = new SSEDecoder({ maxEventBytes });
    this.seq = new SeqTracker();
    /** The answer text so far. */
    this.text = "";
    /** Milliseconds from the request to the first content.delta or tool.call. */
    this.ttft = null;
    /** True when the stream was aborted before its end. */
    this.aborted = false;
    /** @type {Report|null} */
    this.report = null;
  }

  _item(message, time) {
    const item = feedMessage(this.validator, message);
    item.message = message;
    item.time = time;
    const seq = item.event ? item.event.seq : item.error?.seq;
    item.gap = Number.isInteger(seq) ? this.seq.feed(seq) : null;
    const ev = item.event;
    if (ev && (ev.type === "content.delta" || ev.type === "tool.call")) {
      if (this.ttft === null) this.ttft = item.time;
      if (ev.type === "content.delta" && !ev["tokenwire:reasoning"]) this.text += ev.delta.text;
    }
    return item;
  }

  /** @returns {AsyncGenerator<StreamItem>} */
  async *[Symbol.asyncIterator]() {
    const reader = this.body.getReader();
    try {
      for (;;) {
        let result;
        try {
          result = await reader.read();
        } catch (exc) {
          if (exc?.name === "AbortError") this.aborted = true;
          throw exc;
        }
        // Stamped when the bytes arrived, not when the caller gets to the event.
        const time = now() - this.started;
        let messages;
        try {
          messages = result.done ? this.decoder.close() : this.decoder.feed(result.value);
        } catch (exc) {
          if (!(exc instanceof FramingError)) throw exc;
          this.validator.feedFramingError(exc);
          break;
        }
        for (const message of messages) yield this._item(message, time);
        if (result.done) break;
      }
    } finally {
      if (!this.aborted) {
        this.validator.close();
      }
      this.report = this.validator.report();
      reader.releaseLock?.();
    }
  }
}

/**
 * Send a standard request and return the streamed response.
 *
 * POSTs `request` as `application/llm-request+json` (§4.1) with `fetch`
 * (EventSource cannot POST) and reads the body with a `ReadableStream`
 * reader. Abort with `options.signal`: the iteration then throws the fetch's
 * `AbortError` and `response.aborted` is true.
 *
 * @param {string|URL} url  The endpoint, e.g. `/v1/stream`.
 * @param {any} request  The request envelope (§4.2), sent as JSON.
 * @param {{signal?: AbortSignal, headers?: Record<string,string>, fetch?: typeof fetch,
 *   maxEventBytes?: number}} [options]
 * @returns {Promise<StreamResponse>}
 * @throws {HTTPStatusError} a non-2xx answer (400 names the field, 415, 413...).
 * @throws {TokenwireError} a 2xx answer that is not `text/event-stream`.
 */
export async function stream(url, request, options = {}) {
  const doFetch = options.fetch ?? globalThis.fetch;
  const started = now();
  const response = await doFetch(url, {
    method: "POST",
    headers: {
      "Content-Type": REQUEST_MEDIA_TYPE,
      Accept: "text/event-stream",
      ...(options.headers ?? {}),
    },
    body: typeof request === "string" ? request : JSON.stringify(request),
    signal: options.signal,
    cache: "no-store",
  });
  return open(response, {
    request: typeof request === "string" ? null : request,
    started,
    ...options,
  });
}

/**
 * Wrap an already made `fetch` response whose body is a standard stream
 * (for example a replayed capture).
 * @param {Response} response
 * @param {{request?: any, started?: number, maxEventBytes?: number}} [options]
 * @returns {Promise<StreamResponse>}
 * @throws {HTTPStatusError|TokenwireError} as {@link stream}.
 */
export async function open(response, { request = null, started = now(), maxEventBytes } = {}) {
  if (!response.ok) {
    const text = await response.text().catch(() => "");
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    throw new HTTPStatusError(response.status, body, text);
  }
  const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "text/event-stream") {
    throw new TokenwireError(`expected text/event-stream, got ${type || "no content type"}`);
  }
  return new StreamResponse(response.body, {
    request,
    started,
    status: response.status,
    headers: response.headers,
    maxEventBytes,
  });
}
