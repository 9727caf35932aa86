// LangChain's Agent Chat UI and Agent Inbox, as they drive a LangGraph server, with the versions
// of `@langchain/langgraph-sdk` their own lockfiles install (issue 34, item 5):
//
// - Agent Chat UI (langchain-ai/agent-chat-ui fdc87e6, SDK 1.8.10): the real `useStream` React
//   hook, rendered in jsdom with the options the UI's Stream provider gives it (fetchStateHistory,
//   onCustomEvent, onThreadId, the key as apiKey), and `submit` called exactly as its components
//   call it: a first message (content blocks, stream_mode values, stream_subgraphs, resumable),
//   the review's approve (`{}` beside the command, so on_disconnect "cancel"), a second message,
//   a reload (a new hook on the thread: its history), regenerate (the parent checkpoint the hook's
//   message metadata names), and the sidebar's thread search by graph_id.
// - Agent Inbox (langchain-ai/agent-inbox f38301b, SDK 1.9.28): its client (the key in
//   x-api-key), the inbox's search (offset, limit, status interrupted, metadata graph_id), a
//   thread's page, accept / edit / response streamed with stream_mode "events" (read as the
//   inbox reads it: the node of each on_chain_start, an `error` event fails), ignore as a created
//   run, and "mark as resolved" as updateState(values null, as __end__).
//
// The UIs' code is not copied: what is replayed here is the calls, with the options the UIs pass.
//
//   INTERLOCK_LANGGRAPH_URL=http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default \
//   INTERLOCK_API_KEY=ilk_... node tests/js/stock-uis.mjs
//
// Exits 0 when every check held; otherwise 1, naming the step and what differed.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { JSDOM } from "jsdom";
import { assertInboxOutcomes } from "./inbox-outcomes.mjs";

const CHAT = "outreach-email";
const INBOX = "inbox-email";
const END = "__end__";
const WAIT_MS = 60_000;

function setting(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`stock-uis.mjs: set ${name} (see the comment at the top of this file)`);
    process.exit(2);
  }
  return value;
}

const API_URL = setting("INTERLOCK_LANGGRAPH_URL");
const API_KEY = setting("INTERLOCK_API_KEY");

// React renders into a DOM; the hook itself only needs fetch, which is Node's own.
const dom = new JSDOM("<!doctype html><html><body><div id='root'></div></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.navigator ??= dom.window.navigator;

// STOCK_UIS_TRACE=1 prints every request the UIs' clients make, and each answer's status.
if (process.env.STOCK_UIS_TRACE) {
  const fetched = globalThis.fetch;
  globalThis.fetch = async (url, init = {}) => {
    const answer = await fetched(url, init);
    const body = typeof init.body === "string" ? init.body : "";
    console.log(`  ${init.method ?? "GET"} ${String(url).slice(API_URL.length)} ${body} -> ${answer.status}`);
    return answer;
  };
}

const React = await import("react");
const { createRoot } = await import("react-dom/client");
const { useStream } = await import("agent-chat-ui-sdk/react");
const ChatUiSdk = await import("agent-chat-ui-sdk");
const InboxSdk = await import("agent-inbox-sdk");

let current = "starting";
function step(name) {
  current = name;
  console.log(`- ${name}`);
}

async function until(what, condition) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`waited ${WAIT_MS} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A message as Agent Chat UI's composer builds it. */
function human(text) {
  return { id: randomUUID(), type: "human", content: [{ type: "text", text }] };
}

/** Tool calls with no tool message answering them: what the Chat UI would answer itself before
 * sending the next message (its ensureToolCallsHaveResponses). The server must leave none. */
function unansweredToolCalls(messages) {
  const answered = new Set(messages.filter((m) => m.type === "tool").map((m) => m.tool_call_id));
  return messages
    .filter((m) => m.type === "ai")
    .flatMap((m) => m.tool_calls ?? [])
    .filter((call) => !answered.has(call.id));
}

/** One mounted `useStream`, as Agent Chat UI's StreamProvider configures it. */
async function mountChatUi(threadId) {
  const seen = { stream: undefined, threadIds: [], customEvents: 0, loads: 0, mark: 0 };
  function Probe() {
    // The UI keeps the thread's id in its URL (?threadId=), set from onThreadId.
    const [shownThread, showThread] = React.useState(threadId);
    const stream = useStream({
      apiUrl: API_URL,
      apiKey: API_KEY,
      assistantId: CHAT,
      threadId: shownThread,
      fetchStateHistory: true,
      onCustomEvent: () => {
        seen.customEvents += 1;
      },
      onThreadId: (id) => {
        seen.threadIds.push(id);
        showThread(id);
      },
    });
    // What the UI's components read while rendering: the hook adds the stream modes they need.
    void stream.messages;
    void stream.values;
    void stream.interrupt;
    if (stream.isLoading && !seen.stream?.isLoading) seen.loads += 1;
    seen.stream = stream;
    return null;
  }
  const root = createRoot(document.getElementById("root"));
  // The first render and its effects (the hook's subscription to its stream among them) run to
  // the end before anything is submitted, as a person's first click always comes after them; a
  // submit that raced them on a busy machine was never seen loading.
  globalThis.IS_REACT_ACT_ENVIRONMENT = true;
  await React.act(async () => root.render(React.createElement(Probe)));
  globalThis.IS_REACT_ACT_ENVIRONMENT = false;
  return { seen, unmount: () => root.unmount() };
}

/** Submit as the UI does, marking where the hook's loads stood (for ``settled``). */
function submit(seen, stream, values, options) {
  seen.mark = seen.loads;
  stream.submit(values, options);
}

/** Wait for the hook to settle after a ``submit``: it has started loading since (however long
 * that took on a busy machine), is not loading now, and has no error. */
async function settled(seen, what) {
  const stream = await until(what, () => {
    const s = seen.stream;
    return s && seen.loads > seen.mark && !s.isLoading ? s : undefined;
  }).catch((error) => {
    const s = seen.stream;
    const state = `loads ${seen.loads} (${seen.mark} before the submit), loading ${s?.isLoading}, `
      + `${s?.messages?.length} messages, error ${s?.error}`;
    throw new Error(`${error.message}: ${state}`);
  });
  assert.equal(stream.error, undefined, `${what}: ${stream.error?.stack ?? stream.error}`);
  return stream;
}

const approve = { command: { resume: { decisions: [{ type: "approve" }] } } };

/** After a submit that starts a turn: it waits for a review, is approved, and the thread then
 * holds two whole turns (human, the tool call, its result, the answer; twice). */
async function approvedTwoTurns(seen, what) {
  let stream = await settled(seen, what);
  assert.ok(stream.interrupt?.value?.action_requests, `${what} waits for a review`);
  submit(seen, stream, {}, approve);
  stream = await settled(seen, `${what}, approved`);
  assert.deepEqual(
    stream.messages.map((m) => m.type),
    ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"],
  );
  return stream;
}

async function chatUi() {
  const client = new ChatUiSdk.Client({ apiUrl: API_URL, apiKey: API_KEY });

  step("chat: the UI checks the server (GET /info with X-Api-Key)");
  const info = await fetch(`${API_URL}/info`, { headers: { "X-Api-Key": API_KEY } });
  assert.equal(info.status, 200, await info.text());

  step("chat: the first message (values, subgraphs, resumable) waits for a review");
  const page = await mountChatUi(null);
  await until("the hook", () => page.seen.stream);
  const first = human("send an email");
  submit(
    page.seen,
    page.seen.stream,
    { messages: [first], context: undefined },
    {
      streamMode: ["values"],
      streamSubgraphs: true,
      streamResumable: true,
      optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), first] }),
    },
  );
  let stream = await settled(page.seen, "the first turn");
  const [threadId] = page.seen.threadIds;
  assert.ok(threadId, "onThreadId named the new thread");
  assert.deepEqual(
    stream.messages.map((m) => [m.type, m.id === first.id]),
    [
      ["human", true],
      ["ai", false],
    ],
  );
  assert.deepEqual(stream.messages[0].content, first.content);
  const review = stream.interrupt?.value;
  assert.ok(review, `an interrupt to review: ${JSON.stringify(stream.values)}`);
  assert.equal(review.action_requests[0].name, "send_email");
  assert.deepEqual(review.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);

  step("chat: approve ({} beside the command; on_disconnect cancel)");
  submit(page.seen, stream, {}, approve);
  stream = await settled(page.seen, "the approved turn");
  assert.deepEqual(
    stream.messages.map((m) => m.type),
    ["human", "ai", "tool", "ai"],
  );
  assert.equal(stream.interrupt, undefined);
  assert.match(stream.messages[2].content, /^Sent /);

  step("chat: a second message on the thread, reviewed and approved");
  assert.deepEqual(unansweredToolCalls(stream.messages), []);
  const second = human("send another email");
  submit(
    page.seen,
    stream,
    { messages: [second], context: undefined },
    { streamMode: ["values"], streamSubgraphs: true, streamResumable: true },
  );
  stream = await approvedTwoTurns(page.seen, "the second turn");
  assert.deepEqual(page.seen.threadIds, [threadId], "one thread for the conversation");
  page.unmount();

  step("chat: the sidebar lists the thread (search by graph_id)");
  const listed = await client.threads.search({ metadata: { graph_id: CHAT }, limit: 100 });
  const mine = listed.find((t) => t.thread_id === threadId);
  assert.ok(mine, `thread ${threadId} in the sidebar`);
  assert.deepEqual(mine.values.messages[0].content, first.content);

  step("chat: reload (a new hook on the thread) shows the history");
  const reloaded = await mountChatUi(threadId);
  stream = await until("the history", () => {
    const s = reloaded.seen.stream;
    return s && !s.isLoading && s.messages.length === 8 ? s : undefined;
  });
  assert.equal(stream.interrupt, undefined);
  assert.deepEqual(
    stream.messages.map((m) => m.id),
    page.seen.stream.messages.map((m) => m.id),
  );
  const answer = stream.messages.at(-1);
  const parent = stream.getMessagesMetadata(answer)?.firstSeenState?.parent_checkpoint;
  assert.ok(parent?.checkpoint_id, `the answer's parent checkpoint: ${JSON.stringify(parent)}`);

  step("chat: regenerate the last answer (its parent checkpoint, no input)");
  submit(reloaded.seen, stream, undefined, {
    checkpoint: parent,
    streamMode: ["values"],
    streamSubgraphs: true,
    streamResumable: true,
  });
  stream = await approvedTwoTurns(reloaded.seen, "the regenerated turn");
  assert.deepEqual(
    stream.messages.slice(0, 5).map((m) => m.id),
    page.seen.stream.messages.slice(0, 5).map((m) => m.id),
    "the branch keeps the turns before the regenerated answer",
  );
  assert.deepEqual(reloaded.seen.threadIds, [], "no new thread on reload");
  reloaded.unmount();
}

/** Agent Inbox's stream of a response: fails on an `error` event, as the inbox toasts one. */
async function inboxStreamed(stream) {
  const nodes = [];
  for await (const chunk of stream) {
    if (chunk.event === "error") throw new Error(`error event: ${JSON.stringify(chunk.data)}`);
    if (chunk.data?.event === "on_chain_start" && chunk.data?.metadata?.langgraph_node) {
      nodes.push(chunk.data.metadata.langgraph_node);
    }
  }
  return nodes;
}

async function inbox() {
  const client = new InboxSdk.Client({ apiUrl: API_URL, defaultHeaders: { "x-api-key": API_KEY } });
  const to = `${randomUUID().slice(0, 8)}@example.com`;
  const answers = ["accept", "edit", "response", "ignore", "resolve"];
  const threads = {};

  step("inbox: five threads wait for a person (HumanInterrupt)");
  for (const answer of answers) {
    const { thread_id } = await client.threads.create();
    await client.runs.wait(thread_id, INBOX, { input: { messages: [human(`reply to ${to}`)] } });
    threads[answer] = thread_id;
  }

  step("inbox: the interrupted inbox lists them with their interrupts");
  const listed = await client.threads.search({
    offset: 0,
    limit: 10,
    status: "interrupted",
    metadata: { graph_id: INBOX },
  });
  const ours = listed.filter((t) => Object.values(threads).includes(t.thread_id));
  assert.equal(ours.length, answers.length, JSON.stringify(listed.map((t) => t.thread_id)));
  for (const thread of ours) {
    const interrupts = Object.values(thread.interrupts).flat();
    assert.equal(interrupts.length, 1, JSON.stringify(thread.interrupts));
    const [request] = interrupts[0].value;
    assert.equal(request.action_request.action, "send_email");
    assert.equal(request.config.allow_accept, true);
    assert.ok(request.description, "a description for the inbox's page");
  }

  step("inbox: a thread's page (threads.get), accept streamed with stream_mode events");
  const page = await client.threads.get(threads.accept);
  assert.equal(page.status, "interrupted");
  const actionRequest = Object.values(page.interrupts).flat()[0].value[0].action_request;
  const respond = (threadId, response) =>
    inboxStreamed(
      client.runs.stream(threadId, INBOX, { command: { resume: [response] }, streamMode: "events" }),
    );
  const acceptNodes = await respond(threads.accept, { type: "accept", args: actionRequest });
  assert.ok(acceptNodes.length, "the inbox shows the node that runs");

  step("inbox: edit and response, streamed");
  await respond(threads.edit, {
    type: "edit",
    args: { action: "send_email", args: { ...actionRequest.args, to: `edited-${to}` } },
  });
  await respond(threads.response, { type: "response", args: "Not this week" });

  step("inbox: ignore (a created run)");
  const run = await client.runs.create(threads.ignore, INBOX, {
    command: { resume: [{ type: "ignore", args: null }] },
  });
  await client.runs.join(threads.ignore, run.run_id);

  step("inbox: mark as resolved (updateState, values null, as __end__)");
  await client.threads.updateState(threads.resolve, { values: null, asNode: END });

  step("inbox: each thread ended as its answer says, and left the inbox");
  await assertInboxOutcomes(client, INBOX, threads, to);
}

async function main() {
  await chatUi();
  await inbox();
}

main().then(
  () => {
    console.log("stock-uis.mjs: every check passed");
    process.exit(0);
  },
  (error) => {
    console.error(`stock-uis.mjs: FAILED at "${current}"\n${error?.stack ?? error}`);
    process.exit(1);
  },
);
