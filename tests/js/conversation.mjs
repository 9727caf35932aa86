// The conversation of tests/langgraph_sdk/flows.py::conversation_flow, driven by the JS client
// `@langchain/langgraph-sdk` alone (issue 33): a five-turn thread whose turn 3 waits for a review,
// every turn seeing the ones before; each multitask_strategy on a thread waiting for a review and
// on a running one; the thread's runs, history, metadata update and search; a fork from its
// history, a state update and a copy.
//
//   INTERLOCK_LANGGRAPH_URL=http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default \
//   INTERLOCK_API_KEY=ilk_... node tests/js/conversation.mjs
//
// Exits 0 when every check held; otherwise 1, naming the step and what differed.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";

const CHAT = "conversation";
// Unique per run: a search by it finds this run's thread alone on a server others use too.
const CASE = `chat-js-${randomUUID()}`;

function setting(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`conversation.mjs: set ${name} (see the comment at the top of this file)`);
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

function said(text) {
  return { messages: [{ role: "user", content: text }] };
}

function lastReply(values) {
  const replies = (values.messages ?? []).filter((m) => m.type === "ai").map((m) => m.content);
  return replies.length ? String(replies.at(-1)) : "";
}

/** The reply agents/conversation.py gives (Python's repr of the strings: none has a quote). */
function reply(turn, text, before) {
  const earlier = before.map((s) => `'${s}'`).join(", ");
  return `turn ${turn}: you said '${text}'; before: [${earlier}]`;
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
  const type = error.response?.headers.get("content-type") ?? "";
  assert.ok(type.startsWith("application/problem+json"), `content-type ${type}: ${error.text}`);
  return JSON.parse(error.text);
}

/** `runs.wait`, with the id of the run it started (the client reads it from Content-Location). */
async function waited(threadId, payload) {
  let runId;
  const values = await client.runs.wait(threadId, CHAT, {
    ...payload,
    onRunCreated: (run) => {
      runId = run.run_id;
    },
  });
  assert.ok(runId, "runs.wait answered no Content-Location naming its run");
  return { values, runId };
}

/** Poll the run until the sandbox runs it: a strategy "on a running thread" must meet one. */
async function running(threadId, runId) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const run = await client.runs.get(threadId, runId);
    if (run.status === "running") return;
    assert.ok(["pending", "running"].includes(run.status), `run ${runId}: ${run.status}`);
    assert.ok(Date.now() < deadline, `run ${runId} still ${run.status} after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function statusOf(threadId, runId) {
  return (await client.runs.get(threadId, runId)).status;
}

/** A run `rollback` cancelled: interrupted, or gone (LangGraph deletes it; Interlock keeps it). */
async function rolledBack(threadId, runId) {
  try {
    assert.equal(await statusOf(threadId, runId), "interrupted");
  } catch (error) {
    if (error.status !== 404) throw error;
  }
}

async function main() {
  step("threads.create with metadata");
  const thread = await client.threads.create({ metadata: { case: CASE } });
  const threadId = thread.thread_id;
  assert.equal(thread.status, "idle");
  assert.equal(thread.metadata.case, CASE);
  // The human messages the thread's state holds, in order: every reply names the earlier ones.
  const inputs = [];
  const runIds = [];
  const interrupted = []; // the runs multitask_strategy=interrupt cancelled
  const rolled = []; // and those rollback did
  let messages = 0;

  async function turn(text, payload = {}) {
    const { values, runId } = await waited(threadId, { input: said(text), ...payload });
    runIds.push(runId);
    assert.equal(lastReply(values), reply(inputs.length + 1, text, inputs), text);
    inputs.push(text);
    messages += 2;
    assert.equal(values.messages.length, messages, JSON.stringify(values.messages));
    return values;
  }

  step("turns 1 and 2: each sees the one before");
  await turn("hello");
  await turn("my name is Ada");

  step("turn 3 waits for a review");
  const third = await waited(threadId, { input: said("refund my order") });
  runIds.push(third.runId);
  const [interrupt] = third.values.__interrupt__;
  assert.deepEqual(third.values.__interrupt__, [interrupt]);
  assert.deepEqual(interrupt.value.allowed_decisions, ["approve", "reject"]);
  assert.equal((await client.threads.get(threadId)).status, "interrupted");

  step("suspended thread, reject: 409 thread-busy");
  let problem = await refused(
    client.runs.wait(threadId, CHAT, { input: said("hi?"), multitaskStrategy: "reject" }),
    409,
  );
  assert.ok(problem.type.endsWith("/thread-busy"), JSON.stringify(problem));

  step("suspended thread, enqueue: the follow-up waits behind the review");
  const queued = await client.runs.create(threadId, CHAT, {
    input: said("what is my name?"),
    multitaskStrategy: "enqueue",
  });
  assert.equal(queued.status, "pending");
  assert.equal(queued.multitask_strategy, "enqueue");
  const state = await client.threads.getState(threadId);
  assert.deepEqual(
    state.interrupts.map((i) => i.id),
    [interrupt.id],
    "the review is still the thread's",
  );
  assert.equal((await client.threads.get(threadId)).status, "interrupted");

  step("command.resume answers the review, not the queued run");
  const answered = await waited(threadId, {
    command: { resume: { [interrupt.id]: "approve" } },
  });
  runIds.push(answered.runId);
  assert.equal(
    lastReply(answered.values),
    `${reply(3, "refund my order", inputs)}; reviewer said approve`,
  );
  inputs.push("refund my order");
  messages += 2;

  step("runs.join: the queued turn 4 ran after it, seeing turns 1-3");
  const fourth = await client.runs.join(threadId, queued.run_id);
  runIds.push(queued.run_id);
  assert.equal(lastReply(fourth), reply(4, "what is my name?", inputs));
  inputs.push("what is my name?");
  messages += 2;
  assert.equal(await statusOf(threadId, queued.run_id), "success");

  step("turn 5 sees all four");
  await turn("thanks, that is all");
  assert.equal((await client.threads.get(threadId)).status, "idle");

  step("running thread, interrupt: the new turn replaces the running one");
  let slow = await client.runs.create(threadId, CHAT, { input: said("wait 20") });
  runIds.push(slow.run_id);
  await running(threadId, slow.run_id);
  // Cancelled in its first run, before it ever stopped: it left no state, so its input is gone.
  await turn("stop that", { multitaskStrategy: "interrupt" });
  assert.equal(await statusOf(threadId, slow.run_id), "interrupted");
  interrupted.push(slow.run_id);

  step("running thread, rollback: the new turn starts from the state before the running one");
  slow = await client.runs.create(threadId, CHAT, { input: said("wait 20 again") });
  runIds.push(slow.run_id);
  await running(threadId, slow.run_id);
  await turn("forget it", { multitaskStrategy: "rollback" });
  await rolledBack(threadId, slow.run_id);
  rolled.push(slow.run_id);

  step("running thread, reject: 409 thread-busy; enqueue: queued behind it");
  slow = await client.runs.create(threadId, CHAT, { input: said("wait 8") });
  runIds.push(slow.run_id);
  await running(threadId, slow.run_id);
  problem = await refused(
    client.runs.create(threadId, CHAT, { input: said("hi?"), multitaskStrategy: "reject" }),
    409,
  );
  assert.ok(problem.type.endsWith("/thread-busy"), JSON.stringify(problem));
  const behind = await client.runs.create(threadId, CHAT, {
    input: said("after the wait"),
    multitaskStrategy: "enqueue",
  });
  runIds.push(behind.run_id);
  assert.equal(behind.status, "pending");
  assert.equal(await statusOf(threadId, slow.run_id), "running");
  const waitedOut = await client.runs.join(threadId, slow.run_id);
  assert.equal(lastReply(waitedOut), reply(inputs.length + 1, "wait 8", inputs));
  inputs.push("wait 8");
  messages += 2;
  const afterWait = await client.runs.join(threadId, behind.run_id);
  assert.equal(lastReply(afterWait), reply(inputs.length + 1, "after the wait", inputs));
  inputs.push("after the wait");
  messages += 2;
  assert.equal(await statusOf(threadId, behind.run_id), "success");

  step("suspended thread, interrupt: the review ends, its turn's input stays in the state");
  let suspended = await waited(threadId, { input: said("refund again") });
  runIds.push(suspended.runId);
  assert.equal(suspended.values.__interrupt__.length, 1);
  inputs.push("refund again"); // kept: the new turn starts on the suspended state
  messages += 1; // its human message, no reply
  await turn("never mind", { multitaskStrategy: "interrupt" });
  assert.equal(await statusOf(threadId, suspended.runId), "interrupted");
  interrupted.push(suspended.runId);
  assert.deepEqual((await client.threads.getState(threadId)).interrupts, []);

  step("suspended thread, rollback: the review ends, its turn's input is gone");
  suspended = await waited(threadId, { input: said("refund once more") });
  runIds.push(suspended.runId);
  assert.equal(suspended.values.__interrupt__.length, 1);
  await turn("scrap that", { multitaskStrategy: "rollback" });
  await rolledBack(threadId, suspended.runId);
  rolled.push(suspended.runId);
  const final = await client.threads.getState(threadId);
  assert.deepEqual(final.interrupts, []);
  assert.equal(final.values.messages.length, messages);
  assert.deepEqual(
    final.values.messages.filter((m) => m.type === "human").map((m) => m.content),
    inputs,
  );
  assert.equal((await client.threads.get(threadId)).status, "idle");

  step("runs.list: every run of every turn, newest first");
  const runs = await client.runs.list(threadId, { limit: 50 });
  const listed = JSON.stringify(runs.map((r) => [r.run_id, r.status]));
  assert.equal(runs[0].run_id, runIds.at(-1), listed);
  assert.equal(runs[0].status, "success");
  const ids = runs.map((r) => r.run_id);
  assert.deepEqual(
    runIds.filter((id) => !ids.includes(id) && !rolled.includes(id)),
    [],
    `runs the client was given but runs.list left out: ${listed}`,
  );
  // Not the same set: for each cancelled turn Interlock also lists the epoch its cancel moved
  // on to, a run nobody started, "interrupted" (LangGraph lists each run once, and deletes a
  // rolled-back one).
  assert.ok(
    runs.every((r) => runIds.includes(r.run_id) || r.status === "interrupted"),
    `a run nobody started that is not a cancelled turn's: ${listed}`,
  );
  const stopped = await client.runs.list(threadId, { limit: 50, status: "interrupted" });
  assert.ok(stopped.every((r) => r.status === "interrupted"), JSON.stringify(stopped));
  for (const id of interrupted) {
    assert.ok(
      stopped.some((r) => r.run_id === id),
      `${id} not listed interrupted: ${listed}`,
    );
  }

  step("threads.getHistory: one state per turn of the branch, newest first");
  const states = await client.threads.getHistory(threadId, { limit: 20 });
  // Not on it: the turn interrupted before it ever stopped, the two rolled back. The turn the
  // suspended-thread interrupt cancelled is on it with its own state (19 messages, its input
  // included: the next turn started on it), as LangGraph's history shows it.
  const lengths = states.map((h) => h.values.messages.length);
  assert.deepEqual(lengths, [23, 21, 19, 18, 16, 14, 12, 10, 8, 6, 4, 2]);
  const checkpoints = states.map((h) => h.checkpoint?.checkpoint_id);
  assert.equal(new Set(checkpoints).size, 12, JSON.stringify(checkpoints));
  const limited = await client.threads.getHistory(threadId, { limit: 3 });
  assert.deepEqual(
    limited.map((h) => h.checkpoint.checkpoint_id),
    states.slice(0, 3).map((h) => h.checkpoint.checkpoint_id),
  );

  step("threads.update merges metadata; threads.search finds the thread by it");
  await client.threads.update(threadId, { metadata: { topic: "billing" } });
  const found = await client.threads.search({ metadata: { topic: "billing", case: CASE } });
  assert.deepEqual(
    found.map((t) => t.thread_id),
    [threadId],
  );
  assert.deepEqual(found[0].metadata, { ...found[0].metadata, case: CASE, topic: "billing" });
  assert.deepEqual(await client.threads.search({ metadata: { case: CASE, topic: "other" } }), []);

  step("a run from a checkpoint of the history forks the thread");
  const second = states.at(-2).checkpoint.checkpoint_id;
  const branch = await client.runs.wait(threadId, CHAT, {
    input: said("branch"),
    checkpointId: second,
  });
  assert.equal(lastReply(branch), reply(3, "branch", ["hello", "my name is Ada"]));
  const branched = await client.threads.getHistory(threadId, { limit: 20 });
  assert.deepEqual(
    branched.map((h) => h.values.messages.length),
    [6, 4, 2],
  );

  step("threads.updateState: the next turn sees what a person wrote");
  const note = { messages: [{ role: "ai", content: "a note from a person" }] };
  const written = await client.threads.updateState(threadId, { values: note });
  assert.ok(written.checkpoint?.checkpoint_id, JSON.stringify(written));
  const noted = await client.threads.getState(threadId);
  assert.equal(noted.values.messages.at(-1).content, "a note from a person");
  const afterNote = await client.runs.wait(threadId, CHAT, { input: said("seen the note?") });
  assert.ok(JSON.stringify(afterNote.messages).includes("a note from a person"));
  assert.equal(
    lastReply(afterNote),
    reply(4, "seen the note?", ["hello", "my name is Ada", "branch"]),
  );

  step("threads.copy: runs on the copy leave the original alone");
  const copy = await client.threads.copy(threadId);
  assert.notEqual(copy.thread_id, threadId);
  const onCopy = await client.runs.wait(copy.thread_id, CHAT, { input: said("on the copy") });
  assert.equal(
    lastReply(onCopy),
    reply(5, "on the copy", ["hello", "my name is Ada", "branch", "seen the note?"]),
  );
  const original = await client.threads.getState(threadId);
  assert.ok(!JSON.stringify(original.values).includes("on the copy"));

  step("threads.delete: gone, its id not a thread again, the copy kept");
  await client.threads.delete(threadId);
  let gone = await refused(client.threads.get(threadId), 404);
  assert.ok(gone.type.endsWith("/thread-not-found"), JSON.stringify(gone));
  gone = await refused(client.threads.delete(threadId), 404);
  assert.ok(gone.type.endsWith("/thread-not-found"), JSON.stringify(gone));
  const again = await refused(client.threads.create({ threadId }), 409);
  assert.ok(again.type.endsWith("/thread-deleted"), JSON.stringify(again));
  const kept = await client.threads.getState(copy.thread_id);
  assert.ok(JSON.stringify(kept.values).includes("on the copy"));
}

main().then(
  () => console.log("conversation.mjs: every check passed"),
  (error) => {
    console.error(`conversation.mjs: FAILED at "${current}"\n${error?.stack ?? error}`);
    process.exit(1);
  },
);
