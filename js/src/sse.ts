/**
 * The WHATWG HTML "event stream interpretation" as an incremental decoder on bytes.
 * @module
 */
import { FramingError, TokenwireError } from "./errors.js";

const LF = 0x0a;
const CR = 0x0d;
const EMPTY: Uint8Array = new Uint8Array(0);

/** One dispatched server-sent event. */
export interface SSEMessage {
  /** The `event:` field, `"message"` when there was none. */
  event: string;
  /** The data lines joined with LF. */
  data: string;
  /** The last event ID in force when it was dispatched. */
  id: string;
  /** A valid `retry` given in this event's own block, else null. */
  retry: number | null;
}

/** What {@link SSEDecoder.feed} accepts; a string is encoded as UTF-8. */
export type Chunk = Uint8Array | ArrayBuffer | ArrayBufferView | string;

/**
 * Incremental WHATWG event-stream decoder: `feed(bytes) -> SSEMessage[]`.
 *
 * Lines are split on CR, LF and CRLF bytes only (never on U+2028 or other
 * Unicode separators), and each complete line is decoded as UTF-8 with
 * replacement characters, so a character split across chunks survives.
 *
 * `maxEventBytes` bounds one pending event. The rule, the Python decoder's:
 * a pending block is every byte from the end of the previous blank line's
 * terminator (or the stream start) up to the byte consumed last, line
 * terminators included (a CRLF counts 2 even when cut between chunks), and
 * blank lines belong to no block. The block's `maxEventBytes + 1`-th byte
 * throws {@link FramingError} naming the same offset, with the same events
 * before it, however the input was split; events completed earlier in the
 * same `feed` are returned first and the error is thrown by the next call.
 * After that every call throws the same error.
 */
export class SSEDecoder {
  #max: number;
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  #pending: Uint8Array[] = []; // pieces of the unterminated line (copies)
  #pendingBytes = 0;
  #fed = 0; // bytes consumed so far
  #blockStart = 0; // input offset of the pending block's first byte
  #skipLF = false; // the last byte was a CR that ended a line
  #atStart = true; // a BOM may still come
  #bomHead: Uint8Array = EMPTY; // the first bytes, while they may be the start of a BOM
  #closed = false;
  #error: FramingError | null = null;
  #data: string[] = [];
  #event = "";
  #id = ""; // the last event ID buffer
  #lastId = ""; // committed at each blank line
  #blockRetry: number | null = null;
  #reconnect: number | null = null;

  /** @param options.maxEventBytes  Default 1 MiB. */
  constructor({ maxEventBytes = 1 << 20 }: { maxEventBytes?: number } = {}) {
    if (!(maxEventBytes >= 1)) throw new RangeError("maxEventBytes must be >= 1");
    this.#max = maxEventBytes;
  }

  /** The last event ID committed by a blank line. */
  get lastEventId(): string {
    return this.#lastId;
  }

  /** The last valid `retry` value seen anywhere, or null. */
  get reconnectMs(): number | null {
    return this.#reconnect;
  }

  /** Total bytes consumed so far (`FramingError.offset` counts in the same unit). */
  get bytesFed(): number {
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
  feed(chunk: Chunk | null | undefined): SSEMessage[] {
    if (this.#error) throw this.#error;
    if (this.#closed) throw new TokenwireError("SSEDecoder.feed() called after close()");
    let bytes = toBytes(chunk);
    const out: SSEMessage[] = [];
    if (bytes.length === 0) return out;
    this.#fed += bytes.length;
    let base = this.#fed - bytes.length; // offset of bytes[0]
    if (this.#skipLF) {
      // The LF of a CRLF split across chunks belongs to the CR's line.
      this.#skipLF = false;
      if (bytes[0] === LF) {
        if (this.#blockStart === base) {
          this.#blockStart = base + 1; // that CRLF was a blank line: its LF is in no block
        } else if (base + 1 - this.#blockStart > this.#max) {
          // The LF ends a line of the pending block, so it counts toward the
          // limit as it would in one chunk (a CRLF counts 2, however it is cut).
          throw this.#fail(this.#blockStart + this.#max);
        }
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

  #fail(offset: number): FramingError {
    this.#error = new FramingError(`SSE event larger than maxEventBytes=${this.#max}`, offset);
    return this.#error;
  }

  #takeLine(bytes: Uint8Array, start: number, end: number): Uint8Array {
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
  #line(bytes: Uint8Array, out: SSEMessage[]): boolean {
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
    if (colon === 0) return false; // a comment
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
   * @throws {@link FramingError} a pending framing error.
   */
  close(): SSEMessage[] {
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
function isBomPrefix(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.length, 3);
  for (let i = 0; i < n; i++) if (bytes[i] !== BOM[i]) return false;
  return n > 0;
}

function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function toBytes(chunk: Chunk | null | undefined): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === "string") return encoder.encode(chunk);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk))
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk == null) return EMPTY;
  throw new TypeError("expected bytes (Uint8Array, ArrayBuffer) or a string");
}
