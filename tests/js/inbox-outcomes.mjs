// What Agent Inbox's five answers leave, checked the same way whichever client gave them
// (ui-inputs.mjs with the current SDK, stock-uis.mjs with the Inbox's own): every thread idle
// with no interrupt, the tool result its answer asks for, and none of them left in the inbox.

import assert from "node:assert/strict";

/** `threads` maps each answer (accept, edit, response, ignore, resolve) to its thread's id;
 * `to` is the address the threads' emails go to. */
export async function assertInboxOutcomes(client, graphId, threads, to) {
  const tools = {};
  for (const [answer, threadId] of Object.entries(threads)) {
    const thread = await client.threads.get(threadId);
    assert.equal(thread.status, "idle", `${answer}: ${JSON.stringify(thread)}`);
    assert.deepEqual(thread.interrupts, {});
    tools[answer] = thread.values.messages.filter((m) => m.type === "tool").map((m) => m.content);
  }
  assert.deepEqual(tools, {
    accept: [`Sent 'Following up' to ${to}.`],
    edit: [`Sent 'Following up' to edited-${to}.`],
    response: ["Not sent. The reviewer said: Not this week"],
    ignore: ["Not sent: the reviewer ignored it."],
    resolve: [],
  });
  const after = await client.threads.search({
    offset: 0,
    limit: 100,
    status: "interrupted",
    metadata: { graph_id: graphId },
  });
  const left = new Set(after.map((t) => t.thread_id));
  assert.ok(!Object.values(threads).some((t) => left.has(t)), "answered threads left the inbox");
}
