// What LangChain's Agent Inbox and Agent Chat UI send, replayed with the JS client
// `@langchain/langgraph-sdk` alone (issue 34); the same sequences as
// tests/langgraph_sdk/ui_flows.py.
//
// Agent Inbox: `threads.search({ offset, limit, status: "interrupted", metadata: { graph_id } })`,
// `threads.get` for each thread's HumanInterrupt, then a list of one HumanResponse: accept, edit
// and response with `runs.stream`, ignore with `runs.create`, and "mark as resolved" with
// `threads.updateState(threadId, { values: null, asNode: END })`.
// Agent Chat UI: messages with an id and content blocks, `input: {}` beside every command
// (approve, and "mark as resolved": `command: { goto: END }`), the history on reload, and
// regenerate: a run from the answer's parent checkpoint with no input.
//
// Stream options that belong to the streams (stream_subgraphs, on_disconnect, the custom and
// events modes) are left to their own test: only what this one checks is sent.
//
//   INTERLOCK_LANGGRAPH_URL=http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default \
//   INTERLOCK_API_KEY=ilk_... node tests/js/ui-inputs.mjs
//
// Exits 0 when every check held; otherwise 1, naming the step and what differed.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";
import { assertInboxOutcomes } from "./inbox-outcomes.mjs";

const INBOX = "inbox-email";
const CHAT = "outreach-email";
const END = "__end__";

function setting(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`ui-inputs.mjs: set ${name} (see the comment at the top of this file)`);
    process.exit(2);
  }
  return value;
}

// As Agent Inbox builds its client: the key in x-api-key.
const client = new Client({
  apiUrl: setting("INTERLOCK_LANGGRAPH_URL"),
  defaultHeaders: { "x-api-key": setting("INTERLOCK_API_KEY") },
});

let current = "starting";
function step(name) {
  current = name;
  console.log(`- ${name}`);
}

/** A message as Agent Chat UI sends it. */
function human(text) {
  return { id: randomUUID(), type: "human", content: [{ type: "text", text }] };
}

async function drained(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

/** The last `values` event of a stream. */
function lastValues(parts) {
  const values = parts.filter((p) => p.event === "values");
  assert.ok(values.length, `no values event in ${JSON.stringify(parts)}`);
  return values.at(-1).data;
}

/** Await `call` expecting an HTTP error of `status`; the problem document it carries. */
async function refused(call, status) {
  let error;
  try {
    const answered = await call;
    assert.fail(`expected HTTP ${status}, got a success: ${JSON.stringify(answered)}`);
  } catch (caught) {
    if (caught instanceof assert.AssertionError) throw caught;
    error = caught;
  }
  assert.equal(error.status, status, `expected HTTP ${status}: ${error.stack}`);
  return JSON.parse(error.text);
}

async function inbox() {
  const to = `${randomUUID().slice(0, 8)}@example.com`;
  const answers = ["accept", "edit", "response", "ignore", "resolve"];
  const threads = {};
  step("five threads wait for a person (HumanInterrupt)");
  for (const answer of answers) {
    const { thread_id } = await client.threads.create();
    const first = await client.runs.wait(thread_id, INBOX, {
      input: { messages: [human(`reply to ${to}`)] },
    });
    assert.ok(first.__interrupt__?.length, JSON.stringify(first));
    threads[answer] = thread_id;
  }

  step("the inbox lists them: interrupted threads of its graph, newest first");
  const listed = await client.threads.search({
    offset: 0,
    limit: 10,
    status: "interrupted",
    metadata: { graph_id: INBOX },
  });
  assert.deepEqual(
    listed.slice(0, answers.length).map((t) => t.thread_id),
    [...answers].reverse().map((a) => threads[a]),
  );
  for (const thread of listed.slice(0, answers.length)) {
    const [[interrupt]] = Object.values(thread.interrupts);
    const [request] = interrupt.value;
    assert.equal(request.action_request.action, "send_email");
    assert.equal(request.action_request.args.to, to);
    assert.deepEqual(request.config, {
      allow_accept: true,
      allow_edit: true,
      allow_respond: true,
      allow_ignore: true,
    });
  }

  step("accept (the action_request unchanged, as the inbox sends it), streamed");
  const thread = await client.threads.get(threads.accept);
  const [[interrupt]] = Object.values(thread.interrupts);
  const actionRequest = interrupt.value[0].action_request;
  await drained(
    client.runs.stream(threads.accept, INBOX, {
      command: { resume: [{ type: "accept", args: actionRequest }] },
    }),
  );

  step("edit, streamed");
  const edit = [
    {
      type: "edit",
      args: { action: "send_email", args: { ...actionRequest.args, to: `edited-${to}` } },
    },
  ];
  await drained(client.runs.stream(threads.edit, INBOX, { command: { resume: edit } }));

  step("response, streamed");
  await drained(
    client.runs.stream(threads.response, INBOX, {
      command: { resume: [{ type: "response", args: "Not this week" }] },
    }),
  );

  step("ignore, created");
  const ignored = await client.runs.create(threads.ignore, INBOX, {
    command: { resume: [{ type: "ignore", args: null }] },
  });
  await client.runs.join(threads.ignore, ignored.run_id);

  step("mark as resolved: updateState(values null, as __end__)");
  await client.threads.updateState(threads.resolve, { values: null, asNode: END });

  step("each completed as its answer says");
  await assertInboxOutcomes(client, INBOX, threads, to);

  step("a type the interrupt does not allow: 400 naming the ones it does");
  const strict = await client.threads.create();
  await client.runs.wait(strict.thread_id, INBOX, {
    input: { messages: [human(`reply to ${to}, no edits`)] },
  });
  const problem = await refused(
    client.runs.wait(strict.thread_id, INBOX, { command: { resume: edit } }),
    400,
  );
  assert.ok(problem.detail.includes("allowed: accept, response, ignore"), problem.detail);
  assert.equal((await client.threads.get(strict.thread_id)).status, "interrupted");
}

async function chatUi() {
  step("chat: the first message waits for a review");
  const { thread_id: threadId } = await client.threads.create();
  const first = await drained(
    client.runs.stream(threadId, CHAT, {
      input: { messages: [human("send an email")] },
      streamMode: ["values"],
      streamResumable: true,
    }),
  );
  const [interrupt] = lastValues(first).__interrupt__;
  assert.equal(interrupt.value.action_requests[0].name, "send_email");

  step("chat: mark as resolved (input {} beside goto END): LangGraph asks the same review again");
  const resolved = await drained(
    client.runs.stream(threadId, CHAT, { input: {}, command: { goto: END } }),
  );
  assert.deepEqual(
    lastValues(resolved).__interrupt__.map((i) => i.id),
    [interrupt.id],
  );
  assert.equal((await client.threads.get(threadId)).status, "interrupted");

  step("chat: approve (input {} beside the command)");
  const approve = { resume: { decisions: [{ type: "approve" }] } };
  await drained(client.runs.stream(threadId, CHAT, { input: {}, command: approve }));
  const state = await client.threads.getState(threadId);
  assert.deepEqual(
    state.values.messages.map((m) => m.type),
    ["human", "ai", "tool", "ai"],
  );
  assert.deepEqual(state.values.messages[0].content, [{ type: "text", text: "send an email" }]);

  step("chat: a second message, approved");
  await drained(
    client.runs.stream(threadId, CHAT, {
      input: { messages: [human("send another email")] },
      streamMode: ["values"],
    }),
  );
  await drained(client.runs.stream(threadId, CHAT, { input: {}, command: approve }));

  step("chat: reload reads the history");
  const history = await client.threads.getHistory(threadId, { limit: 10 });
  assert.deepEqual(
    history.map((h) => h.values.messages.length),
    [8, 4],
  );
  assert.deepEqual(history[0].parent_checkpoint, history[1].checkpoint);
  assert.equal(history[1].parent_checkpoint.checkpoint_id, "epoch-0");

  step("chat: regenerate the last answer (its parent checkpoint, no input)");
  const answer = history[0].values.messages.at(-1);
  const seen = history.filter((h) => h.values.messages.some((m) => m.id === answer.id));
  const parent = seen.at(-1).parent_checkpoint;
  const again = await drained(
    client.runs.stream(threadId, CHAT, { checkpoint: parent, streamMode: ["values"] }),
  );
  assert.ok(lastValues(again).__interrupt__?.length, JSON.stringify(lastValues(again)));
  await drained(client.runs.stream(threadId, CHAT, { input: {}, command: approve }));
  const branch = await client.threads.getHistory(threadId, { limit: 10 });
  assert.deepEqual(
    branch.map((h) => h.values.messages.length),
    [8, 4],
  );
  assert.deepEqual(branch[1].checkpoint, history[1].checkpoint);
  assert.notDeepEqual(branch[0].checkpoint, history[0].checkpoint);
}

async function main() {
  await inbox();
  await chatUi();
}

main().then(
  () => console.log("ui-inputs.mjs: every check passed"),
  (error) => {
    console.error(`ui-inputs.mjs: FAILED at "${current}"\n${error?.stack ?? error}`);
    process.exit(1);
  },
);
