/**
 * The binary binding's own transports (docs/binary.md 6.2, 6.3) as a `fetch`.
 *
 * {@link framesFetch} keeps the {@link Client}'s one flow: the client sends
 * the same `POST` (the stream), `GET` (a resume) and `DELETE` (a resumable
 * stream's cancel). The `POST` becomes a `REQUEST` frame and the `GET` a
 * `RESUME` frame on a carrier of one shared connection: a channel of a
 * WebSocket (the browser's `WebSocket`, or Node's `ws` package), or a
 * stream of a WebTransport session (browsers). The answer's frames come back
 * as the response body, without channels, as over HTTP; a `META` frame's
 * `resume_token` is the `tokenwire-resume-token` header, and an `ERROR`
 * frame that stands for a refusal (`"404: unknown model …"`) is that status
 * with its JSON body. Aborting the request is the hang-up: `CANCEL` on a
 * channel, a cancelled WebTransport stream. Other requests go to `fetch`.
 * @module
 */
import { encodeFrame, type Frame, FrameDecoder, FRAMES_MEDIA_TYPE, FrameType } from "./binary.js";
import type { Fetch } from "./http.js";

/** The WebSocket subprotocol of the binding. */
export const FRAMES_SUBPROTOCOL = "llm-stream-frames.v1";

/** What a WebSocket implementation offers (the browser's, or Node's `ws`). */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code?: number; reason?: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/**
 * A WebSocket constructor: the browser's (`protocols` only: a page's
 * credentials are its cookies) or Node's `ws` (which also takes `{headers}`).
 */
export type WebSocketConstructor = new (
  url: string,
  protocols: string | string[],
  options?: { headers?: Record<string, string> },
) => WebSocketLike;

/** Options of {@link framesFetch}. */
export interface FramesFetchOptions {
  /** `"ws"` (a WebSocket) or `"webtransport"` (a WebTransport session). */
  transport: "ws" | "webtransport";
  /** The `ws://…/v1/ws` or `https://…/v1/wt` URL. */
  url: string;
  /** The stream path the client POSTs to (a `REQUEST` frame). */
  streamPath: string;
  /** The resume path's prefix (`/v1/streams/`): its GETs are `RESUME` frames. */
  resumePrefix: string;
  /** Everything else (the cancel's `DELETE`): the global `fetch` by default. */
  fetch?: Fetch;
  /** The WebSocket constructor; the global `WebSocket` by default. */
  webSocket?: WebSocketConstructor;
  /** WebTransport: the SHA-256 of a short-lived certificate to trust (a test's). */
  serverCertificateHashes?: { algorithm: "sha-256"; value: BufferSource }[];
  /** The largest frame accepted (default 1 MiB). */
  maxFrameBytes?: number;
}

/** One stream's frames on a connection. */
interface Carrier {
  /** The next frame, `null` at the stream's end; rejects on a cut. */
  next(): Promise<Frame | null>;
  /** The hang-up (nothing after the stream's end). */
  cancel(): void;
}

interface Session {
  readonly alive: boolean;
  open(type: number, body: Uint8Array): Promise<Carrier>;
  close(): void;
}

/** A queue of frames that a reader awaits; `fail` makes every later read reject. */
class FrameQueue {
  #items: (Frame | null)[] = [];
  #waiting: ((value: void) => void) | null = null;
  #error: Error | null = null;

  push(item: Frame | null): void {
    this.#items.push(item);
    this.#wake();
  }

  fail(error: Error): void {
    this.#error ??= error;
    this.#wake();
  }

  #wake(): void {
    const waiting = this.#waiting;
    this.#waiting = null;
    waiting?.();
  }

  async next(): Promise<Frame | null> {
    for (;;) {
      if (this.#items.length > 0) {
        const item = this.#items[0];
        if (item !== null) this.#items.shift(); // the end stays: every later read sees it
        return item;
      }
      if (this.#error !== null) throw this.#error;
      await new Promise<void>((resolve) => (this.#waiting = resolve));
    }
  }
}

const utf8 = new TextDecoder();
const encoder = new TextEncoder();

/** A stream.end envelope is short: longer EVENT bodies are not parsed to look for it. */
const END_PROBE_BYTES = 512;

function endsStream(frame: Frame): boolean {
  if (frame.type === FrameType.ERROR) return true;
  if (frame.type !== FrameType.EVENT || frame.body.length > END_PROBE_BYTES) return false;
  const text = utf8.decode(frame.body);
  if (!text.includes("stream.end")) return false;
  try {
    return (JSON.parse(text) as { type?: unknown }).type === "stream.end";
  } catch {
    return false;
  }
}

class WebSocketSession implements Session {
  #socket: WebSocketLike;
  #channels = new Map<number, FrameQueue>();
  #next = 1;
  #cut: string | null = null;
  #maxFrameBytes: number;

  private constructor(socket: WebSocketLike, maxFrameBytes: number) {
    this.#socket = socket;
    this.#maxFrameBytes = maxFrameBytes;
    socket.onmessage = (event) => this.#receive(event.data);
    socket.onclose = (event) => this.#end(`the WebSocket closed (code ${event.code ?? "none"})`);
    socket.onerror = () => this.#end("the WebSocket failed");
  }

  static connect(
    make: WebSocketConstructor,
    url: string,
    headers: Record<string, string>,
    maxFrameBytes: number,
  ): Promise<WebSocketSession> {
    return new Promise((resolve, reject) => {
      const socket = new make(url, FRAMES_SUBPROTOCOL, { headers });
      socket.binaryType = "arraybuffer";
      socket.onopen = () => resolve(new WebSocketSession(socket, maxFrameBytes));
      socket.onerror = () => reject(new TypeError(`cannot open ${url}`));
      socket.onclose = (event) =>
        reject(new TypeError(`${url} refused the WebSocket (code ${event.code ?? "none"})`));
    });
  }

  get alive(): boolean {
    return this.#cut === null;
  }

  #receive(data: unknown): void {
    if (typeof data === "string") return this.#end("the server sent a text message");
    const bytes =
      data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data as ArrayBufferLike);
    let frames: Frame[];
    try {
      const decoder = new FrameDecoder({ maxFrameBytes: this.#maxFrameBytes, channels: true });
      frames = [...decoder.feed(bytes), ...decoder.close()];
    } catch (exc) {
      return this.#end(`the server sent a broken frame: ${(exc as Error).message}`);
    }
    for (const frame of frames) {
      const queue = frame.channel === null ? undefined : this.#channels.get(frame.channel);
      if (queue === undefined) continue; // a channel let go of, or channel 0's notice
      queue.push(frame);
      if (endsStream(frame)) {
        queue.push(null);
        this.#channels.delete(frame.channel!);
      }
    }
  }

  #end(why: string): void {
    if (this.#cut !== null) return;
    this.#cut = why;
    for (const queue of this.#channels.values()) queue.fail(new TypeError(why));
    this.#channels.clear();
  }

  async open(type: number, body: Uint8Array): Promise<Carrier> {
    if (this.#cut !== null) throw new TypeError(`the WebSocket is closed: ${this.#cut}`);
    const channel = this.#next++;
    const queue = new FrameQueue();
    this.#channels.set(channel, queue);
    this.#socket.send(encodeFrame(type, body, channel));
    return {
      next: () => queue.next(),
      cancel: () => {
        queue.fail(new DOMException("the stream was cancelled", "AbortError")); // pending reads end
        if (!this.#channels.delete(channel) || this.#cut !== null) return;
        this.#socket.send(encodeFrame(FrameType.CANCEL, new Uint8Array(0), channel));
      },
    };
  }

  close(): void {
    this.#end("the client closed the WebSocket");
    this.#socket.close(1000);
  }
}

/** The browser's WebTransport, as far as this module uses it. */
interface WebTransportLike {
  ready: Promise<unknown>;
  closed: Promise<unknown>;
  createBidirectionalStream(): Promise<{
    readable: ReadableStream<Uint8Array>;
    writable: WritableStream<Uint8Array>;
  }>;
  close(): void;
}

class WebTransportSession implements Session {
  #transport: WebTransportLike;
  #cut: string | null = null;
  #maxFrameBytes: number;

  private constructor(transport: WebTransportLike, maxFrameBytes: number) {
    this.#transport = transport;
    this.#maxFrameBytes = maxFrameBytes;
    transport.closed.then(
      () => (this.#cut ??= "the WebTransport session closed"),
      (exc: unknown) => (this.#cut ??= `the WebTransport session failed: ${String(exc)}`),
    );
  }

  static async connect(
    url: string,
    hashes: FramesFetchOptions["serverCertificateHashes"],
    maxFrameBytes: number,
  ): Promise<WebTransportSession> {
    const make = (globalThis as { WebTransport?: new (url: string, options?: object) => unknown })
      .WebTransport;
    if (make === undefined) throw new TypeError("this runtime has no WebTransport");
    const transport = new make(url, hashes ? { serverCertificateHashes: hashes } : {});
    await (transport as WebTransportLike).ready;
    return new WebTransportSession(transport as WebTransportLike, maxFrameBytes);
  }

  get alive(): boolean {
    return this.#cut === null;
  }

  async open(type: number, body: Uint8Array): Promise<Carrier> {
    if (this.#cut !== null) throw new TypeError(`the session is closed: ${this.#cut}`);
    const stream = await this.#transport.createBidirectionalStream();
    const writer = stream.writable.getWriter();
    await writer.write(encodeFrame(type, body));
    await writer.close();
    const reader = stream.readable.getReader();
    const decoder = new FrameDecoder({ maxFrameBytes: this.#maxFrameBytes });
    let ready: Frame[] = [];
    let ended = false;
    let cancelled = false;
    return {
      next: async () => {
        while (ready.length === 0) {
          if (cancelled) throw new DOMException("the stream was cancelled", "AbortError");
          if (ended) return null;
          const { value, done } = await reader.read();
          if (done) {
            decoder.close();
            ended = true;
          } else {
            ready = decoder.feed(value);
          }
        }
        return ready.shift()!;
      },
      cancel: () => {
        if (ended) return;
        ended = cancelled = true;
        reader.cancel().catch(() => undefined); // STOP_SENDING: the hang-up
      },
    };
  }

  close(): void {
    this.#cut ??= "the client closed the session";
    this.#transport.close();
  }
}

/** channel.py's refusal message: "<status>: <the route's message>". */
const REFUSAL = /^(\d{3}): ([\s\S]*)$/;
const STATUS_OF_CODE: Record<string, number> = { overloaded: 503, rate_limited: 429 };

function refusal(frame: Frame): Response | null {
  let error: { code?: unknown; message?: unknown };
  try {
    error = JSON.parse(utf8.decode(frame.body));
  } catch {
    return null;
  }
  if (typeof error.code !== "string" || typeof error.message !== "string") return null;
  const found = REFUSAL.exec(error.message);
  const status = found ? Number(found[1]) : STATUS_OF_CODE[error.code];
  if (status === undefined) return null; // a stream-level failure: the body's ERROR says it
  const message = found ? found[2] : error.message;
  return new Response(JSON.stringify({ error: { code: error.code, message } }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** The `RESUME` frame's JSON for the client's resume `GET` (docs/binary.md section 5). */
function resumeBody(url: URL, headers: Headers): Uint8Array {
  const id = decodeURIComponent(url.pathname.replace(/\/+$/, "").split("/").pop() ?? "");
  const after = headers.get("last-event-id") ?? url.searchParams.get("after");
  const resume: Record<string, unknown> = { request_id: id };
  if (after !== null && /^\d+$/.test(after)) resume.after = Number(after);
  const token = headers.get("tokenwire-resume-token");
  if (token !== null) resume.token = token;
  return encoder.encode(JSON.stringify(resume));
}

/** Handshake headers: the request's, less those of one request. */
const NOT_CREDENTIALS = new Set([
  "accept",
  "content-type",
  "content-length",
  "cache-control",
  "last-event-id",
  "tokenwire-resume-token",
]);

/**
 * A `fetch` that carries the client's streams over `options.transport`
 * (see the module); pass it as {@link ClientOptions.fetch}, or let
 * `new Client({transport})` make it. `close()` ends its connections.
 */
export function framesFetch(options: FramesFetchOptions): Fetch & { close(): void } {
  const fallback: Fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const maxFrameBytes = options.maxFrameBytes ?? 1 << 20;
  const sessions = new Map<string, Promise<Session>>();

  async function session(credentials: Record<string, string>): Promise<Session> {
    const key = JSON.stringify(Object.entries(credentials).sort());
    const known = sessions.get(key);
    if (known !== undefined) {
      const live = await known.catch(() => null);
      if (live?.alive) return live;
      live?.close();
    }
    const made: Promise<Session> =
      options.transport === "ws"
        ? WebSocketSession.connect(
            options.webSocket ??
              ((globalThis as { WebSocket?: WebSocketConstructor })
                .WebSocket as WebSocketConstructor),
            options.url,
            credentials,
            maxFrameBytes,
          )
        : WebTransportSession.connect(options.url, options.serverCertificateHashes, maxFrameBytes);
    sessions.set(key, made);
    return made;
  }

  const fetchFrames = async (input: string | URL, init: RequestInit = {}): Promise<Response> => {
    // A page's relative URL ("/v1/stream") is resolved against the page.
    const url = new URL(input, (globalThis as { location?: { href: string } }).location?.href);
    const method = (init.method ?? "GET").toUpperCase();
    const headers = new Headers(init.headers);
    let type: number;
    let body: Uint8Array;
    if (method === "POST" && url.pathname === options.streamPath) {
      type = FrameType.REQUEST;
      body = typeof init.body === "string" ? encoder.encode(init.body) : new Uint8Array(0);
    } else if (method === "GET" && url.pathname.startsWith(options.resumePrefix)) {
      type = FrameType.RESUME;
      body = resumeBody(url, headers);
    } else {
      return fallback(input, init);
    }
    const credentials: Record<string, string> = {};
    headers.forEach((value, name) => {
      if (!NOT_CREDENTIALS.has(name)) credentials[name] = value;
    });
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    const carrier = await (await session(credentials)).open(type, body);
    const onAbort = (): void => carrier.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    let first: Frame | null;
    try {
      first = await carrier.next();
    } catch (exc) {
      signal?.removeEventListener("abort", onAbort);
      throw exc;
    }
    const head: Record<string, string> = { "content-type": `${FRAMES_MEDIA_TYPE}; payload=json` };
    const queued: Frame[] = [];
    if (first === null) {
      signal?.removeEventListener("abort", onAbort);
      return new Response(null, { status: 204 });
    } else if (first.type === FrameType.META) {
      const token = (JSON.parse(utf8.decode(first.body)) as { resume_token?: unknown })
        .resume_token;
      if (typeof token === "string") head["tokenwire-resume-token"] = token;
    } else if (first.type === FrameType.ERROR) {
      const refused = refusal(first);
      if (refused !== null) {
        signal?.removeEventListener("abort", onAbort);
        return refused;
      }
      queued.push(first);
    } else {
      queued.push(first);
    }
    let ended = false;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const frame = queued.shift() ?? (ended ? null : await carrier.next());
          if (frame === null) {
            ended = true;
            signal?.removeEventListener("abort", onAbort);
            controller.close();
            return;
          }
          controller.enqueue(encodeFrame(frame.type, frame.body));
          if (frame.type === FrameType.ERROR) ended = true;
        } catch (exc) {
          signal?.removeEventListener("abort", onAbort);
          controller.error(signal?.aborted ? signal.reason : exc);
        }
      },
      cancel() {
        signal?.removeEventListener("abort", onAbort);
        if (!ended) carrier.cancel();
      },
    });
    return new Response(stream, { status: 200, headers: head });
  };
  return Object.assign(fetchFrames, {
    close(): void {
      for (const made of sessions.values()) made.then((s) => s.close()).catch(() => undefined);
      sessions.clear();
    },
  });
}
