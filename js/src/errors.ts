/**
 * Every error this package throws descends from {@link TokenwireError}:
 *
 * ```text
 * TokenwireError
 * ├── FramingError              an SSE event over maxEventBytes (.offset)
 * ├── EventDecodeError          one message is not a valid envelope (.rule, .seq)
 * ├── HTTPStatusError           a non-2xx answer (.status, .code, .path, .body)
 * │   ├── UnsupportedMediaTypeError   415
 * │   ├── RequestError                any other 4xx
 * │   └── ServerError                 5xx
 * ├── ProtocolError             a 2xx answer that is not text/event-stream
 * ├── StreamTruncatedError      ended before stream.end, no resume (.lastSeq)
 * ├── ToolCallError             a tool.call refused by §8.2 (.reason), not thrown: recorded
 * ├── StreamError               an error event, for the AI SDK bridge (.code)
 * └── SchemaError               a JSON Schema the validator cannot use (schema.ts)
 * ```
 *
 * An `error` event is data: `Client` yields it, only the AI SDK bridge turns it
 * into an error part.
 * @module
 */

/** Base class of every error this package throws. */
export class TokenwireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The SSE framing could not be read: one pending event passed
 * `maxEventBytes`. `offset` is the input offset of the first byte over it.
 */
export class FramingError extends TokenwireError {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(message);
    this.offset = offset;
  }
}

/**
 * One SSE message that is not a valid event envelope.
 * `rule` is `bad-type-name` (its `event:` name), `invalid-json`,
 * `type-mismatch` or `invalid-field`; `seq` is the envelope's seq when it
 * could be read, else `null`.
 */
export class EventDecodeError extends TokenwireError {
  readonly rule: string;
  readonly seq: number | null;
  constructor(message: string, rule: string, seq: number | null = null) {
    super(message);
    this.rule = rule;
    this.seq = seq;
  }
}

/** The gateway's JSON error body: `{"error": {"code", "message", "path"}}`. */
export interface ErrorBody {
  error?: { code?: string; message?: string; path?: string | null };
}

/**
 * The endpoint answered with a non-2xx status. `status` is the HTTP status,
 * `body` the parsed JSON error body when there was one, else `null`; `code`
 * is `body.error.code` and `path` `body.error.path` when present.
 * Subclasses: {@link UnsupportedMediaTypeError} (415), {@link RequestError}
 * (other 4xx), {@link ServerError} (5xx).
 */
export class HTTPStatusError extends TokenwireError {
  readonly status: number;
  readonly body: ErrorBody | null;
  readonly code: string | null;
  readonly path: string | null;
  constructor(status: number, body: ErrorBody | null, text = "") {
    const detail = body?.error?.message ?? text;
    super(`HTTP ${status}${detail ? `: ${detail}` : ""}`);
    this.status = status;
    this.body = body;
    this.code = body?.error?.code ?? null;
    this.path = body?.error?.path ?? null;
  }
}

/** 415: the endpoint refused the request's media type (§4.1). */
export class UnsupportedMediaTypeError extends HTTPStatusError {}

/** A 4xx other than 415: the request is wrong (`path` names the field when known). */
export class RequestError extends HTTPStatusError {}

/** A 5xx: the endpoint or its upstream failed; retrying later may help. */
export class ServerError extends HTTPStatusError {}

/** The right {@link HTTPStatusError} subclass for `status`. */
export function httpError(status: number, body: ErrorBody | null, text = ""): HTTPStatusError {
  if (status === 415) return new UnsupportedMediaTypeError(status, body, text);
  if (status >= 400 && status < 500) return new RequestError(status, body, text);
  if (status >= 500) return new ServerError(status, body, text);
  return new HTTPStatusError(status, body, text);
}

/** A 2xx answer that is not a standard stream (not `text/event-stream`). */
export class ProtocolError extends TokenwireError {}

/**
 * §8.2: a `tool.call` the client refuses to act on: `reason` is
 * `undeclared-tool`, `bad-arguments-json`, `invalid-arguments`, `duplicate-tool-id` or
 * `not-confirmed` (a `tokenwire:side_effects` tool the confirmation hook
 * declined).
 */
export class ToolCallError extends TokenwireError {
  readonly reason:
    | "undeclared-tool"
    | "bad-arguments-json"
    | "invalid-arguments"
    | "duplicate-tool-id"
    | "not-confirmed";
  readonly toolName: string;
  readonly callId: string;
  constructor(message: string, reason: ToolCallError["reason"], toolName: string, callId: string) {
    super(message);
    this.reason = reason;
    this.toolName = toolName;
    this.callId = callId;
  }
}

/** A stream that ended with an `error` event (§5.3.6), raised by helpers that want text. */
export class StreamError extends TokenwireError {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

/**
 * The stream ended before its `stream.end` and could not be resumed (resume
 * off, not resumable, or the resume attempts brought nothing new).
 * `lastSeq` is the last seq received.
 */
export class StreamTruncatedError extends TokenwireError {
  readonly lastSeq: number | null;
  constructor(message: string, lastSeq: number | null) {
    super(message);
    this.lastSeq = lastSeq;
  }
}
