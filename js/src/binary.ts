/**
 * The binary binding (docs/binary.md, the draft's §6.2): length-prefixed frames
 * carrying the same event envelopes as SSE.
 *
 * `frame = type (1 byte) | length (4 bytes, big-endian) | payload`, where bit
 * 0x80 of the type says the payload starts with a 4-byte channel id. It is
 * the Python `tokenwire.binary` decoder, on the same vectors
 * (tests/vectors/binary/frames.json).
 * @module
 */
import { EventDecodeError, FramingError, TokenwireError } from "./errors.js";
import { parseEvent, type Event } from "./events.js";
import type { Chunk } from "./sse.js";

/** The binding's media type; `payload=json` is the default body encoding. */
export const FRAMES_MEDIA_TYPE = "application/llm-stream-frames";

/** The type byte's registry, channel bit cleared. */
export const FrameType = {
  EVENT: 0x01,
  ERROR: 0x02,
  PING: 0x03,
  META: 0x04,
  REQUEST: 0x10,
  CANCEL: 0x11,
  RESUME: 0x12,
} as const;

const CHANNEL_BIT = 0x80;
const HEAD = 5;
const CHANNEL = 4;
const MAX_PING = 64;
const KNOWN: ReadonlySet<number> = new Set(Object.values(FrameType));
const isExtension = (t: number): boolean => t >= 0x40 && t < 0x60;

/** One decoded frame: its type (channel bit cleared), body and channel (or null). */
export interface Frame {
  type: number;
  body: Uint8Array;
  channel: number | null;
}

function bytesOf(chunk: Chunk): Uint8Array {
  if (typeof chunk === "string") return new TextEncoder().encode(chunk);
  if (chunk instanceof Uint8Array) return chunk;
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

function hex(byte: number): string {
  return `0x${byte.toString(16).padStart(2, "0")}`;
}

/**
 * Incremental frame decoder: `feed(bytes) -> Frame[]`, then `close()`.
 *
 * `maxFrameBytes` (default 1 MiB) bounds a payload and is checked from the
 * head, before the payload is kept. `channels` says whether every frame
 * carries a channel id (WebSocket) or none may (HTTP). Each refusal throws
 * {@link FramingError} with the offset of the frame's first byte, after the
 * frames completed before it were returned, however the input was split.
 */
export class FrameDecoder {
  readonly maxFrameBytes: number;
  readonly channels: boolean;
  #buf: Uint8Array = new Uint8Array(0);
  #offset = 0; // input offset of #buf[0]

  constructor(options: { maxFrameBytes?: number; channels?: boolean } = {}) {
    this.maxFrameBytes = options.maxFrameBytes ?? 1 << 20;
    this.channels = options.channels ?? false;
  }

  /** Bytes held of a frame that is not complete yet. */
  get pending(): number {
    return this.#buf.length;
  }

  #refuse(message: string, at: number): FramingError {
    const offset = this.#offset + at;
    return new FramingError(`binary frame: ${message} (at byte ${offset})`, offset);
  }

  feed(chunk: Chunk): Frame[] {
    const data = bytesOf(chunk);
    if (data.length) {
      const joined = new Uint8Array(this.#buf.length + data.length);
      joined.set(this.#buf);
      joined.set(data, this.#buf.length);
      this.#buf = joined;
    }
    const out: Frame[] = [];
    let pos = 0;
    try {
      while (this.#buf.length - pos >= HEAD) {
        const buf = this.#buf;
        const raw = buf[pos];
        const kind = raw & ~CHANNEL_BIT;
        const hasChannel = (raw & CHANNEL_BIT) !== 0;
        if (!KNOWN.has(kind) && !isExtension(kind)) {
          const what = kind === 0x00 || kind === 0x7f ? "reserved" : "unknown";
          throw this.#refuse(`${what} frame type ${hex(raw)}`, pos);
        }
        if (hasChannel !== this.channels) {
          const need = this.channels ? "needs" : "must not have";
          throw this.#refuse(`type ${hex(raw)}: this transport ${need} a channel id`, pos);
        }
        const length =
          ((buf[pos + 1] << 24) >>> 0) + (buf[pos + 2] << 16) + (buf[pos + 3] << 8) + buf[pos + 4];
        const extra = hasChannel ? CHANNEL : 0;
        if (length > this.maxFrameBytes + extra) {
          throw this.#refuse(
            `a payload of ${length} bytes is over the ${this.maxFrameBytes}-byte limit`,
            pos,
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
        let channel: number | null = null;
        if (hasChannel) {
          channel =
            ((buf[start] << 24) >>> 0) +
            (buf[start + 1] << 16) +
            (buf[start + 2] << 8) +
            buf[start + 3];
          start += CHANNEL;
        }
        pos = end;
        if (isExtension(kind) && !KNOWN.has(kind)) continue; // skipped by rule
        out.push({ type: kind, body: buf.slice(start, end), channel });
      }
    } finally {
      this.#buf = this.#buf.slice(pos);
      this.#offset += pos;
    }
    return out;
  }

  /** End of input: throws {@link FramingError} when it cut a frame. */
  close(): Frame[] {
    if (this.#buf.length) {
      const part = this.#buf.length < HEAD ? "head" : "payload";
      throw this.#refuse(`the input ended inside a frame's ${part} (${this.#buf.length} bytes)`, 0);
    }
    return [];
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * The event a response frame carries, or null for a PING. Throws
 * {@link EventDecodeError} for a bad envelope (JSON payload only),
 * {@link TokenwireError} for an ERROR frame and {@link FramingError} for a
 * client's frame type in a response.
 */
export function responseEvent(frame: Frame): Event | null {
  if (frame.type === FrameType.PING || frame.type === FrameType.META) return null;
  if (frame.type === FrameType.ERROR) {
    let why = "an ERROR frame with no valid body";
    try {
      const body = JSON.parse(utf8.decode(frame.body)) as { code?: unknown; message?: unknown };
      if (typeof body.code === "string" && typeof body.message === "string") {
        why = `the peer ended the binding: ${body.code}: ${body.message}`;
      }
    } catch {
      // keep the generic sentence
    }
    throw new TokenwireError(why);
  }
  if (frame.type !== FrameType.EVENT) {
    throw new FramingError(
      `binary frame: a client's frame type ${hex(frame.type)} in a response`,
      -1,
    );
  }
  const text = utf8.decode(frame.body);
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (exc) {
    throw new EventDecodeError(
      `§5.1: data is not valid JSON: ${(exc as Error).message}`,
      "invalid-json",
    );
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    throw new EventDecodeError("§5.1: data is JSON but not a JSON object", "invalid-json");
  }
  const { type, seq } = obj as { type?: unknown; seq?: unknown };
  if (typeof type !== "string") {
    const known = Number.isInteger(seq) && (seq as number) >= 0 ? (seq as number) : null;
    throw new EventDecodeError(
      "§5.2: the envelope has no string type field",
      "invalid-field",
      known,
    );
  }
  // The JSON type is the name: the same checks as an SSE event of that name.
  return parseEvent(type, text);
}

/** Typed events from a whole binary-binding body (JSON payloads). */
export function decodeFrames(body: Chunk, options: { maxFrameBytes?: number } = {}): Event[] {
  const decoder = new FrameDecoder(options);
  const out: Event[] = [];
  for (const frame of [...decoder.feed(body), ...decoder.close()]) {
    const event = responseEvent(frame);
    if (event !== null) out.push(event);
  }
  return out;
}

/** One frame (no channel bit in `type`; pass `channel` for a multiplexed transport). */
export function encodeFrame(
  type: number,
  body: Uint8Array,
  channel: number | null = null,
): Uint8Array {
  if (type <= 0 || type >= 0x80 || type === 0x7f) {
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
