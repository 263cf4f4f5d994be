/**
 * {@link Client}: a standard endpoint as an async iterable of typed events,
 * with cancellation on the server, resume with `Last-Event-ID`, duplicate
 * dropping and the §8.2 tool-call checks.
 * @module
 */
import {
  EventDecodeError,
  ProtocolError,
  StreamTruncatedError,
  TokenwireError,
  ToolCallError,
} from "./errors.js";
import {
  EXTENSIONS,
  type Event,
  parseEvent,
  REQUEST_MEDIA_TYPE,
  type Request,
  type Tool,
  type ToolCall,
  VERSION,
} from "./events.js";
import { type Fetch, raiseForStatus } from "./http.js";
import { schemaProblem, type Violation, Validator } from "./lifecycle.js";
import { checkSchema } from "./schema.js";
import { SSEDecoder } from "./sse.js";
import { endpoint, STREAM_PATH } from "./url.js";

/** The response header carrying the token that resumes or cancels a resumable stream. */
export const RESUME_TOKEN_HEADER = "tokenwire-resume-token";
/** The request header the token goes back in, on `GET`/`DELETE /v1/streams/{id}`. */
export const RESUME_TOKEN_REQUEST_HEADER = "Tokenwire-Resume-Token";
/** Resume attempts in a row that bring no new event before the stream is truncated. */
export const MAX_RESUME_ATTEMPTS = 3;

/** A tool call that passed the §8.2 checks, arguments parsed. */
export interface ParsedToolCall {
  id: string;
  name: string;
  index: number;
  /** The parsed arguments (a JSON object). */
  arguments: Record<string, unknown>;
  /** The arguments as sent (a JSON text). */
  raw: string;
  /** The declared tool. */
  tool: Tool;
}

/**
 * The confirmation hook for tools listed in `tokenwire:side_effects` (§8.2):
 * return (or resolve) true to let the call through. Without a hook such
 * calls are refused.
 */
export type ConfirmToolCall = (call: ParsedToolCall) => boolean | Promise<boolean>;

/** A request as the caller writes it: `version` and `stream` are filled in. */
export type RequestInput = Omit<Request, "version" | "stream"> &
  Partial<Pick<Request, "version" | "stream">>;

/** Options of {@link Client}. */
export interface ClientOptions {
  /**
   * The gateway, e.g. `http://127.0.0.1:8080` (the paths below are resolved
   * against it), read by the one URL grammar ({@link endpoint}): `host:port`,
   * `/v1` and the full `/v1/stream` URL work too; a vendor route is refused.
   */
  baseURL: string | URL;
  /** Headers sent with every request (e.g. `Authorization`). */
  headers?: Record<string, string>;
  /** The `fetch` to use; the global one by default. */
  fetch?: Fetch;
  /**
   * Ask for a resumable stream (`"tokenwire:resumable": true` unless the
   * request says otherwise) and reconnect with `Last-Event-ID` after a drop.
   * Default false, as in the Python client: without it the request says
   * `"tokenwire:resumable": false`, so a hang-up cancels the generation even
   * on a gateway whose streams are resumable by default.
   */
  resume?: boolean;
  /** §8.2: asked before a `tokenwire:side_effects` tool call is delivered. */
  confirm?: ConfirmToolCall;
  /** The largest SSE event accepted (default 1 MiB). */
  maxEventBytes?: number;
  /** Default `/v1/stream`. */
  streamPath?: string;
  /** Default `/v1/streams/{request_id}`. */
  resumePath?: string;
}

/** Options of one {@link Client.stream} call. */
export interface StreamCallOptions {
  /** Aborting it stops the fetch and, for a resumable stream, cancels the generation. */
  signal?: AbortSignal;
  /** Headers for this call only. */
  headers?: Record<string, string>;
}

const delay = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });

function newRequestId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `tw-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}

/**
 * The request as it is sent: `version` and `stream` set, a
 * `metadata.request_id` (a uuid) added when there is none (§4.6: it is
 * echoed, and it names the stream for a resume), and the
 * `tokenwire:resumable` extension (`resume`: true or false) unless the
 * request sets it itself.
 * @throws {@link SchemaError} (naming `tools[i].parameters...`) for a tool
 *   schema that cannot be used ({@link checkSchema}), and
 *   {@link TokenwireError} for a malformed `tokenwire:side_effects`: both
 *   before anything is sent.
 */
export function prepareRequest(input: RequestInput, { resume = false } = {}): Request {
  const request: Request = {
    ...input,
    version: input.version ?? VERSION,
    stream: input.stream ?? true,
    metadata: { ...(input.metadata ?? {}) },
  };
  if (typeof request.metadata!.request_id !== "string") {
    request.metadata!.request_id = newRequestId();
  }
  if (request.extensions?.[EXTENSIONS.resumable] === undefined) {
    request.extensions = { ...(request.extensions ?? {}), [EXTENSIONS.resumable]: resume };
  }
  // §4.4 / §8.2: a tool schema that cannot be used is refused before sending, as
  // the Python core refuses it when it parses the request.
  const tools: unknown = request.tools;
  if (tools !== undefined) {
    if (!Array.isArray(tools)) throw new TokenwireError("tools: must be a list of tools (§4.4)");
    tools.forEach((tool: { parameters?: unknown } | null, i) =>
      checkSchema(tool?.parameters, `tools[${i}].parameters`),
    );
  }
  const sideEffects = request.extensions?.[EXTENSIONS.sideEffects];
  if (
    sideEffects !== undefined &&
    !(Array.isArray(sideEffects) && sideEffects.every((s) => typeof s === "string"))
  ) {
    throw new TokenwireError(
      `extensions["${EXTENSIONS.sideEffects}"]: must be a list of tool names`,
    );
  }
  return request;
}

/**
 * A client of one standard endpoint.
 *
 * @example
 * const client = new Client({ baseURL: "http://127.0.0.1:8080" });
 * for await (const event of client.stream({ model: "demo", messages: [...] })) {
 *   if (event.type === "content.delta") process.stdout.write(event.delta.text);
 * }
 */
export class Client {
  readonly baseURL: string;
  readonly headers: Record<string, string>;
  readonly resume: boolean;
  readonly confirm: ConfirmToolCall | null;
  readonly maxEventBytes: number;
  readonly streamPath: string;
  /** The query given with `baseURL` (`""` or `"?..."`), sent on every request. */
  readonly query: string;
  readonly resumePath: string;
  readonly fetch: Fetch;

  constructor(options: ClientOptions) {
    if (!options?.baseURL) throw new TokenwireError("Client: baseURL is required");
    this.streamPath = options.streamPath ?? STREAM_PATH;
    if (this.streamPath === STREAM_PATH) {
      // The one URL grammar (url.ts): host:port, /v1 or the stream URL work too,
      // and a vendor route is refused saying what to pass.
      const found = endpoint(options.baseURL);
      this.baseURL = found.base;
      this.query = found.query;
    } else {
      this.baseURL = String(options.baseURL).replace(/\/+$/, "");
      this.query = "";
    }
    this.headers = { ...(options.headers ?? {}) };
    this.resume = options.resume ?? false;
    this.confirm = options.confirm ?? null;
    this.maxEventBytes = options.maxEventBytes ?? 1 << 20;
    this.resumePath = options.resumePath ?? "/v1/streams/{request_id}";
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** The absolute URL of `path` on this gateway. */
  url(path: string): string {
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
  stream(request: RequestInput, options: StreamCallOptions = {}): EventStream {
    return new EventStream(this, prepareRequest(request, { resume: this.resume }), options);
  }
}

/** A tool call refused by the §8.2 checks; it is not delivered. */
export interface RejectedToolCall {
  event: ToolCall;
  error: ToolCallError;
}

/**
 * One streamed response: iterate it (once) for typed events. Duplicate and
 * backward seqs are dropped, undecodable events skipped (both recorded in
 * `violations`), and tool calls that fail §8.2 left out (`rejectedToolCalls`).
 */
export class EventStream implements AsyncIterable<Event> {
  /** The request as sent. */
  readonly request: Request;
  /** Every lifecycle violation seen (delivered events only, plus undecodable ones). */
  readonly violations: Violation[] = [];
  /** Tool calls refused by §8.2, in order. */
  readonly rejectedToolCalls: RejectedToolCall[] = [];
  /** The last seq delivered (the next resume's `Last-Event-ID`). */
  lastSeq: number | null = null;
  /** HTTP connections made: 1, plus one per resume. */
  connections = 0;
  /** The resume token from the POST's `tokenwire-resume-token` header, when given. */
  resumeToken: string | null = null;
  /** The first response's headers. */
  headers: Headers | null = null;
  /** True once `stream.end` has been delivered. */
  done = false;

  private readonly client: Client;
  private readonly options: StreamCallOptions;
  private readonly controller = new AbortController();
  private readonly validator: Validator;
  private readonly toolIds = new Set<string>();
  private started = false;
  private opened = false;
  private cancelled: Promise<void> | null = null;

  constructor(client: Client, request: Request, options: StreamCallOptions) {
    this.client = client;
    this.request = request;
    this.options = options;
    this.validator = new Validator({ request });
  }

  /** The request's `metadata.request_id`. */
  get requestId(): string {
    return this.request.metadata!.request_id as string;
  }

  /** True when the request asked for a resumable stream. */
  get resumable(): boolean {
    return this.request.extensions?.[EXTENSIONS.resumable] === true;
  }

  private resumeURL(): string {
    return this.client.url(
      this.client.resumePath.replace("{request_id}", encodeURIComponent(this.requestId)),
    );
  }

  private tokenHeaders(): Record<string, string> {
    return this.resumeToken ? { [RESUME_TOKEN_REQUEST_HEADER]: this.resumeToken } : {};
  }

  /**
   * Stop reading and cancel the generation: aborts the fetch and, for a
   * resumable stream, sends `DELETE /v1/streams/{request_id}` (with the
   * resume token) so the server stops generating. Safe to call twice.
   */
  cancel(): Promise<void> {
    if (this.cancelled) return this.cancelled;
    this.controller.abort(this.options.signal?.reason);
    this.cancelled = (async () => {
      // Only a stream the gateway accepted (a 2xx answer) has a generation to stop.
      if (!this.resumable || !this.opened || this.done) return;
      try {
        const response = await this.client.fetch(this.resumeURL(), {
          method: "DELETE",
          headers: {
            ...this.client.headers,
            ...(this.options.headers ?? {}),
            ...this.tokenHeaders(),
          },
        });
        await response.body?.cancel().catch(() => undefined);
      } catch {
        // best effort: the gateway also cancels a stream nobody reads (grace_s)
      }
    })();
    return this.cancelled;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Event, void, undefined> {
    if (this.started) throw new TokenwireError("an EventStream can be iterated only once");
    this.started = true;
    const signal = this.options.signal;
    const onAbort = (): void => void this.cancel();
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
      if (!finished && !this.done) await this.cancel(); // break, throw or abort
    }
  }

  private async *connectionsLoop(): AsyncGenerator<Event, void, undefined> {
    let fruitless = 0;
    let drop = "";
    for (;;) {
      const before = this.lastSeq;
      let response: Response | null = null;
      try {
        response = await this.connect();
      } catch (exc) {
        // The first answer's errors are the caller's; a failed resume is one more drop.
        if (this.connections <= 1 || this.controller.signal.aborted) throw exc;
        drop = `resume failed: ${(exc as Error).message}`;
      }
      if (response !== null) {
        drop = yield* this.read(response);
        if (this.done) return;
      }
      // The connection dropped before stream.end: resume (DESIGN.md) or give up.
      if (!this.client.resume || !this.resumable) {
        const why = this.client.resume ? "the stream is not resumable" : "resume is off";
        throw new StreamTruncatedError(`${drop} (${why})`, this.lastSeq);
      }
      fruitless = this.lastSeq === before ? fruitless + 1 : 0;
      if (fruitless >= MAX_RESUME_ATTEMPTS) {
        throw new StreamTruncatedError(
          `${drop}; ${MAX_RESUME_ATTEMPTS} resume attempts brought nothing new`,
          this.lastSeq,
        );
      }
      await delay(fruitless ? Math.min(100 * 2 ** fruitless, 2000) : 0, this.controller.signal);
      if (this.controller.signal.aborted) throw this.abortReason();
    }
  }

  private abortReason(): unknown {
    return this.options.signal?.reason ?? new DOMException("aborted", "AbortError");
  }

  /** The POST, or for a resume the GET with `Last-Event-ID`; checks status and type. */
  private async connect(): Promise<Response> {
    const first = this.connections === 0;
    this.connections += 1;
    const common = { ...this.client.headers, ...(this.options.headers ?? {}) };
    let response: Response;
    if (first) {
      response = await this.client.fetch(this.client.url(this.client.streamPath), {
        method: "POST",
        headers: { "Content-Type": REQUEST_MEDIA_TYPE, Accept: "text/event-stream", ...common },
        body: JSON.stringify(this.request),
        signal: this.controller.signal,
        cache: "no-store",
      });
      this.headers = response.headers;
      this.resumeToken = response.headers.get(RESUME_TOKEN_HEADER);
    } else {
      const headers: Record<string, string> = {
        Accept: "text/event-stream",
        "Cache-Control": "no-cache",
        ...common,
        ...this.tokenHeaders(),
      };
      // seq doubles as the SSE id (DESIGN.md): the last seq seen is the Last-Event-ID.
      if (this.lastSeq !== null) headers["Last-Event-ID"] = String(this.lastSeq);
      response = await this.client.fetch(this.resumeURL(), {
        method: "GET",
        headers,
        signal: this.controller.signal,
        cache: "no-store",
      });
    }
    await raiseForStatus(response);
    const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    if (type !== "text/event-stream" || response.body === null) {
      await response.body?.cancel().catch(() => undefined);
      throw new ProtocolError(
        `§4.9: the endpoint answered ${type || "no content type"}, not text/event-stream`,
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
  private async *read(response: Response): AsyncGenerator<Event, string, undefined> {
    const decoder = new SSEDecoder({ maxEventBytes: this.client.maxEventBytes });
    const reader = response.body!.getReader();
    try {
      for (;;) {
        let result: ReadableStreamReadResult<Uint8Array>;
        try {
          result = await reader.read();
        } catch (exc) {
          if (this.controller.signal.aborted) throw exc;
          const error = exc as Error | null;
          return `${error?.name ?? "Error"}: ${error?.message ?? String(exc)}`;
        }
        const messages = result.done ? decoder.close() : decoder.feed(result.value);
        for (const message of messages) {
          let event: Event;
          try {
            event = parseEvent(message.event, message.data);
          } catch (exc) {
            if (!(exc instanceof EventDecodeError)) throw exc;
            if (exc.seq === null) {
              // No seq to place it by (a bad-type-name, bad JSON): recorded as the
              // Python client does; the validator assumes it took the next seq.
              this.violations.push(...this.validator.feedInvalid(exc));
            } else if (this.lastSeq === null || exc.seq > this.lastSeq) {
              this.violations.push(...this.validator.feedInvalid(exc));
              this.lastSeq = exc.seq;
            }
            continue;
          }
          if (!Number.isInteger(event.seq)) {
            // An unregistered type without a usable seq: recorded, not delivered.
            this.violations.push(...this.validator.feed(event));
            continue;
          }
          // A resume replays from Last-Event-ID; anything at or before it is a duplicate.
          if (this.lastSeq !== null && event.seq <= this.lastSeq) continue;
          this.lastSeq = event.seq;
          this.violations.push(...this.validator.feed(event));
          if (event.type === "tool.call" && !(await this.checkToolCall(event as ToolCall))) {
            continue;
          }
          if (event.type === "stream.end") this.done = true;
          yield event;
          if (this.done) return "";
        }
        if (result.done) return "the connection closed before stream.end";
      }
    } finally {
      if (!this.done) await reader.cancel().catch(() => undefined);
      reader.releaseLock();
    }
  }

  private reject(event: ToolCall, reason: ToolCallError["reason"], message: string): false {
    this.rejectedToolCalls.push({
      event,
      error: new ToolCallError(
        `§8.2: tool call ${JSON.stringify(event.name)} (${event.id}) refused: ${message}`,
        reason,
        event.name,
        event.id,
      ),
    });
    return false;
  }

  /** §8.2: declared, arguments a JSON object valid against the tool's schema, confirmed. */
  private async checkToolCall(event: ToolCall): Promise<boolean> {
    if (this.toolIds.has(event.id)) {
      return this.reject(
        event,
        "duplicate-tool-id",
        `the id ${JSON.stringify(event.id)} was used twice`,
      );
    }
    this.toolIds.add(event.id);
    const tool = (this.request.tools ?? []).find((t) => t.name === event.name);
    if (tool === undefined) {
      const declared =
        (this.request.tools ?? [])
          .map((t) => t.name)
          .sort()
          .join(", ") || "none";
      return this.reject(event, "undeclared-tool", `not a declared tool (declared: ${declared})`);
    }
    let args: unknown;
    try {
      args = JSON.parse(event.arguments);
    } catch {
      return this.reject(event, "bad-arguments-json", "the arguments are not JSON");
    }
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return this.reject(event, "bad-arguments-json", "the arguments are not a JSON object");
    }
    // §8.2 fails closed (as Python's): a schema that cannot be used rejects the call.
    const problem = schemaProblem(tool.parameters, args);
    if (problem !== null) return this.reject(event, "invalid-arguments", problem);
    const sideEffects = this.request.extensions?.[EXTENSIONS.sideEffects] ?? [];
    if (sideEffects.includes(event.name)) {
      const call: ParsedToolCall = {
        id: event.id,
        name: event.name,
        index: event.index,
        arguments: args as Record<string, unknown>,
        raw: event.arguments,
        tool,
      };
      const confirm = this.client.confirm;
      if (confirm === null) {
        return this.reject(
          event,
          "not-confirmed",
          "the tool has side effects and no confirm hook was given",
        );
      }
      if (!(await confirm(call))) {
        return this.reject(event, "not-confirmed", "the confirm hook refused it");
      }
    }
    return true;
  }
}
