/**
 * app.js: the playground UI. Chat, tools, inspector, chart and replay, on
 * top of `tokenwire.js`, the browser build of the npm package in js/.
 *
 * Model text is only ever inserted as DOM text (`textContent`, text nodes):
 * no HTML is built from strings anywhere, and the page's CSP forbids inline
 * code, so a reply containing markup is shown, never run.
 *
 * @module app
 */

import { drawChart, formatMs } from "./chart.js";
import { HTTPStatusError, isExtensionEvent, isKnown, open, stream } from "./tokenwire.js";

const $ = (id) => document.getElementById(id);

/**
 * Build an element: `h("li", {class: "row"}, "text", child)`. Strings become
 * text nodes, never markup.
 */
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

const EXAMPLE_TOOLS = [
  {
    name: "get_weather",
    description: "Get current weather for a city.",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "City name, e.g. Vienna" },
        units: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
];

const STORE_KEY = "tokenwire.playground.settings";
const SETTINGS = ["system", "tools", "max-tokens", "temperature", "delay"];

const state = {
  /** The conversation so far, as standard messages (the system prompt is added per request). */
  messages: [],
  /** The AbortController of the stream in flight. */
  controller: null,
  /** Tool calls of the last turn waiting for results: {calls, results: Map}. */
  pending: null,
  /** The current run, for the stats and the chart. */
  run: null,
  redraw: 0,
};

// ---------------------------------------------------------------------------
// Settings and the request
// ---------------------------------------------------------------------------

function loadSettings() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(STORE_KEY) ?? "{}") ?? {};
  } catch {
    saved = {};
  }
  for (const id of SETTINGS) if (typeof saved[id] === "string") $(id).value = saved[id];
  if (typeof saved.model === "string") state.savedModel = saved.model;
  if (saved.settingsOpen) $("settings").open = true;
}

function saveSettings() {
  const saved = { model: $("model").value, settingsOpen: $("settings").open };
  for (const id of SETTINGS) saved[id] = $(id).value;
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify(saved));
  } catch {
    // storage may be unavailable (private mode); settings are then per page load
  }
  summarizeSettings();
}

/** The declared tools, or throws an Error saying what is wrong with the JSON. */
function readTools() {
  const text = $("tools").value.trim();
  if (!text) return [];
  let tools;
  try {
    tools = JSON.parse(text);
  } catch (exc) {
    throw new Error(`Tools: not valid JSON (${exc.message})`);
  }
  if (!Array.isArray(tools)) tools = [tools];
  tools.forEach((tool, i) => {
    if (typeof tool !== "object" || tool === null) throw new Error(`Tools[${i}]: not an object`);
    for (const key of ["name", "description"]) {
      if (typeof tool[key] !== "string" || !tool[key])
        throw new Error(`Tools[${i}].${key}: a string is required (§4.4)`);
    }
    if (typeof tool.parameters !== "object" || tool.parameters === null) {
      throw new Error(`Tools[${i}].parameters: a JSON Schema object is required (§4.4)`);
    }
  });
  return tools;
}

function checkTools() {
  const status = $("tools-status");
  try {
    const tools = readTools();
    status.textContent = tools.length
      ? `${tools.length} tool${tools.length > 1 ? "s" : ""}: ${tools.map((t) => t.name).join(", ")}`
      : "";
    status.className = "field-status ok";
    return true;
  } catch (exc) {
    status.textContent = exc.message;
    status.className = "field-status bad";
    return false;
  }
}

function summarizeSettings() {
  const parts = [];
  if ($("system").value.trim()) parts.push("system");
  try {
    const n = readTools().length;
    if (n) parts.push(`${n} tool${n > 1 ? "s" : ""}`);
  } catch {
    parts.push("tools: invalid JSON");
  }
  if ($("max-tokens").value) parts.push(`max_tokens ${$("max-tokens").value}`);
  if ($("temperature").value) parts.push(`temperature ${$("temperature").value}`);
  if (Number($("delay").value) > 0) parts.push(`pace ${$("delay").value} ms`);
  $("settings-summary").textContent = parts.join(" · ");
}

function requestId() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The §4.2 request envelope for the conversation so far. */
function buildRequest() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...state.messages);
  const request = { version: "1.0", stream: true, model: $("model").value || "demo", messages };
  const tools = readTools();
  if (tools.length) request.tools = tools;
  const parameters = {};
  const maxTokens = $("max-tokens").value;
  if (maxTokens) parameters.max_tokens = Number(maxTokens);
  const temperature = $("temperature").value;
  if (temperature) parameters.temperature = Number(temperature);
  if (Object.keys(parameters).length) request.parameters = parameters;
  // §4.6: a request_id to correlate with the gateway's logs; it is echoed back.
  request.metadata = { request_id: requestId() };
  const delay = Number($("delay").value);
  if (delay > 0) request.extensions = { "tokenwire:demo": { delay_ms: delay } };
  return request;
}

// ---------------------------------------------------------------------------
// Transcript
// ---------------------------------------------------------------------------

function transcript() {
  $("intro")?.remove();
  return $("transcript");
}

function scrollTranscript() {
  const box = $("transcript");
  box.scrollTop = box.scrollHeight;
}

function addUserBubble(text) {
  transcript().append(
    h(
      "div",
      { class: "msg user" },
      h("div", { class: "who" }, "you"),
      h("div", { class: "text" }, text),
    ),
  );
  scrollTranscript();
}

/**
 * A new assistant bubble; its text element becomes `#output` (the previous
 * one gives the id up).
 */
function addAssistantBubble(label) {
  $("output")?.removeAttribute("id");
  const text = h("div", { class: "text", id: "output" });
  const bubble = h(
    "div",
    { class: "msg assistant streaming" },
    h("div", { class: "who" }, label),
    h("div", { class: "reasoning", hidden: true }),
    text,
    h("div", { class: "tools" }),
    h("div", { class: "notes" }),
  );
  transcript().append(bubble);
  scrollTranscript();
  return { bubble, text, textNode: null };
}

function appendText(view, delta) {
  if (!view.textNode) {
    view.textNode = document.createTextNode("");
    view.text.append(view.textNode);
  }
  view.textNode.appendData(delta);
}

function appendReasoning(view, delta) {
  const box = view.bubble.querySelector(".reasoning");
  box.hidden = false;
  if (!box.firstChild)
    box.append(h("div", { class: "reasoning-label" }, "reasoning"), document.createTextNode(""));
  box.lastChild.appendData(delta);
}

function addNote(view, kind, ...content) {
  view.bubble.querySelector(".notes").append(h("div", { class: `note ${kind}` }, ...content));
  scrollTranscript();
}

function prettyJSON(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * JSON as DOM nodes with a class per token kind (keys, strings, numbers,
 * literals), on one line or indented. Every string becomes a text node.
 */
function jsonNodes(value, indent = null) {
  const out = [];
  const pad = (depth) => (indent === null ? "" : `\n${" ".repeat(indent * depth)}`);
  const walk = (v, depth) => {
    if (v === null || typeof v === "boolean") out.push(h("span", { class: "j-lit" }, String(v)));
    else if (typeof v === "number") out.push(h("span", { class: "j-num" }, String(v)));
    else if (typeof v === "string") out.push(h("span", { class: "j-str" }, JSON.stringify(v)));
    else {
      const array = Array.isArray(v);
      const keys = array ? v.map((_, i) => i) : Object.keys(v);
      if (!keys.length) {
        out.push(array ? "[]" : "{}");
        return;
      }
      out.push(array ? "[" : "{");
      keys.forEach((key, i) => {
        out.push(pad(depth + 1));
        if (!array)
          out.push(
            h("span", { class: "j-key" }, JSON.stringify(key)),
            indent === null ? ":" : ": ",
          );
        walk(v[key], depth + 1);
        if (i < keys.length - 1) out.push(indent === null ? "," : ",");
      });
      out.push(pad(depth), array ? "]" : "}");
    }
  };
  walk(value, 0);
  return out;
}

// seq and type have their own columns: the collapsed row shows the rest of the envelope.
const SHOWN_IN_COLUMNS = new Set(["v", "seq", "type"]);

function envelopeNodes(data, open) {
  let value;
  try {
    value = JSON.parse(data);
  } catch {
    return [data]; // not JSON: shown exactly as it came
  }
  if (open || value === null || typeof value !== "object" || Array.isArray(value)) {
    return jsonNodes(value, open ? 2 : null);
  }
  const rest = Object.fromEntries(Object.entries(value).filter(([k]) => !SHOWN_IN_COLUMNS.has(k)));
  return jsonNodes(rest);
}

/** §4.8: a tool call as a card, with a field for its result (live runs only). */
function addToolCard(view, call, { declared, live }) {
  const card = h(
    "div",
    { class: "tool-card", dataset: { callId: call.id } },
    h(
      "div",
      { class: "tool-head" },
      h("span", { class: "tool-badge" }, "tool call"),
      h("span", { class: "tool-name" }, call.name),
      h("span", { class: "tool-id" }, call.id),
    ),
    h("pre", { class: "tool-args" }, prettyJSON(call.arguments)),
  );
  if (!declared) {
    // §8.2: a call of a tool the request never declared is suspect.
    card.classList.add("undeclared");
    card.append(
      h("div", { class: "tool-warn" }, "This tool was not declared in the request (§8.2)."),
    );
  }
  if (live) {
    const result = h("textarea", {
      class: "tool-result",
      rows: 2,
      placeholder: `Result of ${call.name}, e.g. "Vienna: 24C, sunny"`,
      "aria-label": `Result of ${call.name}`,
    });
    const send = h(
      "button",
      { type: "button", class: "button primary small tool-send" },
      "Send result",
    );
    send.addEventListener("click", () => submitToolResult(call.id, result.value, card));
    result.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        send.click();
      }
    });
    card.append(h("div", { class: "tool-reply" }, result, send));
  }
  view.bubble.querySelector(".tools").append(card);
  scrollTranscript();
}

function submitToolResult(id, value, card) {
  const pending = state.pending;
  if (!pending || state.controller) return;
  pending.results.set(id, value);
  card.classList.add("answered");
  card
    .querySelector(".tool-reply")
    ?.replaceChildren(
      h(
        "div",
        { class: "tool-answer" },
        h("span", { class: "tool-badge result" }, "result"),
        h("span", {}, value),
      ),
    );
  if (pending.results.size < pending.calls.length) return;
  // §4.8 step 4: the history, the assistant's tool calls, then one tool message per call.
  for (const call of pending.calls) {
    state.messages.push({
      role: "tool",
      tool_call_id: call.id,
      content: pending.results.get(call.id),
    });
  }
  state.pending = null;
  runLive();
}

// ---------------------------------------------------------------------------
// Inspector, stats and chart
// ---------------------------------------------------------------------------

// tokenwire's extension events (tokenwire.block / .usage / .stop, docs/extensions.md)
// are metadata next to the standard events: shown as such, never as a fault.
const EXTENSION_TITLE =
  "tokenwire extension event (docs/extensions.md): vendor metadata next to the standard events";

function typeClass(event, type) {
  if (isKnown(type)) return `t-${type.replace(".", "-")}`;
  return event && isExtensionEvent(event) ? "t-extension" : "t-unknown";
}

function resetInspector() {
  $("events").replaceChildren();
  const verdict = $("verdict");
  verdict.hidden = true;
  verdict.dataset.verdict = "none";
  verdict.replaceChildren();
  for (const id of ["ttft", "token-count", "event-count", "duration", "rate"])
    $(id).textContent = "–";
}

function addGapRow(gap) {
  const first = gap.expected;
  const last = gap.got - 1;
  const range = first === last ? `seq ${first}` : `seq ${first}–${last}`;
  appendRow(
    h(
      "li",
      { class: "row gap" },
      h("span", { class: "seq" }, "⋯"),
      h("span", { class: "type" }, "gap"),
      h("span", { class: "time" }, ""),
      h(
        "span",
        { class: "json" },
        `${range} never arrived: ${gap.lost} event${gap.lost > 1 ? "s" : ""} lost (§5.2.1)`,
      ),
    ),
  );
}

function addEventRow(item) {
  if (item.gap) addGapRow(item.gap);
  const { event, message, error } = item;
  const type = event ? event.type : message.event;
  const seq = event ? event.seq : (error?.seq ?? message.id ?? "?");
  const extension = Boolean(event) && isExtensionEvent(event);
  const row = h(
    "li",
    { class: `row ${typeClass(event, type)}`, tabindex: 0, dataset: { seq: String(seq), type } },
    h("span", { class: "seq" }, String(seq)),
    h("span", extension ? { class: "type", title: EXTENSION_TITLE } : { class: "type" }, type),
    h("span", { class: "time" }, `+${formatMs(item.time)}`),
    h("code", { class: "json" }, ...envelopeNodes(message.data, false)),
  );
  const issues = [...item.violations];
  if (issues.length) {
    row.classList.add(issues.some((v) => v.level === "must") ? "bad" : "warn");
    row.append(
      h(
        "div",
        { class: "issues" },
        ...issues.map((v) =>
          h(
            "div",
            { class: `issue ${v.level}` },
            h("b", {}, v.rule),
            ` §${v.section} — ${v.message}`,
          ),
        ),
      ),
    );
  }
  row.addEventListener("click", () => toggleRow(row, message.data));
  row.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      toggleRow(row, message.data);
    }
  });
  appendRow(row);
}

function toggleRow(row, data) {
  const open = row.classList.toggle("open");
  row.querySelector(".json").replaceChildren(...envelopeNodes(data, open));
}

function appendRow(row) {
  const list = $("events");
  list.append(row);
  if ($("follow").checked) list.scrollTop = list.scrollHeight;
}

function startRun() {
  resetInspector();
  state.run = {
    started: performance.now(),
    points: [],
    tokens: 0,
    events: 0,
    ttft: null,
    end: null,
    usage: null,
  };
  scheduleRedraw();
}

function trackItem(item) {
  const run = state.run;
  run.events += 1;
  const ev = item.event;
  if (ev?.type === "content.delta" || ev?.type === "tool.call") {
    if (run.ttft === null) run.ttft = item.time;
    run.tokens += 1;
    run.points.push([item.time, run.tokens]);
  }
  if (ev?.type === "usage") run.usage = ev;
  run.last = item.time;
  scheduleRedraw();
}

function scheduleRedraw() {
  if (state.redraw) return;
  state.redraw = requestAnimationFrame(() => {
    state.redraw = 0;
    renderStats();
  });
}

function renderStats() {
  const run = state.run;
  if (!run) {
    drawChart($("chart"), { points: [], ttft: null, end: null });
    return;
  }
  const elapsed = run.end ?? run.last ?? 0;
  $("ttft").textContent = run.ttft === null ? "–" : formatMs(run.ttft);
  $("token-count").textContent = run.usage
    ? `${run.tokens} · usage ${run.usage.output_tokens}`
    : String(run.tokens);
  $("event-count").textContent = String(run.events);
  $("duration").textContent = run.events ? formatMs(elapsed) : "–";
  const span = run.points.length > 1 ? run.points[run.points.length - 1][0] - run.points[0][0] : 0;
  $("rate").textContent = span > 0 ? ((run.points.length - 1) / (span / 1000)).toFixed(1) : "–";
  drawChart($("chart"), { points: run.points, ttft: run.ttft, end: run.end });
}

function showVerdict(response, { aborted }) {
  const verdict = $("verdict");
  verdict.hidden = false;
  if (aborted) {
    verdict.dataset.verdict = "aborted";
    verdict.replaceChildren(
      h(
        "div",
        { class: "verdict-head" },
        h("span", { class: "icon" }, "■"),
        h("strong", {}, "Stopped"),
        h(
          "span",
          { class: "dim" },
          ` · aborted by you after ${response?.validator.events ?? 0} events; not judged`,
        ),
      ),
    );
    return;
  }
  const report = response.report;
  const errors = report.errors;
  const warnings = report.warnings;
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  verdict.dataset.verdict = report.ok ? "conformant" : "violations";
  const warned = warnings.length ? plural(warnings.length, "warning") : "";
  const detail = report.ok
    ? ` · ${plural(report.events, "event")} · ${warned || "no violations"}`
    : ` · ${plural(errors.length, "violation")}${warned ? `, ${warned}` : ""}`;
  const head = h(
    "div",
    { class: "verdict-head" },
    h("span", { class: "icon" }, report.ok ? "✓" : "✕"),
    h("strong", {}, report.ok ? "Conformant" : "Not conformant"),
    h("span", { class: "dim" }, detail),
  );
  const list = h(
    "ul",
    { class: "violations" },
    ...report.violations.map((v) =>
      h(
        "li",
        { class: v.level },
        h("code", {}, v.rule),
        h(
          "span",
          { class: "where" },
          ` §${v.section} ${v.level.toUpperCase()}${v.seq === null ? "" : ` · seq ${v.seq}`}`,
        ),
        h("span", { class: "msg-text" }, ` — ${v.message}`),
      ),
    ),
  );
  verdict.replaceChildren(head, ...(report.violations.length ? [list] : []));
}

// ---------------------------------------------------------------------------
// Running a stream (live or replayed)
// ---------------------------------------------------------------------------

function setBusy(busy, label = busy ? "streaming…" : "ready") {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("capture").disabled = busy;
  const status = $("status");
  status.textContent = label;
  status.dataset.state = busy ? "busy" : "idle";
}

/**
 * Read one standard response into the page: transcript, inspector, chart,
 * verdict. Returns what the turn produced: {text, calls, aborted}.
 */
async function consume(open_, view, { live, request }) {
  const declared = new Set((request?.tools ?? []).map((t) => t.name));
  const calls = [];
  let response = null;
  let aborted = false;
  try {
    response = await open_();
    for await (const item of response) {
      addEventRow(item);
      trackItem(item);
      const ev = item.event;
      if (!ev) continue;
      if (ev.type === "content.delta") {
        if (ev["tokenwire:reasoning"]) appendReasoning(view, ev.delta.text);
        else appendText(view, ev.delta.text);
      } else if (ev.type === "tool.call") {
        calls.push({ id: ev.id, name: ev.name, arguments: ev.arguments });
        addToolCard(view, ev, { declared: !request || declared.has(ev.name), live });
      } else if (ev.type === "error") {
        addNote(view, "error", h("b", {}, ev.code), `: ${ev.message}`);
      } else if (
        ev.type === "content.stop" &&
        ev.stop_reason !== "end_turn" &&
        ev.stop_reason !== "tool_use"
      ) {
        addNote(view, "info", `stopped: ${ev.stop_reason}`);
      }
    }
  } catch (exc) {
    if (exc?.name === "AbortError") {
      aborted = true;
      addNote(view, "info", "Stopped: the request was aborted.");
    } else if (exc instanceof HTTPStatusError) {
      const path = exc.body?.error?.path;
      addNote(
        view,
        "error",
        h("b", {}, `HTTP ${exc.status}`),
        ` ${exc.code ?? ""}: ${exc.body?.error?.message ?? exc.message}`,
        path ? ` (at ${path})` : "",
      );
      return { failed: true, text: "", calls: [], aborted: false };
    } else {
      addNote(view, "error", h("b", {}, "Connection failed"), `: ${exc?.message ?? exc}`);
      return { failed: true, text: "", calls: [], aborted: false };
    }
  } finally {
    view.bubble.classList.remove("streaming");
    if (state.run) {
      // The duration runs to the last event (stream.end), or to the stop.
      const now = performance.now() - state.run.started;
      state.run.end = aborted || state.run.last === undefined ? now : state.run.last;
      renderStats();
    }
  }
  if (response) showVerdict(response, { aborted });
  return { failed: false, text: response?.text ?? "", calls, aborted };
}

async function runLive() {
  let request;
  try {
    request = buildRequest();
  } catch (exc) {
    $("settings").open = true;
    checkTools();
    transcript().append(h("div", { class: "msg system-note bad" }, exc.message));
    return;
  }
  const view = addAssistantBubble(request.model);
  startRun();
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  let outcome;
  try {
    outcome = await consume(
      () => stream("/v1/stream", request, { signal: controller.signal }),
      view,
      {
        live: true,
        request,
      },
    );
  } finally {
    state.controller = null;
    setBusy(false, outcome?.aborted ? "stopped" : outcome?.failed ? "error" : "ready");
  }
  if (outcome.failed) {
    // The turn never happened: take the user's message back out of the history.
    if (state.messages.at(-1)?.role === "user") state.messages.pop();
    return;
  }
  if (outcome.text || outcome.calls.length) {
    const message = { role: "assistant", content: outcome.text || null };
    if (outcome.calls.length) message.tool_calls = outcome.calls;
    if (message.content === null && !message.tool_calls) message.content = "";
    state.messages.push(message);
  }
  if (outcome.calls.length && !outcome.aborted) {
    state.pending = { calls: outcome.calls, results: new Map() };
    view.bubble.querySelector(".tool-result")?.focus();
  }
}

function sendPrompt() {
  const prompt = $("prompt");
  const text = prompt.value.trim();
  if (!text || state.controller) return;
  if (!checkTools()) {
    $("settings").open = true;
    return;
  }
  if (state.pending) {
    // A new question instead of tool results: the unanswered calls get an empty result,
    // so the history stays a valid §4.8 sequence.
    for (const call of state.pending.calls) {
      if (!state.pending.results.has(call.id)) state.pending.results.set(call.id, "");
    }
    for (const call of state.pending.calls) {
      state.messages.push({
        role: "tool",
        tool_call_id: call.id,
        content: state.pending.results.get(call.id),
      });
    }
    for (const reply of document.querySelectorAll(".tool-card:not(.answered) .tool-reply"))
      reply.remove();
    state.pending = null;
  }
  prompt.value = "";
  state.messages.push({ role: "user", content: text });
  addUserBubble(text);
  runLive();
}

function stop() {
  state.controller?.abort();
}

function resetChat() {
  stop();
  state.messages = [];
  state.pending = null;
  state.run = null;
  $("output")?.removeAttribute("id");
  $("transcript").replaceChildren();
  resetInspector();
  renderStats();
  $("prompt").focus();
}

// ---------------------------------------------------------------------------
// Replay of a captured body
// ---------------------------------------------------------------------------

/** A best guess at a capture's format from its first bytes; null when it is none of them. */
function sniffFormat(text) {
  const head = text.slice(0, 65536);
  if (/event:\s*stream\.start|"type"\s*:\s*"stream\.start"/.test(head)) return "standard";
  if (/event:\s*(message_start|content_block_)|"type"\s*:\s*"message_start"/.test(head))
    return "anthropic";
  if (/event:\s*response\.|"type"\s*:\s*"response\./.test(head)) return "openai-responses";
  if (/"type"\s*:\s*"(message-start|content-delta|stream-start)"/.test(head)) return "cohere";
  if (/"candidates"\s*:/.test(head)) return "gemini";
  if (/"choices"\s*:|chat\.completion\.chunk/.test(head)) return "openai";
  return null;
}

/** The formats the capture list offers, for the "not recognised" note. */
function captureFormats() {
  return [...$("capture-format").options].map((o) => o.value).filter((v) => v !== "auto");
}

async function replay(file) {
  if (state.controller) return;
  const bytes = await file.arrayBuffer();
  let format = $("capture-format").value;
  if (format === "auto") format = sniffFormat(new TextDecoder().decode(bytes.slice(0, 65536)));
  if (format === null) {
    // Replaying it as a standard stream would show an empty answer, not what is wrong.
    const view = addAssistantBubble(`replay · ${file.name}`);
    view.bubble.classList.add("replay");
    view.bubble.classList.remove("streaming");
    addNote(
      view,
      "error",
      h("b", {}, "format not recognised"),
      `: ${file.name} is no standard stream and no capture of ${captureFormats().join(", ")}` +
        "; pick its format in the list next to the button if you know it",
    );
    return;
  }
  const view = addAssistantBubble(`replay · ${file.name} · ${format}`);
  view.bubble.classList.add("replay");
  startRun();
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true, "replaying…");
  let outcome;
  try {
    const query = new URLSearchParams({ from: format, model: `replay:${format}` });
    const url = `/v1/convert?${query}`;
    outcome = await consume(
      async () => {
        const started = performance.now();
        const response = await fetch(url, {
          method: "POST",
          body: bytes,
          headers: { "Content-Type": "application/octet-stream" },
          signal: controller.signal,
        });
        return open(response, { started });
      },
      view,
      { live: false, request: null },
    );
  } finally {
    state.controller = null;
    setBusy(false, outcome?.failed ? "error" : "ready");
  }
}

// ---------------------------------------------------------------------------
// Start-up
// ---------------------------------------------------------------------------

async function loadModels() {
  const select = $("model");
  let names = [];
  try {
    const response = await fetch("/v1/models", { headers: { Accept: "application/json" } });
    if (response.ok) names = (await response.json()).data.map((m) => m.id);
  } catch {
    // offline or not a gateway: fall back to the built-in model
  }
  if (!names.length) names = ["demo"];
  select.replaceChildren(...names.map((name) => h("option", { value: name }, name)));
  if (state.savedModel && names.includes(state.savedModel)) select.value = state.savedModel;
  document.body.dataset.ready = "true";
}

function wire() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    sendPrompt();
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      sendPrompt();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") stop();
  });
  $("stop").addEventListener("click", stop);
  $("reset").addEventListener("click", resetChat);
  $("tools-example").addEventListener("click", () => {
    $("tools").value = JSON.stringify(EXAMPLE_TOOLS, null, 2);
    checkTools();
    saveSettings();
  });
  $("tools").addEventListener("input", checkTools);
  for (const id of [...SETTINGS, "model"]) $(id).addEventListener("change", saveSettings);
  $("settings").addEventListener("toggle", saveSettings);
  $("capture").addEventListener("change", (event) => {
    const file = event.target.files?.[0];
    event.target.value = ""; // the same file can be loaded again
    if (file) replay(file);
  });
  new ResizeObserver(() => renderStats()).observe($("chart"));
}

loadSettings();
wire();
checkTools();
summarizeSettings();
renderStats();
loadModels();
