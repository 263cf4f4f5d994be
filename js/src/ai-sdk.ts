/**
 * `createTokenwire`: a Vercel AI SDK provider (specification v3, the `ai`
 * 6.x line) for any standard endpoint.
 *
 * ```js
 * import { streamText } from "ai";
 * import { createTokenwire } from "tokenwire/ai-sdk";
 * const tokenwire = createTokenwire({ baseURL: "http://127.0.0.1:8080" });
 * const result = streamText({ model: tokenwire("demo"), prompt: "Hello" });
 * ```
 *
 * Both ways: the AI SDK prompt becomes a standard request envelope (§4), and
 * the standard events become AI SDK stream parts (text, reasoning blocks,
 * tool calls, usage, finish reasons). Only types are imported from
 * `@ai-sdk/provider`: the package keeps no runtime dependency.
 * @module
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
  SharedV3Warning,
} from "@ai-sdk/provider";
import { Client, type ClientOptions, type EventStream, type RequestInput } from "./client.js";
import { StreamError, TokenwireError } from "./errors.js";
import {
  EXTENSION_EVENTS,
  EXTENSIONS,
  type BlockExtension,
  type ContentDelta,
  type ContentStop,
  type ErrorEvent,
  type Event,
  type Message,
  type Part,
  type StreamStart,
  type Tool,
  type ToolCall,
  type Usage,
  type UsageExtension,
} from "./events.js";

/** Settings of {@link createTokenwire}. */
export interface TokenwireProviderSettings extends Omit<ClientOptions, "baseURL"> {
  /** The gateway, e.g. `http://127.0.0.1:8080`. */
  baseURL: string | URL;
  /**
   * Ask for reasoning blocks (`"tokenwire:reasoning": true`, docs/extensions.md);
   * they become AI SDK reasoning parts. Default true.
   */
  reasoning?: boolean;
  /** The provider name the AI SDK reports. Default `tokenwire`. */
  name?: string;
}

/**
 * Per-call options, as `providerOptions: { tokenwire: {...} }`:
 * `extensions` and `metadata` are merged into the request envelope.
 */
export interface TokenwireCallOptions {
  extensions?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  reasoning?: boolean;
}

/** The provider: call it with a model id, as `tokenwire("demo")`. */
export interface TokenwireProvider {
  (modelId: string): LanguageModelV3;
  readonly specificationVersion: "v3";
  languageModel(modelId: string): LanguageModelV3;
  embeddingModel(modelId: string): never;
  imageModel(modelId: string): never;
}

/** Create an AI SDK provider for the standard endpoint at `settings.baseURL`. */
export function createTokenwire(settings: TokenwireProviderSettings): TokenwireProvider {
  const client = new Client(settings);
  const name = settings.name ?? "tokenwire";
  const reasoning = settings.reasoning ?? true;
  const languageModel = (modelId: string): LanguageModelV3 =>
    new TokenwireLanguageModel(modelId, client, { provider: name, reasoning });
  const unsupported =
    (kind: string) =>
    (modelId: string): never => {
      throw new TokenwireError(
        `${name}: no ${kind} model ${JSON.stringify(modelId)}: the standard streams text`,
      );
    };
  const provider = (modelId: string): LanguageModelV3 => languageModel(modelId);
  return Object.assign(provider, {
    specificationVersion: "v3" as const,
    languageModel,
    embeddingModel: unsupported("embedding"),
    imageModel: unsupported("image"),
  });
}

// --- AI SDK prompt -> the request envelope (§4) ---------------------------------------

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function filePart(data: Uint8Array | string | URL, mediaType: string): Part {
  if (data instanceof URL) {
    throw new TokenwireError("§4.3.1: file parts are sent inline (base64); a URL cannot be sent");
  }
  const type = mediaType.startsWith("image/")
    ? "image"
    : mediaType.startsWith("audio/")
      ? "audio"
      : "document";
  return { type, media_type: mediaType, data: typeof data === "string" ? data : base64(data) };
}

function toolResultText(output: { type: string; value?: unknown; reason?: string }): string {
  switch (output.type) {
    case "text":
    case "error-text":
      return String(output.value);
    case "execution-denied":
      return output.reason ?? "the tool call was denied";
    case "json":
    case "error-json":
      return JSON.stringify(output.value);
    default:
      return JSON.stringify(output.value ?? null);
  }
}

/** The AI SDK prompt as the standard's messages (§4.3). */
export function toMessages(prompt: LanguageModelV3Prompt): Message[] {
  const out: Message[] = [];
  for (const message of prompt) {
    switch (message.role) {
      case "system":
        out.push({ role: "system", content: message.content });
        break;
      case "user": {
        const parts: Part[] = message.content.map((part) =>
          part.type === "text"
            ? { type: "text", text: part.text }
            : filePart(part.data, part.mediaType),
        );
        const textOnly = parts.every((p) => p.type === "text");
        out.push({
          role: "user",
          content: textOnly ? parts.map((p) => (p as { text: string }).text).join("") : parts,
        });
        break;
      }
      case "assistant": {
        let text = "";
        const calls: { id: string; name: string; arguments: string }[] = [];
        const results: Message[] = [];
        for (const part of message.content) {
          if (part.type === "text") text += part.text;
          else if (part.type === "tool-call") {
            calls.push({
              id: part.toolCallId,
              name: part.toolName,
              arguments:
                typeof part.input === "string" ? part.input : JSON.stringify(part.input ?? {}),
            });
          } else if (part.type === "tool-result") {
            results.push({
              role: "tool",
              tool_call_id: part.toolCallId,
              content: toolResultText(part.output),
            });
          }
          // Reasoning parts are not sent back: the standard has no request-side reasoning.
        }
        const msg: Message = {
          role: "assistant",
          content: text === "" && calls.length ? null : text,
        };
        if (calls.length) msg.tool_calls = calls;
        out.push(msg, ...results);
        break;
      }
      case "tool":
        for (const part of message.content) {
          if (part.type !== "tool-result") continue;
          out.push({
            role: "tool",
            tool_call_id: part.toolCallId,
            content: toolResultText(part.output),
          });
        }
        break;
    }
  }
  return out;
}

/** The standard request (§4.2) for one AI SDK call, and what could not be mapped. */
export function toRequest(
  modelId: string,
  options: LanguageModelV3CallOptions,
  { reasoning = true }: { reasoning?: boolean } = {},
): { request: RequestInput; warnings: SharedV3Warning[] } {
  const warnings: SharedV3Warning[] = [];
  const own = (options.providerOptions?.tokenwire ?? {}) as TokenwireCallOptions;
  const tools: Tool[] = [];
  for (const tool of options.tools ?? []) {
    if (tool.type !== "function") {
      warnings.push({ type: "unsupported", feature: `provider tool ${tool.name}` });
      continue;
    }
    tools.push({
      name: tool.name,
      description: tool.description ?? "",
      parameters: tool.inputSchema as Tool["parameters"],
    });
  }
  if (options.toolChoice && options.toolChoice.type !== "auto") {
    warnings.push({
      type: "unsupported",
      feature: "toolChoice",
      details: "the standard has no tool choice",
    });
  }
  for (const [key, feature] of [
    ["topK", "topK"],
    ["presencePenalty", "presencePenalty"],
    ["frequencyPenalty", "frequencyPenalty"],
    ["seed", "seed"],
  ] as const) {
    if (options[key] !== undefined) warnings.push({ type: "unsupported", feature });
  }
  if (options.responseFormat?.type === "json") {
    warnings.push({ type: "unsupported", feature: "responseFormat", details: "JSON mode" });
  }
  const parameters: NonNullable<RequestInput["parameters"]> = {};
  if (options.maxOutputTokens !== undefined) parameters.max_tokens = options.maxOutputTokens;
  if (options.temperature !== undefined) parameters.temperature = options.temperature;
  if (options.topP !== undefined) parameters.top_p = options.topP;
  if (options.stopSequences?.length) parameters.stop_sequences = options.stopSequences;
  const extensions: Record<string, unknown> = { ...(own.extensions ?? {}) };
  if ((own.reasoning ?? reasoning) && extensions[EXTENSIONS.reasoning] === undefined) {
    extensions[EXTENSIONS.reasoning] = true;
  }
  // tokenwire extensions 1.1: the AI SDK's tool approval responses are the answers
  // to the previous turn's approval requests.
  const approvals: { id: string; approve: boolean; reason?: string }[] = [];
  for (const message of options.prompt) {
    if (message.role !== "tool") continue;
    for (const part of message.content) {
      if (part.type !== "tool-approval-response") continue;
      const answer: { id: string; approve: boolean; reason?: string } = {
        id: part.approvalId,
        approve: part.approved,
      };
      if (part.reason !== undefined) answer.reason = part.reason;
      approvals.push(answer);
    }
  }
  if (approvals.length && extensions[EXTENSIONS.approvals] === undefined) {
    extensions[EXTENSIONS.approvals] = approvals;
  }
  const request: RequestInput = { model: modelId, messages: toMessages(options.prompt) };
  if (tools.length) request.tools = tools;
  if (Object.keys(parameters).length) request.parameters = parameters;
  if (own.metadata) request.metadata = { ...own.metadata };
  if (Object.keys(extensions).length) request.extensions = extensions;
  return { request, warnings };
}

// --- standard events -> AI SDK stream parts -------------------------------------------

/** §5.3.3 stop reasons as AI SDK finish reasons. */
export function finishReason(
  stopReason: string | null,
  errored = false,
): LanguageModelV3FinishReason {
  if (errored) return { unified: "error", raw: stopReason ?? "error" };
  switch (stopReason) {
    case "end_turn":
      return { unified: "stop", raw: stopReason };
    case "max_tokens":
      return { unified: "length", raw: stopReason };
    case "tool_use":
      return { unified: "tool-calls", raw: stopReason };
    case "content_filter":
      return { unified: "content-filter", raw: stopReason };
    default:
      return { unified: "other", raw: stopReason ?? undefined };
  }
}

const count = (value: unknown): number | undefined =>
  Number.isInteger(value) && (value as number) >= 0 ? (value as number) : undefined;

/** `usage`, with the prompt-cache counts of a `tokenwire.usage` extension event when sent. */
function usageOf(usage: Usage | null, cache: UsageExtension | null): LanguageModelV3Usage {
  const cacheRead = count(cache?.[EXTENSIONS.cacheReadInputTokens]);
  const cacheWrite = count(cache?.[EXTENSIONS.cacheCreationInputTokens]);
  const raw: Record<string, number> = {};
  if (usage)
    Object.assign(raw, { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens });
  if (cacheRead !== undefined) raw[EXTENSIONS.cacheReadInputTokens] = cacheRead;
  if (cacheWrite !== undefined) raw[EXTENSIONS.cacheCreationInputTokens] = cacheWrite;
  return {
    inputTokens: { total: usage?.input_tokens, noCache: undefined, cacheRead, cacheWrite },
    outputTokens: { total: usage?.output_tokens, text: undefined, reasoning: undefined },
    raw: Object.keys(raw).length ? raw : undefined,
  };
}

/**
 * Standard events to AI SDK stream parts, one event at a time: `feed(event)`
 * returns the parts it makes, `finish()` the closing ones (open blocks end,
 * then `finish` with usage and the finish reason).
 */
export class PartMapper {
  private readonly open = new Map<number, "text" | "reasoning">();
  /** 1.1: audio blocks being received, by index: their data fragments, joined at the stop. */
  private readonly audio = new Map<number, string[]>();
  private sources = 0;
  private usage: Usage | null = null;
  private cache: UsageExtension | null = null;
  private stopReason: string | null = null;
  private toolCalls = 0;
  private errored = false;
  private finished = false;

  feed(event: Event): LanguageModelV3StreamPart[] {
    const parts: LanguageModelV3StreamPart[] = [];
    switch (event.type) {
      case "stream.start": {
        const e = event as StreamStart;
        parts.push({
          type: "response-metadata",
          id: e.request_id ?? undefined,
          modelId: e.model,
          timestamp: new Date(e.created * 1000),
        });
        break;
      }
      case "content.delta": {
        const e = event as ContentDelta;
        const kind = e[EXTENSIONS.reasoning] === true ? "reasoning" : "text";
        const id = String(e.index);
        if (!this.open.has(e.index)) {
          this.open.set(e.index, kind);
          parts.push({ type: `${kind}-start`, id });
        }
        parts.push({ type: `${this.open.get(e.index)!}-delta`, id, delta: e.delta.text });
        break;
      }
      case "content.stop": {
        const e = event as ContentStop;
        parts.push(...this.end(e.index));
        this.stopReason = e.stop_reason;
        break;
      }
      case "tool.call": {
        const e = event as ToolCall;
        this.toolCalls += 1;
        parts.push(
          { type: "tool-input-start", id: e.id, toolName: e.name },
          { type: "tool-input-delta", id: e.id, delta: e.arguments },
          { type: "tool-input-end", id: e.id },
          { type: "tool-call", toolCallId: e.id, toolName: e.name, input: e.arguments },
        );
        break;
      }
      case "usage":
        this.usage = event as Usage;
        break;
      case EXTENSION_EVENTS.usage: // docs/extensions.md: prompt-cache counts
        this.cache = event as UsageExtension;
        break;
      case EXTENSION_EVENTS.block:
        parts.push(...this.block(event as BlockExtension));
        break;
      case "error": {
        const e = event as ErrorEvent;
        this.errored = true;
        parts.push({ type: "error", error: new StreamError(e.code, e.message) });
        break;
      }
      case "stream.end":
        parts.push(...this.finish());
        break;
    }
    return parts;
  }

  /**
   * tokenwire extensions 1.1 as AI SDK parts: a citation with a URL is a
   * `source`; an approval request a provider-executed `tool-call` (never run by
   * the SDK) and its `tool-approval-request`; audio output and Gemini's inline
   * data a `file`. Everything else rides on the raw events only.
   */
  private block(e: BlockExtension): LanguageModelV3StreamPart[] {
    const parts: LanguageModelV3StreamPart[] = [];
    const citation = e["tokenwire:citation"];
    if (citation !== undefined) {
      const inner = (citation.url_citation ?? citation) as Record<string, unknown>;
      const web = (inner.web ?? {}) as Record<string, unknown>;
      const url = inner.url ?? web.uri ?? inner.uri;
      if (typeof url === "string") {
        this.sources += 1;
        const title = inner.title ?? web.title;
        parts.push({
          type: "source",
          sourceType: "url",
          id: `source-${this.sources}`,
          url,
          ...(typeof title === "string" ? { title } : {}),
        });
      }
    }
    const approval = e["tokenwire:approval"];
    if (approval !== undefined && typeof approval.id === "string") {
      parts.push(
        {
          type: "tool-call",
          toolCallId: approval.id,
          toolName: approval.name,
          input: approval.arguments ?? "{}",
          providerExecuted: true,
        },
        { type: "tool-approval-request", approvalId: approval.id, toolCallId: approval.id },
      );
    }
    const audio = e["tokenwire:audio"];
    if (audio !== undefined) {
      const pieces = this.audio.get(e.index) ?? [];
      if (typeof audio.data === "string") pieces.push(audio.data);
      this.audio.set(e.index, pieces);
    }
    const raw = e["tokenwire:raw"];
    const inline = raw?.inlineData as { mimeType?: unknown; data?: unknown } | undefined;
    if (inline && typeof inline.mimeType === "string" && typeof inline.data === "string") {
      parts.push({ type: "file", mediaType: inline.mimeType, data: inline.data });
    }
    return parts;
  }

  private end(index: number): LanguageModelV3StreamPart[] {
    const pieces = this.audio.get(index);
    if (pieces !== undefined) {
      this.audio.delete(index);
      // Chat streams pcm16/wav by the request's audio.format; wav is its default container.
      if (pieces.length) return [{ type: "file", mediaType: "audio/wav", data: pieces.join("") }];
    }
    const kind = this.open.get(index);
    if (kind === undefined) return [];
    this.open.delete(index);
    return [{ type: `${kind}-end`, id: String(index) }];
  }

  /** The closing parts (once): blocks still open end, then `finish`. */
  finish(): LanguageModelV3StreamPart[] {
    if (this.finished) return [];
    this.finished = true;
    const indexes = new Set([...this.open.keys(), ...this.audio.keys()]);
    const parts = [...indexes].flatMap((i) => this.end(i));
    const reason = this.toolCalls && this.stopReason === null ? "tool_use" : this.stopReason;
    parts.push({
      type: "finish",
      usage: usageOf(this.usage, this.cache),
      finishReason: finishReason(reason, this.errored),
    });
    return parts;
  }
}

class TokenwireLanguageModel implements LanguageModelV3 {
  readonly specificationVersion = "v3" as const;
  readonly provider: string;
  readonly modelId: string;
  readonly supportedUrls: Record<string, RegExp[]> = {};
  private readonly client: Client;
  private readonly reasoning: boolean;

  constructor(
    modelId: string,
    client: Client,
    { provider, reasoning }: { provider: string; reasoning: boolean },
  ) {
    this.modelId = modelId;
    this.client = client;
    this.provider = provider;
    this.reasoning = reasoning;
  }

  private open(options: LanguageModelV3CallOptions): {
    stream: EventStream;
    warnings: SharedV3Warning[];
  } {
    const { request, warnings } = toRequest(this.modelId, options, { reasoning: this.reasoning });
    const headers = Object.fromEntries(
      Object.entries(options.headers ?? {}).filter(
        (e): e is [string, string] => e[1] !== undefined,
      ),
    );
    const stream = this.client.stream(request, { signal: options.abortSignal, headers });
    return { stream, warnings };
  }

  async doStream(options: LanguageModelV3CallOptions) {
    const { stream, warnings } = this.open(options);
    const events = stream[Symbol.asyncIterator]();
    // Connect now, so an HTTP error (415, 4xx, 5xx) rejects doStream itself.
    const first = await events.next();
    const mapper = new PartMapper();
    const raw = options.includeRawChunks === true;
    let pending: IteratorResult<Event, void> | null = first;
    const body = new ReadableStream<LanguageModelV3StreamPart>({
      start(controller) {
        controller.enqueue({ type: "stream-start", warnings });
      },
      async pull(controller) {
        try {
          // A pull that enqueues nothing is not called again: go on to the next part.
          for (;;) {
            const next = pending ?? (await events.next());
            pending = null;
            if (next.done) {
              for (const part of mapper.finish()) controller.enqueue(part);
              controller.close();
              return;
            }
            const parts = mapper.feed(next.value);
            if (raw) parts.unshift({ type: "raw", rawValue: next.value });
            for (const part of parts) controller.enqueue(part);
            if (parts.length) return;
          }
        } catch (exc) {
          controller.enqueue({ type: "error", error: exc });
          for (const part of mapper.finish()) controller.enqueue(part);
          controller.close();
        }
      },
      async cancel() {
        await events.return?.(undefined);
      },
    });
    return {
      stream: body,
      request: { body: stream.request },
      response: {
        headers: stream.headers ? Object.fromEntries(stream.headers.entries()) : undefined,
      },
    };
  }

  async doGenerate(options: LanguageModelV3CallOptions) {
    const { stream, warnings } = this.open(options);
    const mapper = new PartMapper();
    const content: LanguageModelV3Content[] = [];
    const texts = new Map<string, { type: "text" | "reasoning"; text: string }>();
    let finish: Extract<LanguageModelV3StreamPart, { type: "finish" }> | null = null;
    const take = (part: LanguageModelV3StreamPart): void => {
      if (part.type === "text-start" || part.type === "reasoning-start") {
        const item = {
          type: part.type === "text-start" ? ("text" as const) : ("reasoning" as const),
          text: "",
        };
        texts.set(part.id, item);
        content.push(item);
      } else if (part.type === "text-delta" || part.type === "reasoning-delta") {
        texts.get(part.id)!.text += part.delta;
      } else if (part.type === "tool-call") {
        content.push(part);
      } else if (part.type === "finish") {
        finish = part;
      } else if (part.type === "error") {
        throw part.error;
      }
    };
    for await (const event of stream) mapper.feed(event).forEach(take);
    mapper.finish().forEach(take);
    const done = finish as unknown as Extract<LanguageModelV3StreamPart, { type: "finish" }>;
    return {
      content,
      finishReason: done.finishReason,
      usage: done.usage,
      warnings,
      request: { body: stream.request },
      response: {
        id: stream.requestId,
        modelId: this.modelId,
        headers: stream.headers ? Object.fromEntries(stream.headers.entries()) : undefined,
      },
    };
  }
}
