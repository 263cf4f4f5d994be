/**
 * The low-level HTTP layer the playground uses: `fetch` with a POST
 * (EventSource cannot POST) and a `ReadableStream` reader, yielding every
 * message with its verdict and arrival time. {@link Client} builds on it.
 * @module
 */
import { type ErrorBody, FramingError, httpError, ProtocolError } from "./errors.js";
import { type Event, REQUEST_MEDIA_TYPE, type Request } from "./events.js";
import {
  type Checked,
  feedMessage,
  type Gap,
  type Report,
  SeqTracker,
  Validator,
} from "./lifecycle.js";
import { FRAMES_MEDIA_TYPE, FrameDecoder, FrameType } from "./binary.js";
import { type SSEMessage, SSEDecoder } from "./sse.js";

/** One event as it arrived. */
export interface StreamItem extends Checked {
  /** The raw SSE message. */
  message: SSEMessage;
  /** The seq gap this event revealed (§5.2.1). */
  gap: Gap | null;
  /** Milliseconds from sending the request to the arrival of the bytes that completed it. */
  time: number;
}

/** The `fetch` this package calls (the global one unless given). */
export type Fetch = (input: string | URL, init?: RequestInit) => Promise<Response>;

const now = (): number => (typeof performance !== "undefined" ? performance.now() : Date.now());

/** Options of {@link StreamResponse}. */
export interface StreamResponseOptions {
  request?: Partial<Request> | null;
  started?: number;
  status?: number;
  headers?: Headers | null;
  maxEventBytes?: number;
  /** The body is the binary binding's frames (docs/binary.md), not SSE. */
  frames?: boolean;
}

const utf8 = new TextDecoder();

/**
 * The binary binding's frames read as SSE messages: one per `EVENT` frame,
 * named by its envelope's `type` (what SSE's `event:` line carries), so that
 * one reader and one validator serve both bindings. An `ERROR` frame (the
 * binding ended) is a {@link FramingError}; `PING` and `META` give nothing.
 */
export class FramesMessageDecoder {
  readonly #decoder: FrameDecoder;

  constructor(options: { maxEventBytes?: number } = {}) {
    this.#decoder = new FrameDecoder({ maxFrameBytes: options.maxEventBytes });
  }

  #messages(frames: ReturnType<FrameDecoder["feed"]>): SSEMessage[] {
    const out: SSEMessage[] = [];
    for (const frame of frames) {
      if (frame.type === FrameType.ERROR) {
        throw new FramingError(`the peer ended the binding: ${utf8.decode(frame.body)}`, -1);
      }
      if (frame.type !== FrameType.EVENT) continue;
      const data = utf8.decode(frame.body);
      let type = "message";
      try {
        const parsed = JSON.parse(data) as { type?: unknown };
        if (typeof parsed?.type === "string") type = parsed.type;
      } catch {
        // the validator reports the bad JSON
      }
      out.push({ event: type, data, id: "", retry: null });
    }
    return out;
  }

  feed(chunk: Uint8Array): SSEMessage[] {
    return this.#messages(this.#decoder.feed(chunk));
  }

  close(): SSEMessage[] {
    return this.#messages(this.#decoder.close());
  }
}

/**
 * A standard response being read: iterate it (once) for {@link StreamItem}s.
 * After the iteration, `report` holds the lifecycle verdict; `text` is the
 * answer so far (the `delta.text` of non-reasoning blocks).
 */
export class StreamResponse {
  readonly body: ReadableStream<Uint8Array>;
  /** HTTP status. */
  readonly status: number;
  /** Response headers, when known. */
  readonly headers: Headers | null;
  /** When the request was sent (`performance.now()` time). */
  readonly started: number;
  readonly validator: Validator;
  readonly decoder: SSEDecoder | FramesMessageDecoder;
  readonly seq: SeqTracker;
  /** The answer text so far. */
  text = "";
  /** Milliseconds from the request to the first content.delta or tool.call. */
  ttft: number | null = null;
  /** True when the stream was aborted before its end. */
  aborted = false;
  /** The verdict, once the iteration is over. */
  report: Report | null = null;

  constructor(
    body: ReadableStream<Uint8Array>,
    {
      request = null,
      started = now(),
      status = 200,
      headers = null,
      maxEventBytes,
      frames = false,
    }: StreamResponseOptions = {},
  ) {
    this.body = body;
    this.status = status;
    this.headers = headers;
    this.started = started;
    this.validator = new Validator({ request });
    this.decoder = frames
      ? new FramesMessageDecoder({ maxEventBytes })
      : new SSEDecoder({ maxEventBytes });
    this.seq = new SeqTracker();
  }

  private _item(message: SSEMessage, time: number): StreamItem {
    const checked = feedMessage(this.validator, message);
    const seq = checked.event ? checked.event.seq : checked.error?.seq;
    const item: StreamItem = {
      ...checked,
      message,
      time,
      gap: typeof seq === "number" && Number.isInteger(seq) ? this.seq.feed(seq) : null,
    };
    const ev: Event | null = item.event;
    if (ev && (ev.type === "content.delta" || ev.type === "tool.call")) {
      if (this.ttft === null) this.ttft = item.time;
      if (ev.type === "content.delta" && !ev["tokenwire:reasoning"]) {
        this.text += (ev.delta as { text: string }).text;
      }
    }
    return item;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamItem, void, undefined> {
    const reader = this.body.getReader();
    try {
      for (;;) {
        let result: ReadableStreamReadResult<Uint8Array>;
        try {
          result = await reader.read();
        } catch (exc) {
          if ((exc as { name?: string } | null)?.name === "AbortError") this.aborted = true;
          throw exc;
        }
        // Stamped when the bytes arrived, not when the caller gets to the event.
        const time = now() - this.started;
        let messages: SSEMessage[];
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
}

/** Options of {@link stream}. */
export interface StreamOptions {
  signal?: AbortSignal;
  headers?: Record<string, string>;
  fetch?: Fetch;
  maxEventBytes?: number;
  /** `Accept` (default `text/event-stream`; frames: `application/llm-stream-frames`). */
  accept?: string;
}

/**
 * Send a standard request and return the streamed response.
 *
 * POSTs `request` as `application/llm-request+json` (§4.1) with `fetch` and
 * reads the body with a `ReadableStream` reader. Abort with
 * `options.signal`: the iteration then throws the fetch's `AbortError` and
 * `response.aborted` is true.
 *
 * @param url  The endpoint, e.g. `/v1/stream`.
 * @param request  The request envelope (§4.2), sent as JSON (a string is sent as is).
 * @throws {@link HTTPStatusError} a non-2xx answer (415, another 4xx, a 5xx: its subclasses).
 * @throws {@link ProtocolError} a 2xx answer that is not `text/event-stream`.
 */
export async function stream(
  url: string | URL,
  request: Partial<Request> | string,
  options: StreamOptions = {},
): Promise<StreamResponse> {
  const doFetch: Fetch = options.fetch ?? globalThis.fetch;
  const started = now();
  const response = await doFetch(url, {
    method: "POST",
    headers: {
      "Content-Type": REQUEST_MEDIA_TYPE,
      Accept: options.accept ?? "text/event-stream",
      ...(options.headers ?? {}),
    },
    body: typeof request === "string" ? request : JSON.stringify(request),
    signal: options.signal,
    cache: "no-store",
  });
  return open(response, {
    request: typeof request === "string" ? null : request,
    started,
    maxEventBytes: options.maxEventBytes,
  });
}

/** Throw the right {@link HTTPStatusError} for a non-2xx response. */
export async function raiseForStatus(response: Response): Promise<void> {
  if (response.ok) return;
  const text = await response.text().catch(() => "");
  let body: ErrorBody | null = null;
  try {
    const parsed: unknown = JSON.parse(text);
    body = parsed !== null && typeof parsed === "object" ? (parsed as ErrorBody) : null;
  } catch {
    body = null;
  }
  throw httpError(response.status, body, text);
}

/**
 * Wrap an already made `fetch` response whose body is a standard stream
 * (for example a replayed capture).
 * @throws {@link HTTPStatusError} | {@link ProtocolError} as {@link stream}.
 */
export async function open(
  response: Response,
  {
    request = null,
    started = now(),
    maxEventBytes,
  }: { request?: Partial<Request> | null; started?: number; maxEventBytes?: number } = {},
): Promise<StreamResponse> {
  await raiseForStatus(response);
  const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  const frames = type === FRAMES_MEDIA_TYPE;
  if ((type !== "text/event-stream" && !frames) || response.body === null) {
    throw new ProtocolError(`expected text/event-stream, got ${type || "no content type"}`);
  }
  return new StreamResponse(response.body, {
    request,
    started,
    status: response.status,
    headers: response.headers,
    maxEventBytes,
    frames,
  });
}
