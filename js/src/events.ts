/**
 * The standard's event envelopes (§5.2, §5.3) as types, the request envelope
 * (§4), tokenwire's `tokenwire:` extensions and `tokenwire.*` extension
 * events (docs/extensions.md), the type-name grammar, and
 * {@link parseEvent}: one SSE message to one checked envelope.
 * @module
 */
import { EventDecodeError } from "./errors.js";

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
] as const);

/** The registered stop reasons (§5.3.3). */
export const STOP_REASONS = Object.freeze([
  "end_turn",
  "max_tokens",
  "tool_use",
  "content_filter",
] as const);

/**
 * The registered error codes (§5.3.6). `cancelled` is tokenwire's documented
 * extension code ({@link CANCELLED}) and is accepted beside them.
 */
export const ERROR_CODES = Object.freeze([
  "rate_limited",
  "context_length_exceeded",
  "content_filtered",
  "internal_error",
  "overloaded",
] as const);

/** docs/extensions.md: the error code of a stream stopped on request. */
export const CANCELLED = "cancelled";

/** The `tokenwire:` extension keys (docs/extensions.md). */
export const EXTENSIONS = Object.freeze({
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
  blockHistory: "tokenwire:block_history",
} as const);

/**
 * tokenwire's extension event types (docs/extensions.md, "Event extensions"):
 * what a vendor stream carries beyond the seven registered events. Their
 * names take the dot (a type name has no colon, {@link TYPE_NAME}); their
 * fields take `tokenwire:` (§4.7). They are unregistered types (§9.2): the
 * validator accepts them anywhere inside the stream and {@link Client} passes
 * them through; {@link isExtensionEvent} tells them apart.
 */
export const EXTENSION_EVENTS = Object.freeze({
  /** Metadata of standard block `index` ({@link BlockExtension}). */
  block: "tokenwire.block",
  /** Usage details next to the standard `usage` event ({@link UsageExtension}). */
  usage: "tokenwire.usage",
  /** The vendor's raw stop reason ({@link StopExtension}). */
  stop: "tokenwire.stop",
} as const);

/**
 * The grammar of an event type name (docs/conformance.md ruling 13), the
 * Python core's `events.TYPE_NAME`: dot-separated segments, each an ASCII
 * letter or digit then letters, digits, `_` or `-`; 1 to 64 characters in
 * all. No CR, LF, NUL, colon or space: a name is one SSE field value no
 * decoder can split, and the colon stays for extension keys (`vendor:name`).
 */
export const TYPE_NAME = /^(?=.{1,64}$)[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9][A-Za-z0-9_-]*)*$/;

/** True when `name` is a string that matches {@link TYPE_NAME}. */
export function isTypeName(name: unknown): name is string {
  return typeof name === "string" && TYPE_NAME.test(name);
}

export type EventType = (typeof EVENT_TYPES)[number];
export type StopReason = (typeof STOP_REASONS)[number];
export type ErrorCode = (typeof ERROR_CODES)[number] | typeof CANCELLED;

/** Fields every envelope carries (§5.2). Unknown fields are kept as sent. */
export interface Envelope {
  v: string;
  seq: number;
  type: string;
  [field: string]: unknown;
}

/** §5.3.1 */
export interface StreamStart extends Envelope {
  type: "stream.start";
  model: string;
  created: number;
  request_id?: string | null;
}

/** §5.3.2; `tokenwire:reasoning` marks a reasoning block (docs/extensions.md). */
export interface ContentDelta extends Envelope {
  type: "content.delta";
  index: number;
  role: "assistant";
  delta: { text: string; [field: string]: unknown };
  "tokenwire:reasoning"?: boolean | null;
}

/** §5.3.3 */
export interface ContentStop extends Envelope {
  type: "content.stop";
  index: number;
  stop_reason: StopReason | (string & {});
}

/** §5.3.4: `arguments` is a JSON text. */
export interface ToolCall extends Envelope {
  type: "tool.call";
  index: number;
  id: string;
  name: string;
  arguments: string;
}

/** §5.3.5 */
export interface Usage extends Envelope {
  type: "usage";
  input_tokens: number;
  output_tokens: number;
}

/** §5.3.6 */
export interface ErrorEvent extends Envelope {
  type: "error";
  code: ErrorCode | (string & {});
  message: string;
}

/** §5.3.7 */
export interface StreamEnd extends Envelope {
  type: "stream.end";
  request_id?: string | null;
}

/** A registered event (§9.2). */
export type KnownEvent =
  StreamStart | ContentDelta | ContentStop | ToolCall | Usage | ErrorEvent | StreamEnd;

/**
 * `tokenwire.block`: metadata of standard block `index`. One of: a reasoning
 * block's `tokenwire:signature` or a redacted reasoning block's
 * `tokenwire:redacted` data (both with `tokenwire:reasoning: true` and
 * `tokenwire:vendor`, the vendor they are bound to, to send back to it
 * unchanged), a server-side tool block (`tokenwire:server_tool`, shown, never
 * executed), or a citation of a text block (`tokenwire:citation`).
 */
export interface BlockExtension extends Envelope {
  type: "tokenwire.block";
  index: number;
  "tokenwire:reasoning"?: boolean;
  "tokenwire:signature"?: string;
  "tokenwire:redacted"?: string;
  "tokenwire:vendor"?: string;
  "tokenwire:server_tool"?: { [field: string]: unknown };
  "tokenwire:citation"?: { [field: string]: unknown };
  "tokenwire:refusal"?: boolean;
  "tokenwire:id"?: string;
  "tokenwire:tool_call_id"?: string;
  "tokenwire:raw"?: { [field: string]: unknown };
  /** 1.1: the `tool.call` on this block is a custom (`{input}`) or apply_patch call. */
  "tokenwire:tool_kind"?: "custom" | "apply_patch";
  /** 1.1: a request for consent; answer it with the request's `tokenwire:approvals`. */
  "tokenwire:approval"?: { id: string; name: string; arguments?: string; server_label?: string };
  /** 1.1: an MCP item the vendor ran; a `result` names its call in `call_id`. */
  "tokenwire:mcp"?: { kind: "list_tools" | "call" | "result"; [field: string]: unknown };
  /** 1.1: a compaction (summary, encrypted content), bound to `tokenwire:vendor`. */
  "tokenwire:compaction"?: { [field: string]: unknown };
  /** 1.1: the tokens' log probabilities, with their top alternatives. */
  "tokenwire:logprobs"?: { token: string; logprob: number; [field: string]: unknown }[];
  /** 1.1: audio output fragments of this block. */
  "tokenwire:audio"?: { id?: string; data?: string; transcript?: string; expires_at?: number };
  /** 1.1: each URL the model retrieved, with its retrieval status. */
  "tokenwire:url_context"?: { url: string; status: string }[];
  /** 1.1: code the vendor ran (`language`, `code`) or its result (`outcome`, `output`). */
  "tokenwire:code"?: { [field: string]: unknown };
  "tokenwire:status"?: string;
}

/** `tokenwire.usage`: prompt-cache token counts, next to the standard `usage` event. */
export interface UsageExtension extends Envelope {
  type: "tokenwire.usage";
  "tokenwire:cache_read_input_tokens": number;
  "tokenwire:cache_creation_input_tokens": number;
}

/** `tokenwire.stop`: the vendor's own stop reason, next to the mapped `stop_reason`. */
export interface StopExtension extends Envelope {
  type: "tokenwire.stop";
  "tokenwire:raw_stop_reason": string;
  /** 1.1: the container the turn ran in (a pause_turn continuation names it). */
  "tokenwire:container"?: { id: string; expires_at?: string };
}

/** One of tokenwire's extension events ({@link EXTENSION_EVENTS}). */
export type ExtensionEvent = BlockExtension | UsageExtension | StopExtension;

/**
 * Any decoded event: a registered one, one of tokenwire's extension events,
 * or another unregistered type passed through (§5.2).
 */
export type Event = KnownEvent | ExtensionEvent | Envelope;

/**
 * True when `event` is a tokenwire extension event (of type `kind`, when
 * given). Its fields are as the gateway sent them: they are not checked.
 */
export function isExtensionEvent<K extends ExtensionEvent["type"]>(
  event: Event,
  kind?: K,
): event is Extract<ExtensionEvent, { type: K }> {
  return kind === undefined
    ? Object.values(EXTENSION_EVENTS).includes(event.type as ExtensionEvent["type"])
    : event.type === kind;
}

/** True for a `content.delta` of a reasoning block (docs/extensions.md). */
export function isReasoning(event: Event): boolean {
  return event.type === "content.delta" && event[EXTENSIONS.reasoning] === true;
}

// --- the request envelope (§4) --------------------------------------------------------

/** §4.3.1 Table 3: a typed content part. */
export type Part =
  | { type: "text"; text: string }
  | { type: "image" | "document" | "audio"; media_type: string; data: string };

/** §4.8: a tool call on an assistant message; `arguments` is a JSON text. */
export interface ToolCallRef {
  id: string;
  name: string;
  arguments: string;
}

/** §4.3 Table 2 */
export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: string | Part[] | null;
  name?: string;
  tool_call_id?: string;
  tool_calls?: ToolCallRef[];
}

/** A JSON Schema object (the subset {@link validateSchema} checks is documented there). */
export type JSONSchema = { [keyword: string]: unknown } | boolean;

/** §4.4 Table 4 */
export interface Tool {
  name: string;
  description: string;
  parameters: { [keyword: string]: unknown };
}

/** §4.5 Table 5 */
export interface Parameters {
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop_sequences?: string[];
  [name: string]: unknown;
}

/** tokenwire's request extensions (docs/extensions.md); other namespaces pass through. */
export interface Extensions {
  "tokenwire:reasoning"?: boolean;
  "tokenwire:demo"?: { delay_ms: number };
  "tokenwire:resumable"?: boolean;
  "tokenwire:side_effects"?: string[];
  [key: string]: unknown;
}

/** §4.2 Table 1: the request envelope. */
export interface Request {
  version: string;
  stream: boolean;
  model: string;
  messages: Message[];
  tools?: Tool[];
  parameters?: Parameters;
  metadata?: { request_id?: string; [key: string]: unknown };
  extensions?: Extensions;
}

// --- decoding -------------------------------------------------------------------------

const COUNT = "int >= 0";
// §5.3: required (and optional) fields of each registered type, by JSON kind.
const SCHEMAS: Record<string, Record<string, string>> = {
  "stream.start": { model: "str", created: "int", request_id: "str?" },
  "content.delta": { index: COUNT, role: "str", delta: "delta", "tokenwire:reasoning": "bool?" },
  "content.stop": { index: COUNT, stop_reason: "str" },
  "tool.call": { index: COUNT, id: "str", name: "str", arguments: "str" },
  usage: { input_tokens: COUNT, output_tokens: COUNT },
  error: { code: "str", message: "str" },
  "stream.end": { request_id: "str?" },
};

/** The JSON kind of a value, in the Python decoder's words (`int`, `str`, `object`...). */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (typeof value === "string") return "str";
  if (typeof value === "boolean") return "bool";
  return typeof value === "object" ? "object" : typeof value;
}

function fieldError(kind: string, value: unknown): string | null {
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
      return (value as number) >= 0 ? null : "Expected `int` >= 0";
    case "delta": {
      if (got !== "object") return `Expected \`object\`, got \`${got}\``;
      const text = (value as { text?: unknown }).text;
      if (text === undefined) return "Object missing required field `text`";
      return kindOf(text) === "str" ? null : `Expected \`str\`, got \`${kindOf(text)}\``;
    }
    default:
      return got === want ? null : `Expected \`${want}\`, got \`${got}\``;
  }
}

function checkFields(name: string, obj: Record<string, unknown>): string | null {
  const fields: Record<string, string> = { v: "str", seq: COUNT, ...SCHEMAS[name] };
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
 * @param name  The SSE `event:` field (`"message"` when absent).
 * @param data  The SSE data.
 * @returns The envelope; for a type outside the registry, `isKnown(event.type)` is false.
 * @throws {@link EventDecodeError} `bad-type-name` (an unregistered `name`
 *   that is not a valid type name, {@link TYPE_NAME}), `invalid-json` (not one
 *   JSON object), `type-mismatch` (JSON type differs from `name`) or
 *   `invalid-field` (a required field missing or of the wrong type).
 */
export function parseEvent(name: string, data: string): Event {
  const known = Object.hasOwn(SCHEMAS, name);
  if (!known && !isTypeName(name)) {
    throw new EventDecodeError(
      `§5.1: event type ${shown(name)} is not a valid name ` +
        "(dot-separated ASCII letters, digits, _ and -, at most 64 characters)",
      "bad-type-name",
    );
  }
  let obj: unknown;
  try {
    obj = JSON.parse(data);
  } catch (exc) {
    throw new EventDecodeError(
      `§5.1: data is not valid JSON: ${(exc as Error).message}`,
      "invalid-json",
    );
  }
  if (kindOf(obj) !== "object") {
    throw new EventDecodeError("§5.1: data is JSON but not a JSON object", "invalid-json");
  }
  const record = obj as Record<string, unknown>;
  const seqOk = Number.isInteger(record.seq) && (!known || (record.seq as number) >= 0);
  const seq = seqOk ? (record.seq as number) : null;
  if (record.type !== name) {
    throw new EventDecodeError(
      `§5.2: JSON type ${JSON.stringify(record.type ?? null)} ` +
        `does not match SSE event ${JSON.stringify(name)}`,
      "type-mismatch",
      seq,
    );
  }
  if (known) {
    const problem = checkFields(name, record);
    if (problem) throw new EventDecodeError(problem, "invalid-field", seq);
  }
  return record as Event;
}

/** `name` for an error message: JSON-quoted, cut to 64 characters. */
function shown(name: string): string {
  return JSON.stringify(name.length <= 64 ? name : `${name.slice(0, 64)}...`);
}

/** True when `type` is one of the seven registered event types. */
export function isKnown(type: unknown): type is EventType {
  return typeof type === "string" && Object.hasOwn(SCHEMAS, type);
}
