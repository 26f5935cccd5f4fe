// The playground: a chat with the service's agent over POST /assist, as Sentient Chat talks
// to it. The service keeps no conversation, so the page does: every request carries the chat
// so far as session.interactions, and a fresh query ULID. See docs/playground.md.
import { EventSourceParserStream } from "./vendor/eventsource-parser/stream.js";
import { TurnView, el, streamKey } from "./render.js";
import { ulid } from "./ulid.js";

// Relative to the page, so that a service mounted under a prefix works as it is.
const ASSIST_URL = new URL("../assist", document.baseURI);
const CONFIG_URL = new URL("config.json", document.baseURI);
// A resumable run (the service's ASSIST_DETACH_GRACE; docs/resumable.md) is named by the
// response's Assist-Run header: a stream cut before `done` is resumed there, from the last
// event read, and Stop stops the run there too.
const RUN_HEADER = "Assist-Run";
const RESUME_ATTEMPTS = 5; // in a row without an event between
const RESUME_BACKOFF_MS = [100, 250, 500, 1000, 2000];
function runUrl(handle) {
  return new URL(`../assist/runs/${encodeURIComponent(handle)}`, document.baseURI);
}
// The key lives as long as the tab: typed once, not kept on the disk. Whatever the key field
// holds when a message is sent is the key it is sent with (and kept): "Use key" only checks
// a key before sending anything.
const KEY_STORAGE = "assist-playground-key";
// What a key can be: an HTTP header carries Latin-1 only, and fetch() throws on anything else
// (which would look like a connection failure); keys are ASCII in practice.
const KEY_CHARACTERS = /^[\x20-\x7e]*$/;
const NOT_A_KEY = "A key is ASCII (letters, digits and symbols): this one has other characters.";

const $ = (id) => document.getElementById(id);
const ui = {
  transcript: $("transcript"),
  empty: $("empty"),
  composer: $("composer"),
  prompt: $("prompt"),
  send: $("send"),
  stop: $("stop"),
  newChat: $("new-chat"),
  keyToggle: $("key-toggle"),
  keyPanel: $("key-panel"),
  key: $("api-key"),
  keyStatus: $("key-status"),
  agentName: $("agent-name"),
  agentDescription: $("agent-description"),
};

const state = {
  chatId: ulid(),
  processorId: null, // the agent's name: every event's source, and the session's processor_id
  turns: [],
  running: null, // {turn, controller} while a response streams
  key: storedKey(),
};

function storedKey() {
  const key = sessionStorage.getItem(KEY_STORAGE) || "";
  return KEY_CHARACTERS.test(key) ? key : "";
}

// One exchange: the prompt, and the events that answered it as history keeps them.
class Turn {
  constructor(prompt) {
    this.queryId = ulid();
    this.prompt = prompt;
    this.events = [];
    this.streams = new Map(); // streamKey(event) -> the merged chunk, or COMPLETE
    this.source = null;
    this.received = 0; // events read, over every response of the turn (a resumed one too)
    this.lastEventId = null; // the id of the last, where a resume reads on from
    this.resumed = 0; // how many times the stream was resumed
  }

  // A text stream's chunks are kept as one chunk (then its last one): the agent reads the same
  // text from them (docs/protocol.md, "A turn of history"), and a long answer's history is a
  // few events, not thousands, so the chat stays under the service's body limit for longer.
  // A stream is what the view shows as one block: its stream_id and event name, closed by its
  // last chunk. What the view drops (a chunk after that) history drops too: the agent reads
  // back what the person saw.
  record(event) {
    if (isText(event.source)) {
      // The agent's own name is done's source; before done, the first source is the best guess.
      if (event.content_type === "atomic.done") this.source = event.source;
      else this.source ??= event.source;
    }
    if (event.content_type !== "chunked.text") {
      this.events.push(event);
      return;
    }
    const key = streamKey(event);
    const merged = this.streams.get(key);
    if (merged === COMPLETE) return;
    if (event.is_complete) {
      this.streams.set(key, COMPLETE);
      this.events.push(event);
    } else if (merged) {
      merged.content += event.content;
    } else {
      const first = { ...event };
      this.streams.set(key, first);
      this.events.push(first);
    }
  }

  interaction() {
    return {
      request: {
        event: {
          id: this.queryId,
          chatId: state.chatId,
          content: { capability: "assist", request_payload: { parts: [{ prompt: this.prompt, fileIds: [] }] } },
        },
      },
      responses: this.events.map((event) => ({ event })),
    };
  }
}

const isText = (value) => typeof value === "string";
const COMPLETE = Symbol("complete");

// Rendering happens once per animation frame, for every event that came since the last: a
// fast answer of thousands of events costs a frame's work per frame, not a layout per event.
let queue = [];
let frameRequested = false;
const viewsWithText = new Set();

function later(view, work) {
  queue.push(work);
  viewsWithText.add(view);
  requestFrame();
}

function requestFrame() {
  if (!frameRequested) {
    frameRequested = true;
    requestAnimationFrame(renderFrame);
  }
}

function renderFrame() {
  frameRequested = false;
  const stick = nearBottom();
  const work = queue;
  queue = [];
  for (const step of work) step();
  const now = performance.now();
  for (const view of viewsWithText) if (!view.renderText(now)) viewsWithText.delete(view);
  if (stick) ui.transcript.scrollTop = ui.transcript.scrollHeight;
  if (viewsWithText.size) requestFrame(); // text left to render once its interval is up
}

function nearBottom() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
}

function scrollToBottom() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

function authHeaders() {
  return state.key ? { Authorization: `Bearer ${state.key}` } : {};
}

function session(history) {
  const processorId = state.processorId ?? history.findLast((turn) => turn.source)?.source;
  if (!processorId) return undefined; // the service makes one (processor_id: the agent's name)
  return {
    processor_id: processorId,
    activity_id: state.chatId,
    request_id: ulid(),
    interactions: history.map((turn) => turn.interaction()),
  };
}

// Whether a message can be sent: with the key field's key, taken now if it was changed. A key
// fetch() could not send is said so in the key's status, and nothing is sent.
function ready() {
  if (state.running) return false;
  const key = ui.key.value.trim();
  if (key === state.key) return true;
  if (!KEY_CHARACTERS.test(key)) {
    showKeyPanel(NOT_A_KEY);
    return false;
  }
  keepKey(key);
  ui.keyStatus.textContent = "";
  void loadConfig(); // the key's status and the agent's name, for this key
  return true;
}

async function send(prompt) {
  if (!prompt.trim() || !ready()) return;
  // Only turns the agent answered are history; a refused request (401, 422, ...) is not.
  const history = state.turns.filter((turn) => turn.events.length > 0);
  const turn = new Turn(prompt);
  turn.view = addTurn(turn);
  state.turns.push(turn);
  const body = { query: { id: turn.queryId, prompt } };
  const chat = session(history);
  if (chat) body.session = chat;

  const controller = new AbortController();
  state.running = { turn, controller, run: null };
  setRunning(true);
  let how = "done";
  let message = "";
  try {
    let response = await fetch(ASSIST_URL, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
      body: JSON.stringify(body),
      signal: controller.signal,
      cache: "no-store",
    });
    if (!response.ok) {
      how = "failed";
      message = await refused(turn, response);
      return;
    }
    const run = response.headers.get(RUN_HEADER);
    state.running.run = run;
    let failures = 0;
    for (;;) {
      const before = turn.received;
      let cut = null;
      try {
        await readFrames(turn, response);
      } catch (error) {
        if (controller.signal.aborted) throw error;
        cut = error;
      }
      if (turn.sawDone) break;
      if (turn.received > before) failures = 0;
      if (!run || failures >= RESUME_ATTEMPTS) {
        if (cut) throw cut;
        break;
      }
      // Cut before done: the run goes on at the service; read on from the last event we have.
      await new Promise((resolve) => setTimeout(resolve, RESUME_BACKOFF_MS[failures]));
      failures += 1;
      const last = turn.lastEventId;
      try {
        response = await fetch(runUrl(run), {
          headers: { Accept: "text/event-stream", ...authHeaders(), ...(last ? { "Last-Event-ID": last } : {}) },
          signal: controller.signal,
          cache: "no-store",
        });
      } catch (error) {
        if (controller.signal.aborted) throw error;
        continue; // the network is still down: the next attempt, a little later
      }
      if (!response.ok) {
        how = "failed";
        message = await refused(turn, response);
        return;
      }
      turn.resumed += 1;
      const item = ui.transcript.querySelector(`[data-query-id="${turn.queryId}"]`);
      if (item) item.dataset.resumed = String(turn.resumed);
    }
    if (!turn.sawDone) {
      how = "failed";
      message = "the connection closed before done";
      later(turn.view, () => turn.view.clientError("connection", "The response ended without its done event."));
    }
  } catch (error) {
    if (controller.signal.aborted) {
      how = "stopped";
    } else {
      how = "failed";
      message = "the connection failed";
      const text = `The connection to the service failed: ${error?.message || error}`;
      later(turn.view, () => turn.view.clientError("connection", text));
    }
  } finally {
    state.running = null;
    setRunning(false);
    later(turn.view, () => turn.view.finish(how, message));
    // Give the prompt back, so that sending again is one keypress (unless another is typed).
    if (how === "failed" && !ui.prompt.value) {
      ui.prompt.value = prompt;
      fitPrompt();
    }
  }
}

// Every frame of one response, to its end.
async function readFrames(turn, response) {
  const reader = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    frame(turn, value);
  }
}

// One SSE frame: an event's JSON (pings are comments, which the parser never passes on).
function frame(turn, sse) {
  let event;
  try {
    event = JSON.parse(sse.data);
  } catch {
    event = null;
  }
  if (event === null || typeof event !== "object" || Array.isArray(event)) {
    later(turn.view, () => turn.view.clientError("frame", `A frame that is not an event: ${sse.data.slice(0, 200)}`));
    return;
  }
  turn.received += 1;
  if (typeof event.id === "string") turn.lastEventId = event.id;
  turn.record(event);
  if (turn.events.length === 1) {
    // The agent is answering this turn: an earlier question's buttons would now answer a turn
    // that is no longer last. Closed only now, so a request that failed leaves them usable.
    for (const past of state.turns) if (past !== turn) past.view.closeQuestions();
  }
  if (event.content_type === "atomic.done") turn.sawDone = true;
  const receivedAt = performance.now(); // rendering comes a frame later: time THINKING by arrival
  later(turn.view, () => turn.view.apply(event, receivedAt));
}

// A response that is not a stream: {"detail": ...}, shown with its status; returns a summary.
async function refused(turn, response) {
  let detail = null;
  try {
    detail = (await response.json()).detail;
  } catch {
    // no JSON body
  }
  let text = typeof detail === "string" ? detail : response.statusText || "refused";
  let details = null;
  let history = false;
  if (Array.isArray(detail)) {
    text = "The request is not valid: " + detail.map(describeError).join("; ");
    details = { errors: detail };
    // The page wrote everything else in the request; what it cannot vouch for is the agent's
    // past events, sent back as session.interactions.
    history = detail.some((e) => Array.isArray(e?.loc) && e.loc.includes("interactions"));
  }
  if (response.status === 401) {
    showKeyPanel(state.key ? "The key was refused: type another." : "This service needs an API key.");
    text += ". Type the key above, then send again.";
  } else if (response.status === 413) {
    text += ". The chat is longer than the service takes: start a New chat.";
  } else if (response.status === 422 && history) {
    text += ". The chat's history cannot be sent back to the service: start a New chat.";
  } else if (response.status === 503) {
    text += ". Try again in a moment.";
  }
  later(turn.view, () => turn.view.clientError(response.status, text, details));
  return `refused: HTTP ${response.status}`;
}

// One of FastAPI's validation errors ({loc, msg, ...}), or whatever else the list holds.
function describeError(error) {
  if (error === null || typeof error !== "object") return String(error);
  const where = Array.isArray(error.loc) ? error.loc.join(".") : "";
  return `${where}: ${error.msg ?? JSON.stringify(error)}`;
}

function addTurn(turn) {
  ui.empty.hidden = true;
  const item = el("article", "turn");
  item.dataset.queryId = turn.queryId;
  const user = el("div", "user-message", turn.prompt);
  const answer = el("div", "assistant");
  item.append(user, answer);
  ui.transcript.append(item);
  scrollToBottom();
  return new TurnView(answer, { onAnswer: (text) => void send(text) });
}

function setRunning(running) {
  ui.send.hidden = running;
  ui.stop.hidden = !running;
  document.body.dataset.running = String(running);
}

function stop() {
  const running = state.running;
  if (!running) return;
  // A resumable run goes on at the service when its connection closes: stop it there too.
  if (running.run) {
    void fetch(runUrl(running.run), { method: "DELETE", headers: authHeaders(), cache: "no-store" }).catch(() => {});
  }
  running.controller.abort();
}

function newChat() {
  stop();
  state.turns = [];
  state.chatId = ulid();
  queue = [];
  viewsWithText.clear();
  for (const turn of ui.transcript.querySelectorAll(".turn")) turn.remove();
  ui.empty.hidden = false;
  ui.prompt.focus();
}

// Whether the service needs a key, whether ours is good, and the agent's name. Only the
// answer for the key last taken counts: an earlier check may answer after a later one.
let configCheck = 0;

async function loadConfig() {
  const check = ++configCheck;
  let config = null;
  let failure = "";
  try {
    const response = await fetch(CONFIG_URL, { headers: authHeaders(), cache: "no-store" });
    if (response.ok) config = await response.json();
    else failure = `HTTP ${response.status}`;
  } catch (error) {
    failure = error?.message || String(error);
  }
  if (check !== configCheck) return;
  if (config === null || typeof config !== "object") {
    // Without config.json the key cannot be checked; sending a message will say (401).
    const why = failure || "not JSON";
    ui.keyStatus.textContent = `The key could not be checked (config.json: ${why}); sending will tell.`;
    return;
  }
  ui.keyToggle.hidden = !config.key_required;
  if (config.agent) {
    state.processorId = config.agent.name;
    ui.agentName.textContent = config.agent.name;
    ui.agentDescription.textContent = config.agent.description || "";
    document.title = `${config.agent.name} · Playground`;
  }
  if (config.key_required && !config.key_accepted) {
    showKeyPanel(state.key ? "The key was refused: type another." : "This service needs an API key.");
  } else if (config.key_required) {
    ui.keyStatus.textContent = "Key accepted.";
    ui.keyToggle.textContent = "API key ✓";
    ui.keyPanel.hidden = true;
  }
}

function showKeyPanel(text) {
  ui.keyToggle.hidden = false;
  ui.keyToggle.textContent = "API key";
  ui.keyPanel.hidden = false;
  ui.keyStatus.textContent = text;
  ui.key.focus();
}

function keepKey(key) {
  state.key = key;
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

// "Use key" (or Enter in the key field): take the key and check it, sending no message.
function saveKey() {
  const key = ui.key.value.trim();
  if (!KEY_CHARACTERS.test(key)) {
    ui.keyStatus.textContent = NOT_A_KEY;
    return;
  }
  keepKey(key);
  ui.keyStatus.textContent = "Checking…";
  void loadConfig();
}

function fitPrompt() {
  ui.prompt.style.height = "auto";
  ui.prompt.style.height = Math.min(ui.prompt.scrollHeight, 200) + "px";
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const prompt = ui.prompt.value;
  if (!prompt.trim() || !ready()) return; // not sent: the prompt stays where it is
  ui.prompt.value = "";
  fitPrompt();
  void send(prompt);
});
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});
ui.prompt.addEventListener("input", fitPrompt);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && state.running) stop();
});
ui.stop.addEventListener("click", stop);
ui.newChat.addEventListener("click", newChat);
ui.keyToggle.addEventListener("click", () => {
  ui.keyPanel.hidden = !ui.keyPanel.hidden;
  if (!ui.keyPanel.hidden) ui.key.focus();
});
ui.keyPanel.addEventListener("submit", (event) => {
  event.preventDefault();
  saveKey();
});

ui.key.value = state.key;
void loadConfig();
ui.prompt.focus();
