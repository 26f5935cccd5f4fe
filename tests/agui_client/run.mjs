// @ag-ui/client's HttpAgent against a real /agui (tests/server/test_agui_face.py runs it).
//
//   node run.mjs <scenario> <url> [key] [argument]
//
// Prints one JSON object: each run's events (as HttpAgent's pipeline, which runs the package's
// own verifyEvents, passed them to its subscribers), the agent's messages after it, and any
// error. Each run's raw events also go through `verifyEvents()` on their own (`run()`), so
// that a verifier failure is reported even where runAgent would turn it into an error.
import { HttpAgent, verifyEvents } from "@ag-ui/client";

const [scenario, url, key, argument] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};

function newAgent() {
  return new HttpAgent({ url, headers, threadId: "thread-1" });
}

function userMessage(content) {
  return { id: `user-${Math.random().toString(36).slice(2)}`, role: "user", content };
}

// One run through HttpAgent.runAgent: its events, and how it ended.
async function runOnce(agent, parameters = {}, { abortAfterContent = false } = {}) {
  const events = [];
  let failed = null;
  const subscriber = {
    onEvent({ event }) {
      events.push(event);
      if (abortAfterContent && event.type === "TEXT_MESSAGE_CONTENT") {
        agent.abortRun();
      }
    },
    onRunFailed({ error }) {
      failed = String(error && error.message ? error.message : error);
    },
  };
  let result = null;
  let thrown = null;
  try {
    result = await agent.runAgent(parameters, subscriber);
  } catch (error) {
    thrown = String(error && error.message ? error.message : error);
  }
  return { events, failed, thrown, result: result ? result.result : null, messages: structuredClone(agent.messages) };
}

// The same input's events, straight from run() through verifyEvents() alone.
function verified(agent, parameters = {}) {
  const input = {
    threadId: agent.threadId,
    runId: `verify-${Math.random().toString(36).slice(2)}`,
    messages: agent.messages,
    state: agent.state,
    tools: parameters.tools ?? [],
    context: parameters.context ?? [],
    forwardedProps: {},
    ...(parameters.resume ? { resume: parameters.resume } : {}),
  };
  return new Promise((resolve) => {
    const events = [];
    verifyEvents(false)(agent.run(input)).subscribe({
      next: (event) => events.push(event.type),
      error: (error) => resolve({ events, error: String(error && error.message ? error.message : error) }),
      complete: () => resolve({ events, error: null }),
    });
  });
}

const weatherTool = {
  name: "get_weather",
  description: "The weather in a city, from the browser.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const scenarios = {
  // Every event kind, verified twice (runAgent's pipeline, and verifyEvents alone).
  async everything() {
    const agent = newAgent();
    agent.messages = [userMessage("everything")];
    const check = await verified(agent);
    return { check, run: await runOnce(agent) };
  },
  // Two turns on one agent: the second run sends the first turn back as history.
  async two_turns() {
    const agent = newAgent();
    agent.setState({ theme: "dark" });
    agent.messages = [userMessage("echo:one")];
    const first = await runOnce(agent, { context: [{ description: "page", value: "settings" }] });
    agent.addMessage(userMessage("echo:two"));
    const second = await runOnce(agent, { context: [{ description: "page", value: "settings" }] });
    return { first, second };
  },
  // An error the agent reports: RUN_ERROR, and nothing after it.
  async error() {
    const agent = newAgent();
    agent.messages = [userMessage("fail")];
    const check = await verified(agent);
    return { check, run: await runOnce(agent) };
  },
  // A client's tool: the run ends with its call; the tool's answer, in the next run, resumes it.
  async client_tool() {
    const agent = newAgent();
    agent.messages = [userMessage("weather")];
    const check = await verified(agent, { tools: [weatherTool] });
    const first = await runOnce(agent, { tools: [weatherTool] });
    const calls = agent.messages.flatMap((message) => message.toolCalls ?? []);
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: calls[0].id, content: "sunny, 24C" });
    const second = await runOnce(agent, { tools: [weatherTool] });
    return { check, first, second };
  },
  // An interrupt (the agent asks the user), resumed by a resume entry.
  async interrupt() {
    const agent = newAgent();
    agent.messages = [userMessage(argument || "ask")];
    const check = await verified(agent);
    const first = await runOnce(agent);
    const interrupts = agent.pendingInterrupts.map((interrupt) => ({ ...interrupt }));
    const payload = argument === "approve" ? true : "Oslo";
    const resume = interrupts.map((interrupt) => ({ interruptId: interrupt.id, status: "resolved", payload }));
    const second = await runOnce(agent, { resume });
    // The same answer again: a pause is answered once.
    const again = await runOnce(agent, { resume });
    return { check, first, interrupts, second, again };
  },
  // The client aborts the run after the first words.
  async abort() {
    const agent = newAgent();
    agent.messages = [userMessage(argument)];
    return { run: await runOnce(agent, {}, { abortAfterContent: true }) };
  },
  // A refusal before the run (a 4xx): HttpAgent reports its status and body.
  async refused() {
    const agent = newAgent();
    agent.messages = [];
    return { run: await runOnce(agent) };
  },
};

const output = await scenarios[scenario]();
process.stdout.write(JSON.stringify(output) + "\n");
