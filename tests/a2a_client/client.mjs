// @a2a-js/sdk's client (npm, pinned in package.json), a client nobody here wrote, against our /a2a:
// it reads the card, sends a message, streams one, and cancels a task mid-stream. The test
// (tests/server/test_a2a_face.py) runs `node client.mjs <base url>` and reads the JSON it prints last.
import { randomUUID } from "node:crypto";

import { Role, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";

const baseUrl = process.argv[2];
const client = await new ClientFactory().createFromUrl(baseUrl);
const card = await client.getAgentCard();

function request(text, extra = {}) {
  const message = {
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

const text = (parts) => parts.filter((part) => part.content?.$case === "text").map((part) => part.content.value).join("");
const stateName = (state) => TaskState[state].replace("TASK_STATE_", "").toLowerCase().replace("_", "-");

// Send: one answer, the task complete with its artifacts.
const sent = await client.sendMessage(request("answer"));
const answer = sent.artifacts.find((artifact) => artifact.name === "FINAL_RESPONSE");

// Stream: the task, then status and artifact updates as they come.
const kinds = [];
let streamed = "";
let last = "";
for await (const event of client.sendMessageStream(request("slowly:3"))) {
  kinds.push(event.payload.$case);
  if (event.payload.$case === "artifactUpdate") streamed += text(event.payload.value.artifact.parts);
  if (event.payload.$case === "statusUpdate") last = stateName(event.payload.value.status.state);
}

// Cancel: a long answer, canceled once its first words are in.
let taskId = "";
const long = client.sendMessageStream(request("slowly:100"));
for await (const event of long) {
  if (event.payload.$case === "artifactUpdate") {
    taskId = event.payload.value.taskId;
    break;
  }
}
const canceled = await client.cancelTask({ tenant: "", id: taskId, metadata: undefined });
const after = await client.getTask({ tenant: "", id: taskId });

console.log(
  JSON.stringify({
    card: card.name,
    sent: { state: stateName(sent.status.state), answer: text(answer.parts) },
    streamed: { kinds, answer: streamed, last },
    canceled: stateName(canceled.status.state),
    after: stateName(after.status.state),
  }),
);
