/**
 * The §5 lifecycle: seq-gap detection (§5.2.1) and the validator, a port of
 * tokenwire's Python `tokenwire.lifecycle` with the same rule codes.
 * @module
 */
import { FrameDecoder, responseEvent } from "./binary.js";
import { EventDecodeError, FramingError } from "./errors.js";
import {
  ERROR_CODES,
  type Event,
  type ErrorEvent,
  type JSONSchema,
  type ContentStop,
  type ToolCall,
  isKnown,
  kindOf,
  parseEvent,
  type Request,
  STOP_REASONS,
  VERSION,
} from "./events.js";
import { checkSchema, SchemaError, type SchemaViolation, validateSchema } from "./schema.js";
import { type Chunk, type SSEMessage, SSEDecoder } from "./sse.js";

/** A rule of the validator. */
export interface Rule {
  /** The draft section the rule comes from. */
  readonly section: string;
  /** `must`: the stream is not conformant; `should`: a warning. */
  readonly level: "must" | "should";
  /** One sentence. */
  readonly summary: string;
}

function rule(section: string, level: "must" | "should", summary: string): Rule {
  return Object.freeze({ section, level, summary });
}

/**
 * Every rule the validator knows, by stable code: the same codes, sections
 * and levels as `tokenwire.lifecycle.RULES` in Python. `invalid-arguments`
 * uses this package's JSON Schema subset ({@link validateSchema}); as in
 * Python, §8.2 fails closed: a schema it cannot use (a remote `$ref`, a bad
 * pattern, a limit passed) rejects every call, it never turns the check off.
 */
export const RULES: Readonly<Record<string, Rule>> = Object.freeze({
  framing: rule("5.1", "must", "the SSE framing could not be read (size limit exceeded)"),
  "invalid-json": rule("5.1", "must", "data is not exactly one complete JSON object"),
  "type-mismatch": rule("5.2", "must", "the JSON type differs from the SSE event: field"),
  "bad-type-name": rule(
    "5.1",
    "must",
    "the SSE event: name is not a valid type name (docs/conformance.md)",
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

/**
 * Why `args` do not pass the tool schema `schema` (§8.2), or null when they do.
 * Fails closed, as Python's `toolschema.Checker`: a schema that cannot be used
 * ({@link SchemaError}) is a finding, so no call can pass it.
 */
export function schemaProblem(schema: unknown, args: unknown): string | null {
  let problem: SchemaViolation | null;
  try {
    checkSchema(schema);
    problem = validateSchema(schema as JSONSchema, args);
  } catch (exc) {
    if (!(exc instanceof SchemaError)) throw exc;
    return `the tool's schema is unusable, so no call can pass: ${exc.message}`;
  }
  return problem === null ? null : `${problem.path}: ${problem.message}`;
}

// --- sequence numbers (§5.2.1) ---------------------------------------------------------

/** §8.4: past this, JavaScript numbers cannot tell seqs apart. */
export const MAX_SAFE_SEQ = 2 ** 53;

/** A seq gap: `expected` was due, `got` arrived, so `got - expected` events were lost. */
export interface Gap {
  expected: number;
  got: number;
  lost: number;
}

/**
 * Seq-gap detection on its own (§5.2.1: "0, 1, 2, 5 indicates events 3 and 4
 * were lost"). `feed(seq)` returns a {@link Gap} or null.
 */
export class SeqTracker {
  /** The seq due next. */
  expected = 0;
  /** Events lost so far, by gaps. */
  lost = 0;

  /**
   * @param seq  The seq of the event that arrived.
   * @returns The gap it reveals, or null. A seq that does not
   *   increase is not a gap (the validator calls it `seq-regression`).
   */
  feed(seq: number): Gap | null {
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

/** One broken rule. */
export interface Violation {
  /** A stable code from {@link RULES}. */
  readonly rule: string;
  /** The offending event's seq. */
  readonly seq: number | null;
  /** The draft section. */
  readonly section: string;
  readonly level: "must" | "should";
  /** One sentence. */
  readonly message: string;
}

/** The validator's state. */
export type State = "idle" | "streaming" | "errored" | "closed";

const IDLE: State = "idle";
const STREAMING: State = "streaming";
const ERRORED: State = "errored";
const CLOSED: State = "closed";
const UNKNOWN = "*";

/** (state, event type) -> next state. Anything missing is refused (REFUSALS). */
export const TRANSITIONS: Readonly<Record<string, State>> = Object.freeze({
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
export const REFUSALS: Readonly<Record<string, string>> = Object.freeze({
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
  /** `idle`, `streaming`, `errored` or `closed`. */
  state: State = IDLE;
  /** Every violation so far, in order. */
  readonly violations: Violation[] = [];
  /** Events seen, decodable or not. */
  events = 0;
  private _expected = 0;
  private _lastSeq: number | null = null;
  private readonly _open = new Set<number>();
  private readonly _stopped = new Set<number>();
  private readonly _toolBlocks = new Set<number>();
  private readonly _toolIds = new Set<string>();
  private _usage = false;
  private _errorSeen = false;
  private _decoded = 0;
  private _framingFailed = false;
  private readonly _requestId: string | null;
  // §8.2: with the request at hand, only the tools it declared may be called (a
  // request without tools declares none): name -> its parameters schema.
  private readonly _tools: Map<unknown, unknown> | null;

  /** @param options.request  The request that was sent (a parsed object), or null. */
  constructor({ request = null }: { request?: Partial<Request> | null } = {}) {
    const rid = request?.metadata?.request_id;
    this._requestId = typeof rid === "string" ? rid : null;
    if (request !== null && request !== undefined) {
      const tools: unknown = request.tools;
      const list = Array.isArray(tools)
        ? (tools as ({ name?: unknown; parameters?: unknown } | null)[])
        : [];
      this._tools = new Map(list.map((t) => [t?.name, t?.parameters]));
    } else {
      this._tools = null;
    }
  }

  /** True while no MUST has been broken. */
  get ok(): boolean {
    return !this.violations.some((v) => v.level === "must");
  }

  private _report(code: string, seq: number | null, message: string): Violation {
    const r = RULES[code];
    const v: Violation = Object.freeze({
      rule: code,
      seq,
      section: r.section,
      level: r.level,
      message,
    });
    this.violations.push(v);
    return v;
  }

  private _checkSeq(seq: number): void {
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
   * @returns the violations it caused.
   */
  feedInvalid(error: EventDecodeError): Violation[] {
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
   * @param event  From {@link parseEvent}.
   * @returns the violations it caused (also kept in `violations`).
   */
  feed(event: Event): Violation[] {
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

  private _checkEvent(event: Event, seq: number | null): void {
    const e = event as Record<string, any>;
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
        this._checkToolCall(event as ToolCall, seq);
        break;
      case "content.stop": {
        const { index, stop_reason: reason } = event as ContentStop;
        if (!(STOP_REASONS as readonly string[]).includes(reason)) {
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
        const code = (event as ErrorEvent).code;
        if (!(ERROR_CODES as readonly string[]).includes(code) && code !== "cancelled") {
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

  private _useBlock(index: number, seq: number | null, kind: string): void {
    if (this._stopped.has(index)) {
      this._report("block-already-stopped", seq, `${kind} for block ${index} after its stop`);
    } else {
      this._open.add(index);
    }
  }

  private _checkEcho(rid: unknown, seq: number | null, where: string): void {
    if (this._requestId !== null && rid !== this._requestId) {
      this._report(
        "request-id-not-echoed",
        seq,
        `${where} request_id is ${JSON.stringify(rid ?? null)}, ` +
          `the request's is ${JSON.stringify(this._requestId)}`,
      );
    }
  }

  private _checkToolCall(call: ToolCall, seq: number | null): void {
    if (this._toolIds.has(call.id)) {
      this._report("duplicate-tool-id", seq, `tool call id ${JSON.stringify(call.id)} used twice`);
    }
    this._toolIds.add(call.id);
    let args: unknown;
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
    if (this._tools === null) return;
    if (!this._tools.has(call.name)) {
      const declared = [...this._tools.keys()].sort().join(", ") || "none";
      this._report(
        "undeclared-tool",
        seq,
        `tool ${JSON.stringify(call.name)} was not declared (declared: ${declared})`,
      );
      return;
    }
    const problem = schemaProblem(this._tools.get(call.name), args);
    if (problem !== null) {
      this._report(
        "invalid-arguments",
        seq,
        `arguments of ${JSON.stringify(call.name)}: ${problem}`,
      );
    }
  }

  /**
   * Record that the SSE framing failed: the rest cannot be read.
   */
  feedFramingError(error: FramingError): void {
    this._report("framing", this._lastSeq, error.message);
    this._framingFailed = true;
  }

  /**
   * End of input: report what never came.
   * @returns the new violations.
   */
  close(): Violation[] {
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

  /** The verdict so far. */
  report(): Report {
    return makeReport(this);
  }
}

/** The outcome of a validation. */
export interface Report {
  /** True when no MUST was broken (the stream is conformant). */
  readonly ok: boolean;
  /** Events seen. */
  readonly events: number;
  /** Every violation, in order. */
  readonly violations: Violation[];
  /** The MUST violations. */
  readonly errors: Violation[];
  /** The SHOULD violations. */
  readonly warnings: Violation[];
}

function makeReport(validator: Validator): Report {
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
 * Decode a whole SSE body and check it against every rule. Never throws for bad input: framing errors,
 * undecodable events and lifecycle breaks all come back as violations.
 * @param body  The whole body, or its chunks in order.
 * @param options.request  The request that was sent, for the echo and tool-call checks.
 */
export function validate(
  body: Chunk | Iterable<Chunk>,
  {
    request = null,
    maxEventBytes = 1 << 20,
    framing = "sse",
  }: {
    request?: Partial<Request> | null;
    maxEventBytes?: number;
    /** `"binary"`: the body is the binary binding's frames (docs/binary.md). */
    framing?: "sse" | "binary";
  } = {},
): Report {
  const validator = new Validator({ request });
  const chunks: Iterable<Chunk> =
    typeof body === "string" || body instanceof Uint8Array || body instanceof ArrayBuffer
      ? [body]
      : (body as Iterable<Chunk>);
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

/** The binary binding's frames through the validator: the same rules as SSE. */
function feedFrames(validator: Validator, chunks: Iterable<Chunk>, maxFrameBytes: number): void {
  const decoder = new FrameDecoder({ maxFrameBytes });
  for (const chunk of chunks) {
    for (const frame of decoder.feed(chunk)) {
      let event: Event | null;
      try {
        event = responseEvent(frame);
      } catch (exc) {
        if (exc instanceof EventDecodeError) {
          validator.feedInvalid(exc);
          continue;
        }
        if (exc instanceof FramingError) throw exc;
        // An ERROR frame: the binding ended; reported as framing, as in Python.
        throw new FramingError((exc as Error).message, -1);
      }
      if (event !== null) validator.feed(event);
    }
  }
  decoder.close();
}

/** One SSE message through {@link parseEvent} and the validator. */
export interface Checked {
  /** The envelope, or null when it did not decode. */
  event: Event | null;
  /** Why it did not decode. */
  error: EventDecodeError | null;
  /** The rules this event broke. */
  violations: Violation[];
}

/** Decode one SSE message and feed it to `validator`; never throws for bad input. */
export function feedMessage(validator: Validator, message: SSEMessage): Checked {
  try {
    const event = parseEvent(message.event, message.data);
    return { event, error: null, violations: validator.feed(event) };
  } catch (exc) {
    if (!(exc instanceof EventDecodeError)) throw exc;
    return { event: null, error: exc, violations: validator.feedInvalid(exc) };
  }
}
