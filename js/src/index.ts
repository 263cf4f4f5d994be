/**
 * tokenwire: a client for the LLM-Stream standard
 * (draft-spk-agentproto-llm-stream), for browsers and Node 18+, with no
 * runtime dependencies.
 *
 * The layers, each usable alone:
 *
 * - {@link SSEDecoder}: an exact, incremental WHATWG server-sent-events
 *   decoder working on bytes. It passes the same shared vectors as
 *   tokenwire's Python decoder.
 * - {@link FrameDecoder}: the binary binding's frames (docs/binary.md), on
 *   the same vectors as the Python decoder.
 * - {@link parseEvent}: one SSE message to one typed event envelope (§5.2).
 * - {@link Validator}: the §5 lifecycle, with the Python validator's rule
 *   codes; {@link validate} runs it over a whole body.
 * - {@link stream} / {@link open}: `fetch` + `ReadableStream`, every message
 *   with its verdict and arrival time (the playground uses these).
 * - {@link Client}: typed events with cancellation on the server, resume
 *   with `Last-Event-ID`, duplicate dropping and the §8.2 tool-call checks,
 *   over HTTP (SSE or frames), a WebSocket or WebTransport ({@link framesFetch}).
 * - `tokenwire/ai-sdk`: `createTokenwire`, a Vercel AI SDK provider.
 *
 * @module tokenwire
 */
export * from "./errors.js";
export * from "./events.js";
export * from "./sse.js";
export * from "./binary.js";
export * from "./frames.js";
export * from "./lifecycle.js";
export * from "./http.js";
export * from "./schema.js";
export * from "./client.js";
export * from "./url.js";
