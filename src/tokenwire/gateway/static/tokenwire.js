/**
 * tokenwire.js: the browser build of the `tokenwire` npm package (js/ in the
 * tokenwire repository), served by the gateway at /static/tokenwire.js.
 *
 * GENERATED from js/src by `npm run build:static`: do not edit; change
 * js/src and rebuild (tests/js/test_js_package.py checks this file is current).
 */

// src/errors.ts
var TokenwireError = class extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
};
var FramingError = class extends TokenwireError {
  offset;
  constructor(message, offset) {
    super(message);
    this.offset = offset;
  }
};
var EventDecodeError = class extends TokenwireError {
  rule;
  seq;
  constructor(message, rule2, seq = null) {
    super(message);
    this.rule = rule2;
    this.seq = seq;
  }
};
var HTTPStatusError = class extends TokenwireError {
  status;
  body;
  code;
  path;
  constructor(status, body, text = "") {
    const detail = body?.error?.message ?? text;
    super(`HTTP ${status}${detail ? `: ${detail}` : ""}`);
    this.status = status;
    this.body = body;
    this.code = body?.error?.code ?? null;
    this.path = body?.error?.path ?? null;
  }
};
var UnsupportedMediaTypeError = class extends HTTPStatusError {
};
var RequestError = class extends HTTPStatusError {
};
var ServerError = class extends HTTPStatusError {
};
function httpError(status, body, text = "") {
  if (status === 415) return new UnsupportedMediaTypeError(status, body, text);
  if (status >= 400 && status < 500) return new RequestError(status, body, text);
  if (status >= 500) return new ServerError(status, body, text);
  return new HTTPStatusError(status, body, text);
}
var ProtocolError = class extends TokenwireError {
};
var ToolCallError = class extends TokenwireError {
  reason;
  toolName;
  callId;
  constructor(message, reason, toolName, callId) {
    super(message);
    this.reason = reason;
    this.toolName = toolName;
    this.callId = callId;
  }
};
var StreamError = class extends TokenwireError {
  code;
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
};
var StreamTruncatedError = class extends TokenwireError {
  lastSeq;
  constructor(message, lastSeq) {
    super(message);
    this.lastSeq = lastSeq;
  }
};

// src/events.ts
var VERSION = "1.0";
var REQUEST_MEDIA_TYPE = "application/llm-request+json";
var EVENT_TYPES = Object.freeze([
  "stream.start",
  "content.delta",
  "content.stop",
  "tool.call",
  "usage",
  "error",
  "stream.end"
]);
var STOP_REASONS = Object.freeze([
  "end_turn",
  "max_tokens",
  "tool_use",
  "content_filter"
]);
var ERROR_CODES = Object.freeze([
  "rate_limited",
  "context_length_exceeded",
  "content_filtered",
  "internal_error",
  "overloaded"
]);
var CANCELLED = "cancelled";
var EXTENSIONS = Object.freeze({
  /** Request: carry reasoning text as marked `content.delta` blocks. Event: the marker. */
  reasoning: "tokenwire:reasoning",
  /** Request: `{delay_ms: N}` paces the built-in demo model. */
  demo: "tokenwire:demo",
  /** Request: the gateway stores the stream so it can be resumed and cancelled. */
  resumable: "tokenwire:resumable",
  /** Request: tools the client must confirm before running (§8.2). */
  sideEffects: "tokenwire:side_effects",
  /** `tokenwire.block`: a reasoning block's opaque signature. */
  signature: "tokenwire:signature",
  /** `tokenwire.block`: a redacted reasoning block's opaque data. */
  redacted: "tokenwire:redacted",
  /** `tokenwire.block`: the vendor a signature or redacted data is bound to. */
  vendor: "tokenwire:vendor",
  /** `tokenwire.block`: a server-side tool block (shown, never executed). */
  serverTool: "tokenwire:server_tool",
  /** `tokenwire.block`: a citation of a text block. */
  citation: "tokenwire:citation",
  /** `tokenwire.stop`: the vendor's raw stop reason. */
  rawStopReason: "tokenwire:raw_stop_reason",
  /** `tokenwire.usage`: input tokens read from the vendor's prompt cache. */
  cacheReadInputTokens: "tokenwire:cache_read_input_tokens",
  /** `tokenwire.usage`: input tokens written to the vendor's prompt cache. */
  cacheCreationInputTokens: "tokenwire:cache_creation_input_tokens",
  /** `tokenwire.block`: a refusal marker on the block it concerns (1.1: the one carrier). */
  refusal: "tokenwire:refusal",
  /** `tokenwire.block`: the vendor's id of the item the block came from. */
  id: "tokenwire:id",
  /** `tokenwire.block`: the tool call a signature or tool kind belongs to. */
  toolCallId: "tokenwire:tool_call_id",
  /** `tokenwire.block`: a vendor object kept whole. */
  raw: "tokenwire:raw",
  /** 1.1 `tokenwire.block`: a client-run tool call that is not a JSON function (`custom`, `apply_patch`). */
  toolKind: "tokenwire:tool_kind",
  /** 1.1 `tokenwire.block`: an approval request (consent, never a result, never executed). */
  approval: "tokenwire:approval",
  /** 1.1 `tokenwire.block`: an MCP item the vendor ran (`list_tools`, `call`, `result`). */
  mcp: "tokenwire:mcp",
  /** 1.1 `tokenwire.block`: a compaction of the context, sent back byte-identical. */
  compaction: "tokenwire:compaction",
  /** 1.1 `tokenwire.block`: log probabilities of the text block's tokens. */
  logprobs: "tokenwire:logprobs",
  /** 1.1 `tokenwire.block`: audio output fragments (id, data, transcript). */
  audio: "tokenwire:audio",
  /** 1.1 `tokenwire.block`: the URLs retrieved, each with its status. */
  urlContext: "tokenwire:url_context",
  /** 1.1 `tokenwire.block`: code the vendor ran, or its result. */
  code: "tokenwire:code",
  /** 1.1 `tokenwire.block`: the vendor's own status of the item. */
  status: "tokenwire:status",
  /** 1.1 `tokenwire.stop` / request: the container a pause_turn continuation names. */
  container: "tokenwire:container",
  /** 1.1 request: the declared tools that are not JSON functions. */
  tools: "tokenwire:tools",
  /** 1.1 request: the answers to approval requests. */
  approvals: "tokenwire:approvals",
  /** 1.1 request: the vendor-bound blocks of earlier assistant messages. */
  blockHistory: "tokenwire:block_history"
});
var EXTENSION_EVENTS = Object.freeze({
  /** Metadata of standard block `index` ({@link BlockExtension}). */
  block: "tokenwire.block",
  /** Usage details next to the standard `usage` event ({@link UsageExtension}). */
  usage: "tokenwire.usage",
  /** The vendor's raw stop reason ({@link StopExtension}). */
  stop: "tokenwire.stop"
});
var TYPE_NAME = /^(?=.{1,64}$)[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9][A-Za-z0-9_-]*)*$/;
function isTypeName(name) {
  return typeof name === "string" && TYPE_NAME.test(name);
}
function isExtensionEvent(event, kind) {
  return kind === void 0 ? Object.values(EXTENSION_EVENTS).includes(event.type) : event.type === kind;
}
function isReasoning(event) {
  return event.type === "content.delta" && event[EXTENSIONS.reasoning] === true;
}
var COUNT = "int >= 0";
var SCHEMAS = {
  "stream.start": { model: "str", created: "int", request_id: "str?" },
  "content.delta": { index: COUNT, role: "str", delta: "delta", "tokenwire:reasoning": "bool?" },
  "content.stop": { index: COUNT, stop_reason: "str" },
  "tool.call": { index: COUNT, id: "str", name: "str", arguments: "str" },
  usage: { input_tokens: COUNT, output_tokens: COUNT },
  error: { code: "str", message: "str" },
  "stream.end": { request_id: "str?" }
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
  if (value === void 0) return optional ? null : "missing";
  if (optional && value === null) return null;
  const got = kindOf(value);
  switch (want) {
    case "int":
      return got === "int" ? null : `Expected \`int\`, got \`${got}\``;
    case COUNT:
      if (got !== "int") return `Expected \`int\`, got \`${got}\``;
      return value >= 0 ? null : "Expected `int` >= 0";
    case "delta": {
      if (got !== "object") return `Expected \`object\`, got \`${got}\``;
      const text = value.text;
      if (text === void 0) return "Object missing required field `text`";
      return kindOf(text) === "str" ? null : `Expected \`str\`, got \`${kindOf(text)}\``;
    }
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
function parseEvent(name, data) {
  const known = Object.hasOwn(SCHEMAS, name);
  if (!known && !isTypeName(name)) {
    throw new EventDecodeError(
      `§5.1: event type ${shown(name)} is not a valid name (dot-separated ASCII letters, digits, _ and -, at most 64 characters)`,
      "bad-type-name"
    );
  }
  let obj;
  try {
    obj = JSON.parse(data);
  } catch (exc) {
    throw new EventDecodeError(
      `§5.1: data is not valid JSON: ${exc.message}`,
      "invalid-json"
    );
  }
  if (kindOf(obj) !== "object") {
    throw new EventDecodeError("§5.1: data is JSON but not a JSON object", "invalid-json");
  }
  const record = obj;
  const seqOk = Number.isInteger(record.seq) && (!known || record.seq >= 0);
  const seq = seqOk ? record.seq : null;
  if (record.type !== name) {
    throw new EventDecodeError(
      `§5.2: JSON type ${JSON.stringify(record.type ?? null)} does not match SSE event ${JSON.stringify(name)}`,
      "type-mismatch",
      seq
    );
  }
  if (known) {
    const problem = checkFields(name, record);
    if (problem) throw new EventDecodeError(problem, "invalid-field", seq);
  }
  return record;
}
function shown(name) {
  return JSON.stringify(name.length <= 64 ? name : `${name.slice(0, 64)}...`);
}
function isKnown(type) {
  return typeof type === "string" && Object.hasOwn(SCHEMAS, type);
}

// src/sse.ts
var LF = 10;
var CR = 13;
var EMPTY = new Uint8Array(0);
var SSEDecoder = class {
  #max;
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  #pending = [];
  // pieces of the unterminated line (copies)
  #pendingBytes = 0;
  #fed = 0;
  // bytes consumed so far
  #blockStart = 0;
  // input offset of the pending block's first byte
  #skipLF = false;
  // the last byte was a CR that ended a line
  #atStart = true;
  // a BOM may still come
  #bomHead = EMPTY;
  // the first bytes, while they may be the start of a BOM
  #closed = false;
  #error = null;
  #data = [];
  #event = "";
  #id = "";
  // the last event ID buffer
  #lastId = "";
  // committed at each blank line
  #blockRetry = null;
  #reconnect = null;
  /** @param options.maxEventBytes  Default 1 MiB. */
  constructor({ maxEventBytes = 1 << 20 } = {}) {
    if (!(maxEventBytes >= 1)) throw new RangeError("maxEventBytes must be >= 1");
    this.#max = maxEventBytes;
  }
  /** The last event ID committed by a blank line. */
  get lastEventId() {
    return this.#lastId;
  }
  /** The last valid `retry` value seen anywhere, or null. */
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
   * @param chunk  A string is encoded as UTF-8.
   * @throws {@link FramingError} when one event passes `maxEventBytes`.
   * @throws {@link TokenwireError} when called after `close()`.
   */
  feed(chunk) {
    if (this.#error) throw this.#error;
    if (this.#closed) throw new TokenwireError("SSEDecoder.feed() called after close()");
    let bytes = toBytes(chunk);
    const out = [];
    if (bytes.length === 0) return out;
    this.#fed += bytes.length;
    let base = this.#fed - bytes.length;
    if (this.#skipLF) {
      this.#skipLF = false;
      if (bytes[0] === LF) {
        if (this.#blockStart === base) {
          this.#blockStart = base + 1;
        } else if (base + 1 - this.#blockStart > this.#max) {
          throw this.#fail(this.#blockStart + this.#max);
        }
        bytes = bytes.subarray(1);
        base += 1;
      }
    }
    if (this.#atStart && bytes.length) {
      const head = this.#bomHead.length ? concatBytes(this.#bomHead, bytes) : bytes;
      if (head.length < 3 && isBomPrefix(head)) {
        this.#bomHead = head.slice();
        return out;
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
        this.#pending.push(bytes.slice(pos));
        this.#pendingBytes += n - pos;
        break;
      }
      if (base + pos - this.#pendingBytes - this.#blockStart > this.#max) {
        this.#fail(this.#blockStart + this.#max);
        break;
      }
      let size = 1;
      if (bytes[end] === CR) {
        if (end + 1 < n) {
          if (bytes[end + 1] === LF) size = 2;
        } else {
          this.#skipLF = true;
        }
      }
      const blank = this.#line(this.#takeLine(bytes, pos, end), out);
      pos = end + size;
      if (blank) this.#blockStart = base + pos;
    }
    if (!this.#error && this.#fed - this.#blockStart > this.#max) {
      this.#fail(this.#blockStart + this.#max);
    }
    if (this.#error && !out.length) throw this.#error;
    return out;
  }
  #fail(offset) {
    this.#error = new FramingError(`SSE event larger than maxEventBytes=${this.#max}`, offset);
    return this.#error;
  }
  #takeLine(bytes, start, end) {
    if (this.#pendingBytes === 0) return bytes.subarray(start, end);
    const line = new Uint8Array(this.#pendingBytes + (end - start));
    let at2 = 0;
    for (const piece of this.#pending) {
      line.set(piece, at2);
      at2 += piece.length;
    }
    line.set(bytes.subarray(start, end), at2);
    this.#pending = [];
    this.#pendingBytes = 0;
    return line;
  }
  /** Process one complete line; returns true for a blank line. */
  #line(bytes, out) {
    if (bytes.length === 0) {
      this.#lastId = this.#id;
      if (this.#data.length) {
        out.push({
          event: this.#event || "message",
          data: this.#data.join("\n"),
          id: this.#id,
          retry: this.#blockRetry
        });
        this.#data = [];
      }
      this.#event = "";
      this.#blockRetry = null;
      return true;
    }
    const text = this.#decoder.decode(bytes);
    const colon = text.indexOf(":");
    if (colon === 0) return false;
    let name = text;
    let value = "";
    if (colon > 0) {
      name = text.slice(0, colon);
      value = text.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
    }
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
   * @throws {@link FramingError} a pending framing error.
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
};
var encoder = new TextEncoder();
var BOM = [239, 187, 191];
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

// src/binary.ts
var FRAMES_MEDIA_TYPE = "application/llm-stream-frames";
var FrameType = {
  EVENT: 1,
  ERROR: 2,
  PING: 3,
  META: 4,
  REQUEST: 16,
  CANCEL: 17,
  RESUME: 18
};
var CHANNEL_BIT = 128;
var HEAD = 5;
var CHANNEL = 4;
var MAX_PING = 64;
var KNOWN = new Set(Object.values(FrameType));
var isExtension = (t) => t >= 64 && t < 96;
function bytesOf(chunk) {
  if (typeof chunk === "string") return new TextEncoder().encode(chunk);
  if (chunk instanceof Uint8Array) return chunk;
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}
function hex(byte) {
  return `0x${byte.toString(16).padStart(2, "0")}`;
}
var FrameDecoder = class {
  maxFrameBytes;
  channels;
  #buf = new Uint8Array(0);
  #offset = 0;
  // input offset of #buf[0]
  constructor(options = {}) {
    this.maxFrameBytes = options.maxFrameBytes ?? 1 << 20;
    this.channels = options.channels ?? false;
  }
  /** Bytes held of a frame that is not complete yet. */
  get pending() {
    return this.#buf.length;
  }
  #refuse(message, at2) {
    const offset = this.#offset + at2;
    return new FramingError(`binary frame: ${message} (at byte ${offset})`, offset);
  }
  feed(chunk) {
    const data = bytesOf(chunk);
    if (data.length) {
      const joined = new Uint8Array(this.#buf.length + data.length);
      joined.set(this.#buf);
      joined.set(data, this.#buf.length);
      this.#buf = joined;
    }
    const out = [];
    let pos = 0;
    try {
      while (this.#buf.length - pos >= HEAD) {
        const buf = this.#buf;
        const raw = buf[pos];
        const kind = raw & ~CHANNEL_BIT;
        const hasChannel = (raw & CHANNEL_BIT) !== 0;
        if (!KNOWN.has(kind) && !isExtension(kind)) {
          const what = kind === 0 || kind === 127 ? "reserved" : "unknown";
          throw this.#refuse(`${what} frame type ${hex(raw)}`, pos);
        }
        if (hasChannel !== this.channels) {
          const need = this.channels ? "needs" : "must not have";
          throw this.#refuse(`type ${hex(raw)}: this transport ${need} a channel id`, pos);
        }
        const length = (buf[pos + 1] << 24 >>> 0) + (buf[pos + 2] << 16) + (buf[pos + 3] << 8) + buf[pos + 4];
        const extra = hasChannel ? CHANNEL : 0;
        if (length > this.maxFrameBytes + extra) {
          throw this.#refuse(
            `a payload of ${length} bytes is over the ${this.maxFrameBytes}-byte limit`,
            pos
          );
        }
        if (hasChannel && length < CHANNEL) {
          throw this.#refuse(`a channel frame of ${length} bytes has no channel id`, pos);
        }
        if (kind === FrameType.PING && length > MAX_PING + extra) {
          throw this.#refuse(`a PING of ${length} bytes (at most ${MAX_PING})`, pos);
        }
        const end = pos + HEAD + length;
        if (end > buf.length) break;
        let start = pos + HEAD;
        let channel = null;
        if (hasChannel) {
          channel = (buf[start] << 24 >>> 0) + (buf[start + 1] << 16) + (buf[start + 2] << 8) + buf[start + 3];
          start += CHANNEL;
        }
        pos = end;
        if (isExtension(kind) && !KNOWN.has(kind)) continue;
        out.push({ type: kind, body: buf.slice(start, end), channel });
      }
    } finally {
      this.#buf = this.#buf.slice(pos);
      this.#offset += pos;
    }
    return out;
  }
  /** End of input: throws {@link FramingError} when it cut a frame. */
  close() {
    if (this.#buf.length) {
      const part = this.#buf.length < HEAD ? "head" : "payload";
      throw this.#refuse(`the input ended inside a frame's ${part} (${this.#buf.length} bytes)`, 0);
    }
    return [];
  }
};
var utf8 = new TextDecoder("utf-8", { fatal: false });
function responseEvent(frame) {
  if (frame.type === FrameType.PING || frame.type === FrameType.META) return null;
  if (frame.type === FrameType.ERROR) {
    let why = "an ERROR frame with no valid body";
    try {
      const body = JSON.parse(utf8.decode(frame.body));
      if (typeof body.code === "string" && typeof body.message === "string") {
        why = `the peer ended the binding: ${body.code}: ${body.message}`;
      }
    } catch {
    }
    throw new TokenwireError(why);
  }
  if (frame.type !== FrameType.EVENT) {
    throw new FramingError(
      `binary frame: a client's frame type ${hex(frame.type)} in a response`,
      -1
    );
  }
  const text = utf8.decode(frame.body);
  let obj;
  try {
    obj = JSON.parse(text);
  } catch (exc) {
    throw new EventDecodeError(
      `§5.1: data is not valid JSON: ${exc.message}`,
      "invalid-json"
    );
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    throw new EventDecodeError("§5.1: data is JSON but not a JSON object", "invalid-json");
  }
  const { type, seq } = obj;
  if (typeof type !== "string") {
    const known = Number.isInteger(seq) && seq >= 0 ? seq : null;
    throw new EventDecodeError(
      "§5.2: the envelope has no string type field",
      "invalid-field",
      known
    );
  }
  return parseEvent(type, text);
}
function decodeFrames(body, options = {}) {
  const decoder = new FrameDecoder(options);
  const out = [];
  for (const frame of [...decoder.feed(body), ...decoder.close()]) {
    const event = responseEvent(frame);
    if (event !== null) out.push(event);
  }
  return out;
}
function encodeFrame(type, body, channel = null) {
  if (type <= 0 || type >= 128 || type === 127) {
    throw new TokenwireError(`frame type ${hex(type)} cannot be sent`);
  }
  const extra = channel === null ? 0 : CHANNEL;
  const out = new Uint8Array(HEAD + extra + body.length);
  const view = new DataView(out.buffer);
  out[0] = channel === null ? type : type | CHANNEL_BIT;
  view.setUint32(1, extra + body.length);
  if (channel !== null) view.setUint32(HEAD, channel);
  out.set(body, HEAD + extra);
  return out;
}

// src/schema.ts
var SchemaError = class extends TokenwireError {
  path;
  constructor(message, path = null) {
    super(path === null ? message : `${path}: ${message}`);
    this.path = path;
  }
};
var SCHEMA_LIMITS = Object.freeze({
  /** Nested schema applications (value depth plus `$ref` hops). */
  maxDepth: 64,
  /** Total schema applications for one value. */
  maxSteps: 1e5,
  /** The longest string a `pattern` is run on. */
  maxPatternInput: 1e4
});
var SCHEMA_BOUNDS = Object.freeze({
  maxMinBound: 4096,
  maxPatternLength: 1e3
});
var SCHEMA_DRAFTS = Object.freeze([
  "https://json-schema.org/draft/2020-12/schema",
  "https://json-schema.org/draft/2019-09/schema",
  "http://json-schema.org/draft-07/schema",
  "http://json-schema.org/draft-06/schema",
  "http://json-schema.org/draft-04/schema"
]);
var isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
function jsonType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}
function typeMatches(want, value) {
  const got = jsonType(value);
  if (want === "number") return got === "number" || got === "integer";
  return want === got;
}
function equal(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}
function child(path, key) {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
var Checker = class {
  constructor(root) {
    this.root = root;
  }
  root;
  steps = 0;
  patterns = /* @__PURE__ */ new Map();
  check(schema, value, path, depth) {
    if (++this.steps > SCHEMA_LIMITS.maxSteps) {
      throw new SchemaError(`schema check passed ${SCHEMA_LIMITS.maxSteps} steps`);
    }
    if (depth > SCHEMA_LIMITS.maxDepth) {
      throw new SchemaError(`schema nesting passed ${SCHEMA_LIMITS.maxDepth} levels`);
    }
    if (schema === true || schema === void 0) return null;
    if (schema === false) return { path, message: "no value is allowed here" };
    if (!isObject(schema)) throw new SchemaError(`${path}: a schema must be an object or boolean`);
    const fail = (message) => ({ path, message });
    if (typeof schema.$ref === "string") {
      const target = this.resolve(schema.$ref);
      const problem2 = this.check(target, value, path, depth + 1);
      if (problem2) return problem2;
    }
    const type = schema.type;
    if (type !== void 0) {
      const types = Array.isArray(type) ? type : [type];
      if (!types.some((t) => typeMatches(t, value))) {
        return fail(`expected ${types.join(" or ")}, got ${jsonType(value)}`);
      }
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => equal(e, value))) {
      return fail(`not one of ${JSON.stringify(schema.enum)}`);
    }
    if ("const" in schema && !equal(schema.const, value)) {
      return fail(`not ${JSON.stringify(schema.const)}`);
    }
    const problem = typeof value === "string" && this.string(schema, value, fail) || typeof value === "number" && this.number(schema, value, fail) || Array.isArray(value) && this.array(schema, value, path, depth) || isObject(value) && this.object(schema, value, path, depth) || this.combinators(schema, value, path, depth);
    return problem || null;
  }
  resolve(ref) {
    if (ref !== "#" && !ref.startsWith("#/")) {
      throw new SchemaError(`$ref ${JSON.stringify(ref)}: only local refs (#/...) are supported`);
    }
    let node = this.root;
    for (const raw of ref.slice(2).split("/").filter((p, i) => p !== "" || i > 0)) {
      const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      if (Array.isArray(node) && /^[0-9]+$/.test(key)) node = node[Number(key)];
      else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
      else throw new SchemaError(`$ref ${JSON.stringify(ref)} points at nothing`);
    }
    return node;
  }
  string(schema, value, fail) {
    const length = [...value].length;
    if (typeof schema.minLength === "number" && length < schema.minLength) {
      return fail(`shorter than ${schema.minLength} characters`);
    }
    if (typeof schema.maxLength === "number" && length > schema.maxLength) {
      return fail(`longer than ${schema.maxLength} characters`);
    }
    if (typeof schema.pattern === "string") {
      if (value.length > SCHEMA_LIMITS.maxPatternInput) {
        return fail(`too long (${value.length}) to check against pattern ${schema.pattern}`);
      }
      if (!this.regex(schema.pattern).test(value)) {
        return fail(`does not match pattern ${JSON.stringify(schema.pattern)}`);
      }
    }
    return null;
  }
  regex(pattern) {
    let re = this.patterns.get(pattern);
    if (re === void 0) {
      try {
        re = new RegExp(pattern, "u");
      } catch (exc) {
        throw new SchemaError(`pattern ${JSON.stringify(pattern)}: ${exc.message}`);
      }
      this.patterns.set(pattern, re);
    }
    return re;
  }
  number(schema, value, fail) {
    const { minimum, maximum, exclusiveMinimum: exMin, exclusiveMaximum: exMax } = schema;
    if (typeof minimum === "number") {
      if (exMin === true ? value <= minimum : value < minimum) {
        return fail(`less than ${exMin === true ? "or equal to " : ""}${minimum}`);
      }
    }
    if (typeof maximum === "number") {
      if (exMax === true ? value >= maximum : value > maximum) {
        return fail(`greater than ${exMax === true ? "or equal to " : ""}${maximum}`);
      }
    }
    if (typeof exMin === "number" && value <= exMin) return fail(`not greater than ${exMin}`);
    if (typeof exMax === "number" && value >= exMax) return fail(`not less than ${exMax}`);
    const step = schema.multipleOf;
    if (typeof step === "number" && step > 0) {
      const q = value / step;
      if (Math.abs(q - Math.round(q)) > 1e-9) return fail(`not a multiple of ${step}`);
    }
    return null;
  }
  array(schema, value, path, depth) {
    const fail = (message) => ({ path, message });
    if (typeof schema.minItems === "number" && value.length < schema.minItems) {
      return fail(`fewer than ${schema.minItems} items`);
    }
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) {
      return fail(`more than ${schema.maxItems} items`);
    }
    if (schema.uniqueItems === true) {
      for (let i = 0; i < value.length; i++) {
        for (let j = i + 1; j < value.length; j++) {
          if (equal(value[i], value[j])) return fail(`items ${i} and ${j} are equal`);
        }
      }
    }
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    for (let i = 0; i < value.length; i++) {
      const sub = i < prefix.length ? prefix[i] : schema.items;
      if (sub === void 0 || Array.isArray(sub)) continue;
      const problem = this.check(sub, value[i], child(path, i), depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  object(schema, value, path, depth) {
    const keys = Object.keys(value);
    if (typeof schema.minProperties === "number" && keys.length < schema.minProperties) {
      return { path, message: `fewer than ${schema.minProperties} properties` };
    }
    if (typeof schema.maxProperties === "number" && keys.length > schema.maxProperties) {
      return { path, message: `more than ${schema.maxProperties} properties` };
    }
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === "string" && !Object.hasOwn(value, name)) {
          return { path, message: `the required property ${JSON.stringify(name)} is missing` };
        }
      }
    }
    const properties = isObject(schema.properties) ? schema.properties : {};
    const patterns = isObject(schema.patternProperties) ? schema.patternProperties : {};
    for (const key of keys) {
      let matched = false;
      if (Object.hasOwn(properties, key)) {
        matched = true;
        const problem = this.check(properties[key], value[key], child(path, key), depth + 1);
        if (problem) return problem;
      }
      for (const [pattern, sub] of Object.entries(patterns)) {
        if (key.length <= SCHEMA_LIMITS.maxPatternInput && this.regex(pattern).test(key)) {
          matched = true;
          const problem = this.check(sub, value[key], child(path, key), depth + 1);
          if (problem) return problem;
        }
      }
      if (!matched && schema.additionalProperties !== void 0) {
        if (schema.additionalProperties === false) {
          return { path, message: `the property ${JSON.stringify(key)} is not allowed` };
        }
        const problem = this.check(
          schema.additionalProperties,
          value[key],
          child(path, key),
          depth + 1
        );
        if (problem) return problem;
      }
    }
    return null;
  }
  combinators(schema, value, path, depth) {
    const fail = (message) => ({ path, message });
    if (Array.isArray(schema.allOf)) {
      for (const sub of schema.allOf) {
        const problem = this.check(sub, value, path, depth + 1);
        if (problem) return problem;
      }
    }
    if (Array.isArray(schema.anyOf)) {
      if (!schema.anyOf.some((sub) => this.check(sub, value, path, depth + 1) === null)) {
        return fail("matches none of anyOf");
      }
    }
    if (Array.isArray(schema.oneOf)) {
      const n = schema.oneOf.filter((sub) => this.check(sub, value, path, depth + 1) === null);
      if (n.length !== 1) return fail(`matches ${n.length} of oneOf, not exactly one`);
    }
    if ("not" in schema && this.check(schema.not, value, path, depth + 1) === null) {
      return fail("matches the schema of not");
    }
    if ("if" in schema) {
      const branch = this.check(schema.if, value, path, depth + 1) === null ? "then" : "else";
      if (branch in schema) {
        const problem = this.check(schema[branch], value, path, depth + 1);
        if (problem) return problem;
      }
    }
    return null;
  }
};
function validateSchema(schema, value) {
  return new Checker(schema).check(schema, value, "$", 0);
}
var REF_KEYWORDS = ["$ref", "$dynamicRef", "$recursiveRef"];
var MIN_KEYWORDS = ["minItems", "minLength", "minProperties", "minContains"];
var ONE = [
  "additionalItems",
  "additionalProperties",
  "contains",
  "contentSchema",
  "else",
  "if",
  "items",
  "not",
  "propertyNames",
  "then",
  "unevaluatedItems",
  "unevaluatedProperties"
];
var MANY = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
var NAMED = [
  "$defs",
  "definitions",
  "dependencies",
  "dependentSchemas",
  "patternProperties",
  "properties"
];
var NOT_LINEAR = /\\[1-9]|\\k<|\(\?<?[=!]/;
function at(path, key) {
  if (typeof key === "number") return `${path}[${key}]`;
  if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key.length <= 64 ? key : `${key.slice(0, 64)}…`)}]`;
}
function shown2(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  return JSON.stringify(text.length <= 64 ? text : `${text.slice(0, 64)}…`);
}
function checkPattern(pattern, path) {
  if (pattern.length > SCHEMA_BOUNDS.maxPatternLength) {
    throw new SchemaError(
      `unusable pattern: longer than ${SCHEMA_BOUNDS.maxPatternLength} characters`,
      path
    );
  }
  if (NOT_LINEAR.test(pattern)) {
    throw new SchemaError(
      "unusable pattern: not a pattern tokenwire can match in linear time (no backreferences or lookarounds)",
      path
    );
  }
  try {
    new RegExp(pattern, "u");
  } catch (exc) {
    throw new SchemaError(`unusable pattern: ${exc.message}`, path);
  }
}
function walk(node, path, depth) {
  if (depth > SCHEMA_LIMITS.maxDepth) {
    throw new SchemaError(`nested more than ${SCHEMA_LIMITS.maxDepth} levels`, path);
  }
  if (!isObject(node)) return;
  if ("$schema" in node) {
    const uri = node.$schema;
    if (typeof uri !== "string" || !SCHEMA_DRAFTS.includes(uri.replace(/#+$/, ""))) {
      throw new SchemaError(
        `unsupported $schema ${shown2(uri)}: use draft 2020-12, 2019-09, 7, 6 or 4`,
        at(path, "$schema")
      );
    }
  }
  for (const keyword of REF_KEYWORDS) {
    const ref = node[keyword];
    if (ref !== void 0 && ref !== null && !(typeof ref === "string" && ref.startsWith("#"))) {
      throw new SchemaError(
        `only local references (#...) are allowed, got ${shown2(ref)}`,
        at(path, keyword)
      );
    }
  }
  for (const keyword of MIN_KEYWORDS) {
    const bound = node[keyword];
    if (typeof bound === "number" && bound > SCHEMA_BOUNDS.maxMinBound) {
      throw new SchemaError(
        `${keyword} is over tokenwire's limit of ${SCHEMA_BOUNDS.maxMinBound}`,
        at(path, keyword)
      );
    }
  }
  if (typeof node.pattern === "string") checkPattern(node.pattern, at(path, "pattern"));
  for (const keyword of ONE) {
    const sub = node[keyword];
    if (isObject(sub) || typeof sub === "boolean") walk(sub, at(path, keyword), depth + 1);
  }
  for (const keyword of MANY) {
    const subs = node[keyword];
    if (Array.isArray(subs)) {
      subs.forEach((sub, i) => walk(sub, at(at(path, keyword), i), depth + 1));
    }
  }
  for (const keyword of NAMED) {
    const subs = node[keyword];
    if (!isObject(subs)) continue;
    const where = at(path, keyword);
    for (const [name, sub] of Object.entries(subs)) {
      if (keyword === "patternProperties") checkPattern(name, at(where, name));
      walk(sub, at(where, name), depth + 1);
    }
  }
}
function checkSchema(schema, path = "$") {
  if (!isObject(schema)) throw new SchemaError("must be a JSON Schema object (§4.4)", path);
  walk(schema, path, 0);
}

// src/lifecycle.ts
function rule(section, level, summary) {
  return Object.freeze({ section, level, summary });
}
var RULES = Object.freeze({
  framing: rule("5.1", "must", "the SSE framing could not be read (size limit exceeded)"),
  "invalid-json": rule("5.1", "must", "data is not exactly one complete JSON object"),
  "type-mismatch": rule("5.2", "must", "the JSON type differs from the SSE event: field"),
  "bad-type-name": rule(
    "5.1",
    "must",
    "the SSE event: name is not a valid type name (docs/conformance.md)"
  ),
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
    "a tool.call block stopped with a stop_reason other than tool_use"
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
    "metadata.request_id is not echoed in stream.start/stream.end"
  ),
  "undeclared-tool": rule("8.2", "must", "tool.call names a tool the request did not declare"),
  "invalid-arguments": rule(
    "8.2",
    "must",
    "tool.call arguments do not match the tool's JSON Schema"
  )
});
function schemaProblem(schema, args) {
  let problem;
  try {
    checkSchema(schema);
    problem = validateSchema(schema, args);
  } catch (exc) {
    if (!(exc instanceof SchemaError)) throw exc;
    return `the tool's schema is unusable, so no call can pass: ${exc.message}`;
  }
  return problem === null ? null : `${problem.path}: ${problem.message}`;
}
var MAX_SAFE_SEQ = 2 ** 53;
var SeqTracker = class {
  /** The seq due next. */
  expected = 0;
  /** Events lost so far, by gaps. */
  lost = 0;
  /**
   * @param seq  The seq of the event that arrived.
   * @returns The gap it reveals, or null. A seq that does not
   *   increase is not a gap (the validator calls it `seq-regression`).
   */
  feed(seq) {
    const expected = this.expected;
    if (seq >= MAX_SAFE_SEQ) {
      this.expected = seq;
      return null;
    }
    if (seq < expected) return null;
    this.expected = seq + 1;
    if (seq === expected) return null;
    this.lost += seq - expected;
    return { expected, got: seq, lost: seq - expected };
  }
};
var IDLE = "idle";
var STREAMING = "streaming";
var ERRORED = "errored";
var CLOSED = "closed";
var UNKNOWN = "*";
var TRANSITIONS = Object.freeze({
  "idle stream.start": STREAMING,
  "streaming content.delta": STREAMING,
  "streaming tool.call": STREAMING,
  "streaming usage": STREAMING,
  "streaming content.stop": STREAMING,
  "streaming *": STREAMING,
  "streaming error": ERRORED,
  // §5.4: error may stand for open blocks' stops
  "streaming stream.end": CLOSED,
  "errored usage": ERRORED,
  "errored *": ERRORED,
  "errored stream.end": CLOSED
});
var REFUSALS = Object.freeze({
  "idle *": "start-not-first",
  "streaming stream.start": "duplicate-start",
  "errored stream.start": "duplicate-start",
  "errored error": "duplicate-error",
  "errored *": "after-error",
  "closed *": "after-end"
});
var Validator = class {
  /** `idle`, `streaming`, `errored` or `closed`. */
  state = IDLE;
  /** Every violation so far, in order. */
  violations = [];
  /** Events seen, decodable or not. */
  events = 0;
  _expected = 0;
  _lastSeq = null;
  _open = /* @__PURE__ */ new Set();
  _stopped = /* @__PURE__ */ new Set();
  _toolBlocks = /* @__PURE__ */ new Set();
  _toolIds = /* @__PURE__ */ new Set();
  _usage = false;
  _errorSeen = false;
  _decoded = 0;
  _framingFailed = false;
  _requestId;
  // §8.2: with the request at hand, only the tools it declared may be called (a
  // request without tools declares none): name -> its parameters schema.
  _tools;
  /** @param options.request  The request that was sent (a parsed object), or null. */
  constructor({ request = null } = {}) {
    const rid = request?.metadata?.request_id;
    this._requestId = typeof rid === "string" ? rid : null;
    if (request !== null && request !== void 0) {
      const tools = request.tools;
      const list = Array.isArray(tools) ? tools : [];
      this._tools = new Map(list.map((t) => [t?.name, t?.parameters]));
    } else {
      this._tools = null;
    }
  }
  /** True while no MUST has been broken. */
  get ok() {
    return !this.violations.some((v) => v.level === "must");
  }
  _report(code, seq, message) {
    const r = RULES[code];
    const v = Object.freeze({
      rule: code,
      seq,
      section: r.section,
      level: r.level,
      message
    });
    this.violations.push(v);
    return v;
  }
  _checkSeq(seq) {
    const expected = this._expected;
    if (seq >= MAX_SAFE_SEQ) {
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
   * @returns the violations it caused.
   */
  feedInvalid(error) {
    const before = this.violations.length;
    this.events += 1;
    this._report(error.rule, error.seq, error.message);
    if (error.seq !== null && error.seq !== void 0) this._checkSeq(error.seq);
    else if (this.state !== IDLE) this._expected += 1;
    if (this.state === IDLE) this.state = STREAMING;
    return this.violations.slice(before);
  }
  /**
   * Check one decoded event.
   * @param event  From {@link parseEvent}.
   * @returns the violations it caused (also kept in `violations`).
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
    if (next === void 0) {
      const code = REFUSALS[`${this.state} ${kind}`] ?? REFUSALS[`${this.state} *`];
      this._report(code, seq, `${kind} in state ${this.state}`);
      if (this.state !== IDLE) return this.violations.slice(before);
      this.state = STREAMING;
      next = TRANSITIONS[`${this.state} ${key}`] ?? STREAMING;
    }
    this.state = next;
    if (registered) this._checkEvent(event, seq);
    return this.violations.slice(before);
  }
  _checkEvent(event, seq) {
    const e = event;
    switch (event.type) {
      case "content.delta":
        if (e.role !== "assistant") {
          this._report("bad-role", seq, `role is ${JSON.stringify(e.role)}`);
        }
        this._useBlock(e.index, seq, "content.delta");
        break;
      case "tool.call":
        this._useBlock(e.index, seq, "tool.call");
        this._toolBlocks.add(e.index);
        this._checkToolCall(event, seq);
        break;
      case "content.stop": {
        const { index, stop_reason: reason } = event;
        if (!STOP_REASONS.includes(reason)) {
          this._report(
            "unknown-stop-reason",
            seq,
            `stop_reason ${JSON.stringify(reason)} is not one of ${[...STOP_REASONS].sort().join(", ")}`
          );
        }
        if (this._stopped.has(index)) {
          this._report("block-already-stopped", seq, `block ${index} stopped twice`);
        } else if (this._toolBlocks.has(index) && reason !== "tool_use") {
          this._report(
            "tool-use-not-signalled",
            seq,
            `block ${index} carried a tool.call but stopped with ${JSON.stringify(reason)}`
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
        const code = event.code;
        if (!ERROR_CODES.includes(code) && code !== "cancelled") {
          this._report("unknown-error-code", seq, `error code ${JSON.stringify(code)}`);
        }
        break;
      case "stream.start":
        this._checkEcho(e.request_id, seq, "stream.start");
        break;
      case "stream.end":
        this._checkEcho(e.request_id, seq, "stream.end");
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
        `${where} request_id is ${JSON.stringify(rid ?? null)}, the request's is ${JSON.stringify(this._requestId)}`
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
        `arguments of ${JSON.stringify(call.name)} are not JSON`
      );
      return;
    }
    if (kindOf(args) !== "object") {
      this._report(
        "bad-arguments-json",
        seq,
        `arguments of ${JSON.stringify(call.name)} are not a JSON object`
      );
      return;
    }
    if (this._tools === null) return;
    if (!this._tools.has(call.name)) {
      const declared = [...this._tools.keys()].sort().join(", ") || "none";
      this._report(
        "undeclared-tool",
        seq,
        `tool ${JSON.stringify(call.name)} was not declared (declared: ${declared})`
      );
      return;
    }
    const problem = schemaProblem(this._tools.get(call.name), args);
    if (problem !== null) {
      this._report(
        "invalid-arguments",
        seq,
        `arguments of ${JSON.stringify(call.name)}: ${problem}`
      );
    }
  }
  /**
   * Record that the SSE framing failed: the rest cannot be read.
   */
  feedFramingError(error) {
    this._report("framing", this._lastSeq, error.message);
    this._framingFailed = true;
  }
  /**
   * End of input: report what never came.
   * @returns the new violations.
   */
  close() {
    const before = this.violations.length;
    if (this._framingFailed) return [];
    if (this.events === 0) {
      this._report("missing-start", null, "no events were received");
    } else if (this._decoded === 0) {
    } else if (this.state !== CLOSED) {
      this._report(
        "missing-end",
        this._lastSeq,
        "the input ended before stream.end: truncated stream"
      );
    } else if (!this._usage && !this._errorSeen) {
      this._report("missing-usage", null, "at least one usage event should be sent");
    }
    return this.violations.slice(before);
  }
  /** The verdict so far. */
  report() {
    return makeReport(this);
  }
};
function makeReport(validator) {
  const violations = [...validator.violations];
  return Object.freeze({
    ok: validator.ok,
    events: validator.events,
    violations,
    errors: violations.filter((v) => v.level === "must"),
    warnings: violations.filter((v) => v.level === "should")
  });
}
function validate(body, {
  request = null,
  maxEventBytes = 1 << 20,
  framing = "sse"
} = {}) {
  const validator = new Validator({ request });
  const chunks = typeof body === "string" || body instanceof Uint8Array || body instanceof ArrayBuffer ? [body] : body;
  try {
    if (framing === "binary") feedFrames(validator, chunks, maxEventBytes);
    else {
      const decoder = new SSEDecoder({ maxEventBytes });
      for (const chunk of chunks) {
        for (const message of decoder.feed(chunk)) feedMessage(validator, message);
      }
      decoder.close();
    }
  } catch (exc) {
    if (!(exc instanceof FramingError)) throw exc;
    validator.feedFramingError(exc);
  }
  validator.close();
  return validator.report();
}
function feedFrames(validator, chunks, maxFrameBytes) {
  const decoder = new FrameDecoder({ maxFrameBytes });
  for (const chunk of chunks) {
    for (const frame of decoder.feed(chunk)) {
      let event;
      try {
        event = responseEvent(frame);
      } catch (exc) {
        if (exc instanceof EventDecodeError) {
          validator.feedInvalid(exc);
          continue;
        }
        if (exc instanceof FramingError) throw exc;
        throw new FramingError(exc.message, -1);
      }
      if (event !== null) validator.feed(event);
    }
  }
  decoder.close();
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

// src/http.ts
var now = () => typeof performance !== "undefined" ? performance.now() : Date.now();
var StreamResponse = class {
  body;
  /** HTTP status. */
  status;
  /** Response headers, when known. */
  headers;
  /** When the request was sent (`performance.now()` time). */
  started;
  validator;
  decoder;
  seq;
  /** The answer text so far. */
  text = "";
  /** Milliseconds from the request to the first content.delta or tool.call. */
  ttft = null;
  /** True when the stream was aborted before its end. */
  aborted = false;
  /** The verdict, once the iteration is over. */
  report = null;
  constructor(body, {
    request = null,
    started = now(),
    status = 200,
    headers = null,
    maxEventBytes
  } = {}) {
    this.body = body;
    this.status = status;
    this.headers = headers;
    this.started = started;
    this.validator = new Validator({ request });
    this.decoder = new SSEDecoder({ maxEventBytes });
    this.seq = new SeqTracker();
  }
  _item(message, time) {
    const checked = feedMessage(this.validator, message);
    const seq = checked.event ? checked.event.seq : checked.error?.seq;
    const item = {
      ...checked,
      message,
      time,
      gap: typeof seq === "number" && Number.isInteger(seq) ? this.seq.feed(seq) : null
    };
    const ev = item.event;
    if (ev && (ev.type === "content.delta" || ev.type === "tool.call")) {
      if (this.ttft === null) this.ttft = item.time;
      if (ev.type === "content.delta" && !ev["tokenwire:reasoning"]) {
        this.text += ev.delta.text;
      }
    }
    return item;
  }
  async *[Symbol.asyncIterator]() {
    const reader = this.body.getReader();
    try {
      for (; ; ) {
        let result;
        try {
          result = await reader.read();
        } catch (exc) {
          if (exc?.name === "AbortError") this.aborted = true;
          throw exc;
        }
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
      if (!this.aborted) this.validator.close();
      this.report = this.validator.report();
      reader.releaseLock?.();
    }
  }
};
async function stream(url, request, options = {}) {
  const doFetch = options.fetch ?? globalThis.fetch;
  const started = now();
  const response = await doFetch(url, {
    method: "POST",
    headers: {
      "Content-Type": REQUEST_MEDIA_TYPE,
      Accept: "text/event-stream",
      ...options.headers ?? {}
    },
    body: typeof request === "string" ? request : JSON.stringify(request),
    signal: options.signal,
    cache: "no-store"
  });
  return open(response, {
    request: typeof request === "string" ? null : request,
    started,
    maxEventBytes: options.maxEventBytes
  });
}
async function raiseForStatus(response) {
  if (response.ok) return;
  const text = await response.text().catch(() => "");
  let body = null;
  try {
    const parsed = JSON.parse(text);
    body = parsed !== null && typeof parsed === "object" ? parsed : null;
  } catch {
    body = null;
  }
  throw httpError(response.status, body, text);
}
async function open(response, {
  request = null,
  started = now(),
  maxEventBytes
} = {}) {
  await raiseForStatus(response);
  const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "text/event-stream" || response.body === null) {
    throw new ProtocolError(`expected text/event-stream, got ${type || "no content type"}`);
  }
  return new StreamResponse(response.body, {
    request,
    started,
    status: response.status,
    headers: response.headers,
    maxEventBytes
  });
}

// src/url.ts
var STREAM_PATH = "/v1/stream";
var ROUTES = [
  [/\/v1\/chat\/completions$/, "the OpenAI Chat Completions route"],
  [/\/v1\/completions$/, "the OpenAI legacy completions route"],
  [/\/v1\/responses(\/input_tokens)?$/, "the OpenAI Responses route"],
  [/\/v1\/messages(\/count_tokens)?$/, "the Anthropic Messages route"],
  [/\/v2\/chat$/, "the Cohere chat route"],
  [/\/v1(beta|alpha)?\/models\/[^/]*:[A-Za-z]+$/, "a Gemini model route"],
  [/\/v1\/models(\/[^/]*)?$/, "the models list"],
  [/\/v1\/streams(\/[^/]*)?$/, "the resume route"],
  [/\/(healthz|metrics)$/, "a monitoring route"],
  [/\/v1\/.+$/, "a route below /v1"]
];
var SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;
var PASS_EXAMPLE = "pass the gateway's base URL (http://127.0.0.1:8080) or its stream URL (http://127.0.0.1:8080/v1/stream)";
var URLGrammarError = class extends TokenwireError {
};
function firstOf(text, chars) {
  const found = [...chars].map((c) => text.indexOf(c)).filter((i) => i >= 0);
  return found.length ? Math.min(...found) : text.length;
}
function endpoint(url) {
  const given = String(url).trim();
  if (!given) throw new URLGrammarError(`no URL given: ${PASS_EXAMPLE}`);
  if (/\s/.test(given)) throw new URLGrammarError(`${given} has a space in it: ${PASS_EXAMPLE}`);
  const m = SCHEME.exec(given);
  const scheme = m ? m[1].toLowerCase() : "http";
  let rest = m ? given.slice(m[0].length) : given;
  if (scheme !== "http" && scheme !== "https") {
    throw new URLGrammarError(`${given} is not an http:// or https:// URL: ${PASS_EXAMPLE}`);
  }
  rest = rest.split("#", 1)[0];
  const cut = firstOf(rest, "/?");
  const authority = rest.slice(0, cut);
  rest = rest.slice(cut);
  if (!authority || authority.startsWith(":")) {
    throw new URLGrammarError(`${given} names no host: ${PASS_EXAMPLE}`);
  }
  const qcut = firstOf(rest, "?");
  let path = rest.slice(0, qcut).replace(/\/+$/, "");
  const query = rest.slice(qcut);
  const origin = `${scheme}://${authority}`;
  if (path.endsWith(STREAM_PATH)) {
    path = path.slice(0, -STREAM_PATH.length);
  } else if (path.endsWith("/v1")) {
    path = path.slice(0, -3);
  } else {
    for (const [pattern, name] of ROUTES) {
      const found = pattern.exec(path);
      if (found) {
        const prefix = origin + path.slice(0, found.index);
        throw new URLGrammarError(
          `${origin + path} is ${name}, not an LLM-Stream endpoint: pass the gateway's base URL (${prefix}) or its stream URL (${prefix}${STREAM_PATH})`
        );
      }
    }
  }
  const base = origin + path;
  return { base, stream: base + STREAM_PATH + query, query };
}

// src/client.ts
var RESUME_TOKEN_HEADER = "tokenwire-resume-token";
var RESUME_TOKEN_REQUEST_HEADER = "Tokenwire-Resume-Token";
var MAX_RESUME_ATTEMPTS = 3;
var delay = (ms, signal) => new Promise((resolve) => {
  if (ms <= 0 || signal.aborted) return resolve();
  const timer = setTimeout(done, ms);
  signal.addEventListener("abort", done, { once: true });
  function done() {
    clearTimeout(timer);
    signal.removeEventListener("abort", done);
    resolve();
  }
});
function newRequestId() {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `tw-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}
function prepareRequest(input, { resume = false } = {}) {
  const request = {
    ...input,
    version: input.version ?? VERSION,
    stream: input.stream ?? true,
    metadata: { ...input.metadata ?? {} }
  };
  if (typeof request.metadata.request_id !== "string") {
    request.metadata.request_id = newRequestId();
  }
  if (request.extensions?.[EXTENSIONS.resumable] === void 0) {
    request.extensions = { ...request.extensions ?? {}, [EXTENSIONS.resumable]: resume };
  }
  const tools = request.tools;
  if (tools !== void 0) {
    if (!Array.isArray(tools)) throw new TokenwireError("tools: must be a list of tools (§4.4)");
    tools.forEach(
      (tool, i) => checkSchema(tool?.parameters, `tools[${i}].parameters`)
    );
  }
  const sideEffects = request.extensions?.[EXTENSIONS.sideEffects];
  if (sideEffects !== void 0 && !(Array.isArray(sideEffects) && sideEffects.every((s) => typeof s === "string"))) {
    throw new TokenwireError(
      `extensions["${EXTENSIONS.sideEffects}"]: must be a list of tool names`
    );
  }
  return request;
}
var Client = class {
  baseURL;
  headers;
  resume;
  confirm;
  maxEventBytes;
  streamPath;
  /** The query given with `baseURL` (`""` or `"?..."`), sent on every request. */
  query;
  resumePath;
  fetch;
  constructor(options) {
    if (!options?.baseURL) throw new TokenwireError("Client: baseURL is required");
    this.streamPath = options.streamPath ?? STREAM_PATH;
    if (this.streamPath === STREAM_PATH) {
      const found = endpoint(options.baseURL);
      this.baseURL = found.base;
      this.query = found.query;
    } else {
      this.baseURL = String(options.baseURL).replace(/\/+$/, "");
      this.query = "";
    }
    this.headers = { ...options.headers ?? {} };
    this.resume = options.resume ?? false;
    this.confirm = options.confirm ?? null;
    this.maxEventBytes = options.maxEventBytes ?? 1 << 20;
    this.resumePath = options.resumePath ?? "/v1/streams/{request_id}";
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }
  /** The absolute URL of `path` on this gateway. */
  url(path) {
    return this.baseURL + (path.startsWith("/") ? path : `/${path}`) + this.query;
  }
  /**
   * Send `request` and stream its events. Nothing is sent until the result
   * is iterated (once). Leaving the loop early (`break`) or aborting
   * `options.signal` stops the stream and cancels the generation. Unregistered
   * event types, tokenwire's extension events among them (`tokenwire.block`,
   * `tokenwire.usage`, `tokenwire.stop`: {@link isExtensionEvent}), are
   * delivered as sent, in order.
   * @throws {@link SchemaError} at once for an unusable tool schema (see {@link prepareRequest}).
   * @throws (while iterating) {@link UnsupportedMediaTypeError}, {@link RequestError},
   *   {@link ServerError}, {@link ProtocolError}, {@link StreamTruncatedError},
   *   {@link FramingError}, or the signal's abort reason.
   */
  stream(request, options = {}) {
    return new EventStream(this, prepareRequest(request, { resume: this.resume }), options);
  }
};
var EventStream = class {
  /** The request as sent. */
  request;
  /** Every lifecycle violation seen (delivered events only, plus undecodable ones). */
  violations = [];
  /** Tool calls refused by §8.2, in order. */
  rejectedToolCalls = [];
  /** The last seq delivered (the next resume's `Last-Event-ID`). */
  lastSeq = null;
  /** HTTP connections made: 1, plus one per resume. */
  connections = 0;
  /** The resume token from the POST's `tokenwire-resume-token` header, when given. */
  resumeToken = null;
  /** The first response's headers. */
  headers = null;
  /** True once `stream.end` has been delivered. */
  done = false;
  client;
  options;
  controller = new AbortController();
  validator;
  toolIds = /* @__PURE__ */ new Set();
  started = false;
  opened = false;
  cancelled = null;
  constructor(client, request, options) {
    this.client = client;
    this.request = request;
    this.options = options;
    this.validator = new Validator({ request });
  }
  /** The request's `metadata.request_id`. */
  get requestId() {
    return this.request.metadata.request_id;
  }
  /** True when the request asked for a resumable stream. */
  get resumable() {
    return this.request.extensions?.[EXTENSIONS.resumable] === true;
  }
  resumeURL() {
    return this.client.url(
      this.client.resumePath.replace("{request_id}", encodeURIComponent(this.requestId))
    );
  }
  tokenHeaders() {
    return this.resumeToken ? { [RESUME_TOKEN_REQUEST_HEADER]: this.resumeToken } : {};
  }
  /**
   * Stop reading and cancel the generation: aborts the fetch and, for a
   * resumable stream, sends `DELETE /v1/streams/{request_id}` (with the
   * resume token) so the server stops generating. Safe to call twice.
   */
  cancel() {
    if (this.cancelled) return this.cancelled;
    this.controller.abort(this.options.signal?.reason);
    this.cancelled = (async () => {
      if (!this.resumable || !this.opened || this.done) return;
      try {
        const response = await this.client.fetch(this.resumeURL(), {
          method: "DELETE",
          headers: {
            ...this.client.headers,
            ...this.options.headers ?? {},
            ...this.tokenHeaders()
          }
        });
        await response.body?.cancel().catch(() => void 0);
      } catch {
      }
    })();
    return this.cancelled;
  }
  async *[Symbol.asyncIterator]() {
    if (this.started) throw new TokenwireError("an EventStream can be iterated only once");
    this.started = true;
    const signal = this.options.signal;
    const onAbort = () => void this.cancel();
    if (signal?.aborted) {
      throw signal.reason ?? new DOMException("aborted", "AbortError");
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    let finished = false;
    try {
      yield* this.connectionsLoop();
      finished = true;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!finished && !this.done) await this.cancel();
    }
  }
  async *connectionsLoop() {
    let fruitless = 0;
    let drop = "";
    for (; ; ) {
      const before = this.lastSeq;
      let response = null;
      try {
        response = await this.connect();
      } catch (exc) {
        if (this.connections <= 1 || this.controller.signal.aborted) throw exc;
        drop = `resume failed: ${exc.message}`;
      }
      if (response !== null) {
        drop = yield* this.read(response);
        if (this.done) return;
      }
      if (!this.client.resume || !this.resumable) {
        const why = this.client.resume ? "the stream is not resumable" : "resume is off";
        throw new StreamTruncatedError(`${drop} (${why})`, this.lastSeq);
      }
      fruitless = this.lastSeq === before ? fruitless + 1 : 0;
      if (fruitless >= MAX_RESUME_ATTEMPTS) {
        throw new StreamTruncatedError(
          `${drop}; ${MAX_RESUME_ATTEMPTS} resume attempts brought nothing new`,
          this.lastSeq
        );
      }
      await delay(fruitless ? Math.min(100 * 2 ** fruitless, 2e3) : 0, this.controller.signal);
      if (this.controller.signal.aborted) throw this.abortReason();
    }
  }
  abortReason() {
    return this.options.signal?.reason ?? new DOMException("aborted", "AbortError");
  }
  /** The POST, or for a resume the GET with `Last-Event-ID`; checks status and type. */
  async connect() {
    const first = this.connections === 0;
    this.connections += 1;
    const common = { ...this.client.headers, ...this.options.headers ?? {} };
    let response;
    if (first) {
      response = await this.client.fetch(this.client.url(this.client.streamPath), {
        method: "POST",
        headers: { "Content-Type": REQUEST_MEDIA_TYPE, Accept: "text/event-stream", ...common },
        body: JSON.stringify(this.request),
        signal: this.controller.signal,
        cache: "no-store"
      });
      this.headers = response.headers;
      this.resumeToken = response.headers.get(RESUME_TOKEN_HEADER);
    } else {
      const headers = {
        Accept: "text/event-stream",
        "Cache-Control": "no-cache",
        ...common,
        ...this.tokenHeaders()
      };
      if (this.lastSeq !== null) headers["Last-Event-ID"] = String(this.lastSeq);
      response = await this.client.fetch(this.resumeURL(), {
        method: "GET",
        headers,
        signal: this.controller.signal,
        cache: "no-store"
      });
    }
    await raiseForStatus(response);
    const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    if (type !== "text/event-stream" || response.body === null) {
      await response.body?.cancel().catch(() => void 0);
      throw new ProtocolError(
        `§4.9: the endpoint answered ${type || "no content type"}, not text/event-stream`
      );
    }
    this.opened = true;
    return response;
  }
  /**
   * Deliver one response body's events. Returns why the body ended early (a
   * drop: the caller may resume); anything else (an abort, a framing error,
   * the confirm hook's own error) is thrown.
   */
  async *read(response) {
    const decoder = new SSEDecoder({ maxEventBytes: this.client.maxEventBytes });
    const reader = response.body.getReader();
    try {
      for (; ; ) {
        let result;
        try {
          result = await reader.read();
        } catch (exc) {
          if (this.controller.signal.aborted) throw exc;
          const error = exc;
          return `${error?.name ?? "Error"}: ${error?.message ?? String(exc)}`;
        }
        const messages = result.done ? decoder.close() : decoder.feed(result.value);
        for (const message of messages) {
          let event;
          try {
            event = parseEvent(message.event, message.data);
          } catch (exc) {
            if (!(exc instanceof EventDecodeError)) throw exc;
            if (exc.seq === null) {
              this.violations.push(...this.validator.feedInvalid(exc));
            } else if (this.lastSeq === null || exc.seq > this.lastSeq) {
              this.violations.push(...this.validator.feedInvalid(exc));
              this.lastSeq = exc.seq;
            }
            continue;
          }
          if (!Number.isInteger(event.seq)) {
            this.violations.push(...this.validator.feed(event));
            continue;
          }
          if (this.lastSeq !== null && event.seq <= this.lastSeq) continue;
          this.lastSeq = event.seq;
          this.violations.push(...this.validator.feed(event));
          if (event.type === "tool.call" && !await this.checkToolCall(event)) {
            continue;
          }
          if (event.type === "stream.end") this.done = true;
          yield event;
          if (this.done) return "";
        }
        if (result.done) return "the connection closed before stream.end";
      }
    } finally {
      if (!this.done) await reader.cancel().catch(() => void 0);
      reader.releaseLock();
    }
  }
  reject(event, reason, message) {
    this.rejectedToolCalls.push({
      event,
      error: new ToolCallError(
        `§8.2: tool call ${JSON.stringify(event.name)} (${event.id}) refused: ${message}`,
        reason,
        event.name,
        event.id
      )
    });
    return false;
  }
  /** §8.2: declared, arguments a JSON object valid against the tool's schema, confirmed. */
  async checkToolCall(event) {
    if (this.toolIds.has(event.id)) {
      return this.reject(
        event,
        "duplicate-tool-id",
        `the id ${JSON.stringify(event.id)} was used twice`
      );
    }
    this.toolIds.add(event.id);
    const tool = (this.request.tools ?? []).find((t) => t.name === event.name);
    if (tool === void 0) {
      const declared = (this.request.tools ?? []).map((t) => t.name).sort().join(", ") || "none";
      return this.reject(event, "undeclared-tool", `not a declared tool (declared: ${declared})`);
    }
    let args;
    try {
      args = JSON.parse(event.arguments);
    } catch {
      return this.reject(event, "bad-arguments-json", "the arguments are not JSON");
    }
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return this.reject(event, "bad-arguments-json", "the arguments are not a JSON object");
    }
    const problem = schemaProblem(tool.parameters, args);
    if (problem !== null) return this.reject(event, "invalid-arguments", problem);
    const sideEffects = this.request.extensions?.[EXTENSIONS.sideEffects] ?? [];
    if (sideEffects.includes(event.name)) {
      const call = {
        id: event.id,
        name: event.name,
        index: event.index,
        arguments: args,
        raw: event.arguments,
        tool
      };
      const confirm = this.client.confirm;
      if (confirm === null) {
        return this.reject(
          event,
          "not-confirmed",
          "the tool has side effects and no confirm hook was given"
        );
      }
      if (!await confirm(call)) {
        return this.reject(event, "not-confirmed", "the confirm hook refused it");
      }
    }
    return true;
  }
};
export {
  CANCELLED,
  Client,
  ERROR_CODES,
  EVENT_TYPES,
  EXTENSIONS,
  EXTENSION_EVENTS,
  EventDecodeError,
  EventStream,
  FRAMES_MEDIA_TYPE,
  FrameDecoder,
  FrameType,
  FramingError,
  HTTPStatusError,
  MAX_RESUME_ATTEMPTS,
  MAX_SAFE_SEQ,
  ProtocolError,
  REFUSALS,
  REQUEST_MEDIA_TYPE,
  RESUME_TOKEN_HEADER,
  RESUME_TOKEN_REQUEST_HEADER,
  RULES,
  RequestError,
  SCHEMA_BOUNDS,
  SCHEMA_DRAFTS,
  SCHEMA_LIMITS,
  SSEDecoder,
  STOP_REASONS,
  STREAM_PATH,
  SchemaError,
  SeqTracker,
  ServerError,
  StreamError,
  StreamResponse,
  StreamTruncatedError,
  TRANSITIONS,
  TYPE_NAME,
  TokenwireError,
  ToolCallError,
  URLGrammarError,
  UnsupportedMediaTypeError,
  VERSION,
  Validator,
  checkSchema,
  decodeFrames,
  encodeFrame,
  endpoint,
  feedMessage,
  httpError,
  isExtensionEvent,
  isKnown,
  isReasoning,
  isTypeName,
  kindOf,
  open,
  parseEvent,
  prepareRequest,
  raiseForStatus,
  responseEvent,
  schemaProblem,
  stream,
  validate,
  validateSchema
};
