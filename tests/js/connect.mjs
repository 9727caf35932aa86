// What LangChain's UIs do first, with the JS client `@langchain/langgraph-sdk` (issue 34, items
// 1 and 4): `GET /info` as Agent Inbox sends it (no key) and as Agent Chat UI does (its key and
// scheme); a CORS preflight from the page's origin; a review driven through a client whose
// JSON travels as `text/plain` (Agent Chat UI's production passthrough,
// langgraph-nextjs-api-passthrough); and the assistants searched, counted and described as
// LangGraph's Agent Server describes the same graphs (tests/fixtures/assistants).
//
//   INTERLOCK_LANGGRAPH_URL=http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default \
//   INTERLOCK_API_KEY=ilk_... INTERLOCK_CORS_ORIGIN=http://localhost:3000 \
//   node tests/js/connect.mjs
//
// Exits 0 when every check held; otherwise 1, naming the step and what differed.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Client } from "@langchain/langgraph-sdk";

const REFUND = "refund-approval";
const RECORDED = JSON.parse(
  readFileSync(new URL("../fixtures/assistants/langgraph_server.json", import.meta.url)),
);

function setting(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`connect.mjs: set ${name} (see the comment at the top of this file)`);
    process.exit(2);
  }
  return value;
}

const url = setting("INTERLOCK_LANGGRAPH_URL");
const apiKey = setting("INTERLOCK_API_KEY");
const origin = setting("INTERLOCK_CORS_ORIGIN");
const client = new Client({ apiUrl: url, apiKey });

/** The passthrough's fetch: every request body declared `text/plain;charset=UTF-8`. */
function passthroughFetch(target, init = {}) {
  const headers = new Headers(init.headers);
  if (init.body !== undefined) headers.set("content-type", "text/plain;charset=UTF-8");
  return fetch(target, { ...init, headers });
}

let current = "starting";
function step(name) {
  current = name;
  console.log(`- ${name}`);
}

async function main() {
  step("GET /info as Agent Inbox asks it: no key, a JSON content type");
  let info = await fetch(`${url}/info`, { headers: { "Content-Type": "application/json" } });
  assert.equal(info.status, 200, await info.clone().text());
  const body = await info.json();
  assert.equal(body.host.project_id, null);
  assert.equal(body.flags.assistants, true);

  step("GET /info as Agent Chat UI asks it: its key and scheme");
  info = await fetch(`${url}/info`, { headers: { "X-Api-Key": apiKey, "X-Auth-Scheme": "x" } });
  assert.equal(info.status, 200);
  assert.deepEqual(await info.json(), body);

  step("a CORS preflight from the UI's origin, with the headers the client sends");
  const preflight = await fetch(`${url}/threads/search`, {
    method: "OPTIONS",
    headers: {
      Origin: origin,
      "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "content-type,x-api-key,x-auth-scheme",
    },
  });
  assert.equal(preflight.status, 200, await preflight.text());
  assert.equal(preflight.headers.get("access-control-allow-origin"), origin);
  assert.match(preflight.headers.get("access-control-allow-headers"), /x-api-key/);

  step("a review through the passthrough: JSON sent as text/plain");
  const proxied = new Client({ apiUrl: url, apiKey, callerOptions: { fetch: passthroughFetch } });
  const thread = await proxied.threads.create({ metadata: { via: "passthrough" } });
  let runId;
  const first = await proxied.runs.wait(thread.thread_id, REFUND, {
    input: { messages: [{ role: "user", content: "Refund claim CLM-4821" }] },
    onRunCreated: (run) => {
      runId = run.run_id;
    },
  });
  assert.ok(runId, "runs.wait answered no Content-Location naming its run");
  const [interrupt] = first.__interrupt__;
  assert.deepEqual(interrupt.value.allowed_decisions, ["approve", "reject"]);
  const done = await proxied.runs.wait(thread.thread_id, REFUND, {
    command: { resume: "approve" },
  });
  assert.equal(done.outcome, "refunded", JSON.stringify(done));
  const found = await proxied.threads.search({ metadata: { via: "passthrough" }, limit: 100 });
  assert.ok(found.some((t) => t.thread_id === thread.thread_id));

  step("assistants.search by graph id and metadata, with its pages");
  const [conversation] = await client.assistants.search({
    graphId: "conversation",
    metadata: { created_by: "system" },
  });
  assert.equal(conversation.assistant_id, "conversation");
  assert.equal(await client.assistants.count({ graphId: "conversation" }), 1);
  const page = await client.assistants.search({ limit: 1, includePagination: true });
  assert.equal(page.assistants.length, 1);
  assert.equal(page.next, "1");

  for (const graph of ["conversation", "outreach-email"]) {
    const expected = RECORDED[graph];
    step(`assistants.getGraph / getSchemas / getSubgraphs of ${graph}, as LangGraph answers`);
    assert.deepEqual(await client.assistants.getGraph(graph), expected.graph);
    assert.deepEqual(await client.assistants.getGraph(graph, { xray: true }), expected["graph?xray=true"]);
    assert.deepEqual(await client.assistants.getSchemas(graph), {
      ...expected.schemas,
      graph_id: graph,
    });
    assert.deepEqual(
      await client.assistants.getSubgraphs(graph, { recurse: true }),
      expected["subgraphs?recurse=true"],
    );
  }
}

main().then(
  () => console.log("connect.mjs: every check passed"),
  (error) => {
    console.error(`connect.mjs: FAILED at "${current}"\n${error?.stack ?? error}`);
    process.exit(1);
  },
);
