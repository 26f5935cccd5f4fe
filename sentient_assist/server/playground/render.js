// How each event of a turn is shown (docs/protocol.md, "Reserved event names"). Agent text
// reaches the page only as textContent, or as Markdown through renderMarkdown (sanitised).
import { renderMarkdown, safeHref } from "./markdown.js";

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// One text stream, as the page shows it and keeps it in history: chunks that share a
// stream_id and an event name (an agent that reuses a stream_id under another name gets
// two blocks, not one block of mixed text).
export const streamKey = (event) => JSON.stringify([String(event.stream_id), String(event.event_name)]);

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isText = (value) => typeof value === "string";

// A document's children are built when it is first opened: an answer of thousands of
// documents costs one summary line each until someone looks inside.
const OPEN_ENTRIES = 12;

export function jsonTree(value, key = null, depth = 0) {
  if (value === null || typeof value !== "object") {
    const leaf = el("div", "json-leaf");
    if (key !== null) leaf.append(el("span", "json-key", key), ": ");
    const href = isText(value) ? safeHref(value) : null;
    if (href && /^https?:\/\//i.test(value)) {
      const link = el("a", "json-string", JSON.stringify(value));
      link.href = href;
      link.target = "_blank";
      link.rel = "noopener noreferrer nofollow";
      leaf.append(link);
    } else {
      leaf.append(el("span", "json-" + (value === null ? "null" : typeof value), JSON.stringify(value)));
    }
    return leaf;
  }
  const entries = Array.isArray(value) ? value.map((item, index) => [index, item]) : Object.entries(value);
  const node = el("details", "json-node");
  const summary = el("summary");
  if (key !== null) summary.append(el("span", "json-key", key), ": ");
  summary.append(el("span", "json-count", Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`));
  node.append(summary);
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    const children = el("div", "json-children");
    for (const [childKey, child] of entries) children.append(jsonTree(child, childKey, depth + 1));
    node.append(children);
  };
  node.addEventListener("toggle", () => node.open && build());
  if (depth < 3 && entries.length <= OPEN_ENTRIES) {
    build();
    node.open = true;
  }
  return node;
}

// A list of results with links, as SOURCES-style documents hold them: the first array of
// objects that carry a URL.
function linkList(content) {
  for (const value of Object.values(content)) {
    if (!Array.isArray(value)) continue;
    const items = value.filter((item) => isObject(item) && (item.url || item.link || item.href));
    if (items.length === 0) continue;
    const list = el("ol", "sources");
    for (const item of items) {
      const url = item.url || item.link || item.href;
      const title = item.title || item.name || url;
      const entry = el("li");
      const href = safeHref(url);
      if (href && /^https?:\/\//i.test(String(url))) {
        const link = el("a", null, title);
        link.href = href;
        link.target = "_blank";
        link.rel = "noopener noreferrer nofollow";
        entry.append(link);
      } else {
        entry.append(el("span", "unsafe-link", title), el("span", "muted", " (not an http link: " + url + ")"));
      }
      if (item.snippet || item.description) entry.append(el("div", "muted", item.snippet || item.description));
      list.append(entry);
    }
    return list;
  }
  return null;
}

const TOOL_CALL = (c) => isObject(c) && isText(c.id) && isText(c.name) && isObject(c.arguments);
const TOOL_RESULT = (c) => isObject(c) && isText(c.id) && isText(c.name) && "result" in c && "error" in c;
const HANDOFF = (c) => isObject(c) && isText(c.to_agent);
const STAGE = (c) => isObject(c) && isText(c.stage) && isText(c.phase);
const USAGE = (c) => isObject(c) && ["requests", "input_tokens", "output_tokens", "total_tokens"].every((k) => k in c);
const QUESTION = (c) => isObject(c) && isText(c.question);

// Streaming Markdown is rendered again as it grows, but at most this often, and less often
// when a render is slow: a 2,000-chunk answer re-renders a few times a second, not per chunk.
const MIN_RENDER_INTERVAL = 60;
const MAX_RENDER_INTERVAL = 1000;

export class TurnView {
  constructor(container, { onAnswer }) {
    this.body = el("div", "events");
    // The live region is the status line alone: a live region around the answer would read
    // the whole answer out again on every Markdown render. The events are busy while they
    // stream (their reader waits for the end); the status, outside them, is still announced.
    this.status = el("div", "turn-status");
    this.status.setAttribute("role", "status");
    this.body.setAttribute("aria-busy", "true");
    this.footer = el("div", "usage");
    this.footer.hidden = true;
    container.append(this.body, this.footer, this.status);
    this.container = container;
    this.onAnswer = onAnswer;
    this.streams = new Map(); // streamKey(event) -> text block
    this.calls = new Map(); // tool call id -> card
    this.dirty = new Set(); // text blocks to render again
    this.questions = []; // ASK_USER / INTERRUPT cards, closed once the chat moves on
    this.usage = null;
    this.count = 0;
    this.started = performance.now();
    this.setState("running", "waiting for the agent…");
  }

  setState(state, text) {
    this.container.dataset.state = state;
    this.status.textContent = text;
  }

  // One event, as it came off the wire.
  apply(event, receivedAt = performance.now()) {
    this.count += 1;
    if (this.count === 1) this.setState("running", "streaming…");
    switch (event.content_type) {
      case "chunked.text":
        return this.chunk(event, receivedAt);
      case "atomic.textblock":
        return this.textBlock(event);
      case "atomic.json":
        return this.document(event);
      case "atomic.error":
        return this.error(event);
      case "atomic.done":
        this.sawDone = true;
        return;
      default:
        return this.unknown(event);
    }
  }

  block(event, className, label = event.event_name) {
    const block = el("section", "block " + className);
    block.dataset.event = String(event.event_name);
    const header = el("header", "block-head");
    header.append(el("span", "event-name", label), el("span", "source", String(event.source ?? "")));
    block.append(header);
    this.body.append(block);
    return block;
  }

  metadata(block, event) {
    if (isObject(event.metadata) && Object.keys(event.metadata).length) {
      const tree = jsonTree(event.metadata, "metadata", 3);
      tree.classList.add("metadata");
      block.append(tree);
    }
  }

  chunk(event, receivedAt) {
    const key = streamKey(event);
    let stream = this.streams.get(key);
    if (!stream) {
      const thinking = event.event_name === "THINKING";
      let block;
      if (thinking) {
        block = el("details", "block thinking");
        block.dataset.event = "THINKING";
        block.open = true;
        const summary = el("summary", "block-head");
        summary.append(el("span", "event-name", "THINKING"), el("span", "source", String(event.source ?? "")));
        block.append(summary);
        this.body.append(block);
      } else {
        block = this.block(event, "text" + (event.event_name === "FINAL_RESPONSE" ? " answer" : ""));
      }
      const target = el("div", "markdown");
      block.append(target);
      this.metadata(block, event);
      stream = { block, target, text: "", complete: false, renderedAt: 0, cost: 0, thinking, started: receivedAt };
      block.dataset.streaming = "true";
      this.streams.set(key, stream);
    }
    if (stream.complete) return; // nothing follows a stream's last chunk (docs/protocol.md)
    stream.text += String(event.content ?? "");
    if (event.is_complete) {
      stream.complete = true;
      stream.block.dataset.streaming = "false";
      if (stream.thinking) {
        const seconds = ((receivedAt - stream.started) / 1000).toFixed(1);
        stream.block.querySelector(".event-name").textContent = `THINKING · ${seconds} s`;
        stream.block.open = false;
      }
    }
    this.dirty.add(stream);
  }

  // Renders the text blocks that changed and are due; true while some are left for later.
  renderText(now, force = false) {
    for (const stream of this.dirty) {
      const interval = Math.min(MAX_RENDER_INTERVAL, Math.max(MIN_RENDER_INTERVAL, stream.cost * 8));
      if (!force && !stream.complete && now - stream.renderedAt < interval) continue;
      const start = performance.now();
      renderMarkdown(stream.target, stream.text);
      stream.renderedAt = performance.now();
      stream.cost = stream.renderedAt - start;
      this.dirty.delete(stream);
    }
    return this.dirty.size > 0;
  }

  textBlock(event) {
    const block = this.block(event, "text");
    const target = el("div", "markdown");
    block.append(target);
    renderMarkdown(target, String(event.content ?? ""));
    this.metadata(block, event);
  }

  document(event) {
    const content = event.content;
    const name = event.event_name;
    if (name === "TOOL_CALL" && TOOL_CALL(content)) return this.toolCall(event);
    if (name === "TOOL_RESULT" && TOOL_RESULT(content)) return this.toolResult(event);
    if (name === "HANDOFF" && HANDOFF(content)) return this.handoff(event);
    if (name === "USAGE" && USAGE(content)) return this.addUsage(content);
    if (name === "STAGE" && STAGE(content)) return this.stage(event);
    if ((name === "ASK_USER" || name === "INTERRUPT") && QUESTION(content)) return this.question(event);
    const block = this.block(event, "document");
    const links = isObject(content) ? linkList(content) : null;
    if (links) {
      block.classList.add("has-links");
      block.append(links);
      const raw = jsonTree(content, "JSON", 3);
      raw.classList.add("raw");
      block.append(raw);
    } else {
      block.append(jsonTree(content, null, 0));
    }
    this.metadata(block, event);
  }

  toolCall(event) {
    const { id, name, arguments: args } = event.content;
    const card = this.block(event, "tool", "TOOL_CALL");
    card.dataset.callId = id;
    card.dataset.status = "running";
    const title = el("div", "tool-title");
    title.append(el("span", "tool-name", name), el("span", "call-id", id));
    const result = el("div", "tool-result muted", "running…");
    card.append(title, jsonTree(args, "arguments", 0), result);
    this.metadata(card, event);
    this.calls.set(id, { card, result });
  }

  toolResult(event) {
    const { id, name, result, error } = event.content;
    let call = this.calls.get(id);
    if (!call) {
      // A result for a call this turn did not show: a card of its own.
      const card = this.block(event, "tool", "TOOL_RESULT");
      card.dataset.callId = id;
      const title = el("div", "tool-title");
      title.append(el("span", "tool-name", name), el("span", "call-id", id));
      const slot = el("div", "tool-result");
      card.append(title, slot);
      call = { card, result: slot };
      this.calls.set(id, call);
    }
    const slot = el("div", "tool-result");
    if (error !== null && error !== undefined) {
      call.card.dataset.status = "error";
      slot.classList.add("failed");
      slot.append(el("span", "label", "error "), el("span", null, String(error)));
    } else {
      call.card.dataset.status = "ok";
      slot.append(jsonTree(result, "result", 0));
    }
    call.result.replaceWith(slot);
    call.result = slot;
  }

  handoff(event) {
    const { to_agent: to, argument } = event.content;
    const marker = this.block(event, "handoff", "HANDOFF");
    const line = el("div", "handoff-line");
    line.append("→ handed to ", el("strong", "to-agent", to));
    marker.append(line);
    if (argument !== undefined && argument !== null) marker.append(jsonTree(argument, "argument", 2));
  }

  stage(event) {
    const { stage, phase, outcome, reason, capability, counts } = event.content;
    const block = this.block(event, "stage", "STAGE");
    const parts = [stage, phase, outcome].filter(isText);
    if (isText(capability)) parts.push(capability);
    const line = el("div", "stage-line", parts.join(" · "));
    if (isText(reason)) line.append(el("span", "muted", ` (${reason})`));
    if (isObject(counts) && Object.keys(counts).length) {
      line.append(el("span", "muted", " " + Object.entries(counts).map(([k, v]) => `${k}: ${v}`).join(", ")));
    }
    block.append(line);
  }

  addUsage(content) {
    // USAGE events add up (0 means unreported), as the facade's AgentResult.usage does.
    const usage = this.usage || { requests: 0, input_tokens: 0, output_tokens: 0, total_tokens: 0 };
    for (const key of Object.keys(usage)) usage[key] += Number(content[key]) || 0;
    this.usage = usage;
    this.footer.hidden = false;
    // A model server that reports no usage on a stream (llama.cpp's) is not one that used none.
    const reported = usage.input_tokens || usage.output_tokens || usage.total_tokens;
    this.footer.textContent =
      `USAGE · ${usage.requests} request${usage.requests === 1 ? "" : "s"} · ` +
      (reported
        ? `${usage.input_tokens} in · ${usage.output_tokens} out · ${usage.total_tokens} tokens`
        : "tokens not reported");
  }

  question(event) {
    const content = event.content;
    const interrupt = event.event_name === "INTERRUPT";
    const card = this.block(event, "question", event.event_name);
    card.append(el("p", "question-text", content.question || (interrupt ? `Decision needed: ${content.reason}` : "")));
    if (interrupt && isObject(content.tool_call)) {
      const call = content.tool_call;
      card.append(el("div", "tool-name", call.name), jsonTree(call.arguments ?? {}, "arguments", 0));
    }
    const choices = interrupt ? ["yes", "no"] : Array.isArray(content.choices) ? content.choices.filter(isText) : [];
    const buttons = el("div", "choices");
    for (const choice of choices) {
      const button = el("button", "choice", choice);
      button.type = "button";
      button.addEventListener("click", () => this.onAnswer(choice));
      buttons.append(button);
    }
    const reply = el("form", "reply");
    const input = el("input");
    input.type = "text";
    input.placeholder = interrupt ? "or answer in your words" : "or type an answer";
    input.setAttribute("aria-label", "Answer");
    const submit = el("button", "primary", "Reply");
    submit.type = "submit";
    reply.append(input, submit);
    reply.addEventListener("submit", (e) => {
      e.preventDefault();
      if (input.value.trim()) this.onAnswer(input.value);
    });
    card.append(buttons, reply);
    if (content.resumable === false) {
      card.append(el("p", "muted", "This pause cannot be resumed: an answer starts a new turn."));
    }
    this.questions.push(card);
  }

  // The chat has moved on: a question's buttons would answer a turn that is no longer last.
  closeQuestions() {
    for (const card of this.questions) {
      card.dataset.closed = "true";
      for (const control of card.querySelectorAll("button, input")) control.disabled = true;
    }
  }

  error(event) {
    const content = isObject(event.content) ? event.content : {};
    const block = this.block(event, "error", "error");
    const line = el("div", "error-line");
    line.append(el("span", "error-code", String(content.error_code ?? "")), el("span", null, content.error_message));
    block.append(line);
    if (isObject(content.details)) block.append(jsonTree(content.details, "details", 2));
  }

  // An error of the page's own (HTTP status, a dropped connection), shown as an error event is.
  clientError(code, message, details = null) {
    this.error({ event_name: "error", source: "playground", content: { error_code: code, error_message: message, details } });
  }

  unknown(event) {
    const block = this.block(event, "document", `${event.event_name ?? "event"} (${event.content_type})`);
    block.append(jsonTree(event, null, 0));
  }

  // The response is over: render what is left, and say how it ended.
  finish(how, message) {
    this.renderText(performance.now(), true);
    this.body.setAttribute("aria-busy", "false");
    for (const stream of this.streams.values()) stream.block.dataset.streaming = "false";
    for (const { card, result } of this.calls.values()) {
      if (card.dataset.status === "running") {
        card.dataset.status = "unanswered";
        result.textContent = "no result";
      }
    }
    const seconds = ((performance.now() - this.started) / 1000).toFixed(1);
    const events = `${this.count} event${this.count === 1 ? "" : "s"}`;
    if (how === "done") this.setState("done", `done · ${events} · ${seconds} s`);
    else if (how === "stopped") this.setState("stopped", `stopped · ${events} · the agent is cancelled on the server`);
    else this.setState("failed", message || "failed");
  }
}
