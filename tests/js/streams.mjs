// Streams as LangChain's UIs read them (issue 34), driven by the JS client
// `@langchain/langgraph-sdk` alone with what `useStream` sends by default: stream_mode
// ["values", "messages-tuple", "custom"] (Agent Chat UI), stream_subgraphs true, on_disconnect
// "cancel" (a stream that is not resumable), human messages with an id and content blocks.
//
// A claim refunded through claims-assistant (a create_agent subgraph, custom progress, a review):
// the run's id from Content-Location (useStream's onRunCreated), whole messages, namespaced
// events, the review, the approval streamed; a stream dropped and joined again with its last
// event's id; a run cancelled when its client goes; with INTERLOCK_STREAM_CLOSES_AFTER set (the
// server's INTERLOCK_STREAM_MAX_SECONDS), a stream the server closes before its run stopped,
// continued by the client on its own from the Location it named.
//
//   INTERLOCK_LANGGRAPH_URL=http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default \
//   INTERLOCK_API_KEY=ilk_... node tests/js/streams.mjs
//
// Exits 0 when every check held; otherwise 1, naming the step and what differed.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";

const CLAIMS = "claims-assistant";
const CHAT = "conversation";
const USE_STREAM = {
  streamMode: ["values", "messages-tuple", "custom"],
  streamSubgraphs: true,
  streamResumable: false,
  onDisconnect: "cancel",
};

function setting(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`streams.mjs: set ${name} (see the comment at the top of this file)`);
    process.exit(2);
  }
  return value;
}

const client = new Client({
  apiUrl: setting("INTERLOCK_LANGGRAPH_URL"),
  apiKey: setting("INTERLOCK_API_KEY"),
});

let current = "starting";
function step(name) {
  current = name;
  console.log(`- ${name}`);
}

/** A human message as Agent Chat UI sends it. */
function said(text) {
  return { messages: [{ id: randomUUID(), type: "human", content: [{ type: "text", text }] }] };
}

/** The messages a messages-tuple stream sent, chunks of one message joined. */
function messagesOf(parts) {
  const joined = [];
  for (const { event, data } of parts) {
    if (!event.startsWith("messages")) continue;
    const message = { ...data[0] };
    const last = joined.at(-1);
    if (last && message.type === "AIMessageChunk" && last.id === message.id) {
      last.content += message.content;
      continue;
    }
    joined.push(message);
  }
  return joined;
}

/** Every part of a stream; with `stopAfter`, that many, then the client goes away. */
async function partsOf(stream, { controller, stopAfter } = {}) {
  const parts = [];
  for await (const part of stream) {
    parts.push(part);
    if (stopAfter !== undefined && parts.length >= stopAfter) {
      controller.abort();
      break;
    }
  }
  return parts;
}

async function eventually(probe, check, what, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (check(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

async function refundThroughTheUiStream() {
  step("the first message, streamed with useStream's defaults");
  const thread = (await client.threads.create()).thread_id;
  let created;
  const parts = await partsOf(
    client.runs.stream(thread, CLAIMS, {
      input: said("Please refund claim CLM-4821"),
      ...USE_STREAM,
      onRunCreated: (run) => {
        created = run;
      },
    }),
  );
  const names = parts.map((p) => p.event);
  assert.equal(names[0], "metadata");
  assert.deepEqual(created, { run_id: parts[0].data.run_id, thread_id: thread });
  assert.ok(parts.every((p) => p.id), "every event carries an id");
  assert.ok(names.some((n) => n.startsWith("custom|assistant:")), names.join(" "));
  const whole = messagesOf(parts);
  assert.deepEqual(
    whole.map((m) => m.type),
    ["ai", "tool", "ai"],
  );
  assert.equal(whole[0].tool_calls[0].name, "lookup_claim");
  assert.match(whole[1].content, /CLM-4821/);
  const final = parts.at(-1);
  assert.equal(final.event, "values");
  const [review] = final.data.__interrupt__;
  assert.equal(review.value.action_requests[0].name, "issue_refund");

  step("the approval, streamed with useStream's defaults");
  const approved = await partsOf(
    client.runs.stream(thread, CLAIMS, {
      command: { resume: { [review.id]: { decisions: [{ type: "approve" }] } } },
      ...USE_STREAM,
    }),
  );
  const after = messagesOf(approved);
  assert.deepEqual(
    after.map((m) => m.type),
    ["tool", "ai"],
  );
  assert.match(after[0].content, /refunded claim CLM-4821/);
  const done = approved.at(-1);
  assert.equal(done.event, "values");
  assert.equal(done.data.__interrupt__, undefined);
  assert.match(done.data.messages.at(-1).content, /^Done\./);
}

async function joinAfterADrop() {
  step("a stream dropped after three events, joined with its last event's id");
  const thread = (await client.threads.create()).thread_id;
  const controller = new AbortController();
  const seen = await partsOf(
    client.runs.stream(thread, CLAIMS, {
      input: said("refund claim CLM-4821"),
      ...USE_STREAM,
      streamResumable: true,
      onDisconnect: "continue",
      signal: controller.signal,
    }),
    { controller, stopAfter: 3 },
  );
  const run = seen[0].data.run_id;
  const streamMode = USE_STREAM.streamMode;
  const everything = await eventually(
    () => partsOf(client.runs.joinStream(thread, run, { lastEventId: "-1", streamMode })),
    (got) => got.length > 0 && got.at(-1).data?.__interrupt__,
    "the run stopped at its review",
  );
  const missed = await partsOf(
    client.runs.joinStream(thread, run, { lastEventId: seen.at(-1).id, streamMode }),
  );
  assert.deepEqual(
    [...seen, ...missed].map((p) => [p.id, p.event]),
    everything.map((p) => [p.id, p.event]),
  );
  assert.deepEqual(missed.at(-1).data, everything.at(-1).data);
}

async function cancelledWhenTheClientGoes() {
  step("a client that goes away cancels its run (on_disconnect cancel)");
  const thread = (await client.threads.create()).thread_id;
  const controller = new AbortController();
  const [metadata] = await partsOf(
    client.runs.stream(thread, CHAT, {
      input: said("wait 20"),
      ...USE_STREAM,
      signal: controller.signal,
    }),
    { controller, stopAfter: 1 },
  );
  const run = metadata.data.run_id;
  await eventually(
    () => client.runs.get(thread, run),
    (got) => got.status === "interrupted",
    "the run cancelled",
  );
}

async function continuedAfterTheServerClosedIt() {
  const closesAfter = Number(process.env.INTERLOCK_STREAM_CLOSES_AFTER ?? 0);
  if (!closesAfter) return;
  step(`a stream the server closes after ${closesAfter} s, continued by the client on its own`);
  const thread = (await client.threads.create()).thread_id;
  const parts = await partsOf(
    client.runs.stream(thread, CHAT, {
      input: said(`wait ${closesAfter * 2 + 1}`),
      ...USE_STREAM,
      streamResumable: true,
      onDisconnect: "continue",
    }),
  );
  const ids = parts.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, `an event came twice: ${ids.join(" ")}`);
  assert.equal(parts[0].event, "metadata");
  // The run's end, which came after the server had closed the first stream.
  assert.equal(parts.at(-1).event, "values");
  assert.match(JSON.stringify(parts.at(-1).data.messages.at(-1)), /you said/);
}

try {
  await refundThroughTheUiStream();
  await joinAfterADrop();
  await cancelledWhenTheClientGoes();
  await continuedAfterTheServerClosedIt();
  console.log("streams.mjs: every check held");
} catch (error) {
  console.error(`streams.mjs failed at "${current}":`);
  console.error(error);
  process.exit(1);
}
