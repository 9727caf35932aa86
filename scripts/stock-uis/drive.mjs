// Drives LangChain's stock Agent Chat UI and Agent Inbox (unpatched, running on this machine)
// against Interlock in headless Chromium, and saves a screenshot of each step. The procedure
// (fetching and starting the UIs, starting `interlock dev`) is in README.md beside this file.
//
//   node drive.mjs chat-direct   # Agent Chat UI at :3000 -> Interlock directly (CORS)
//   node drive.mjs chat-proxy    # Agent Chat UI at :3000 -> its /api passthrough -> Interlock
//   node drive.mjs inbox         # Agent Inbox at :3001 -> Interlock directly (CORS)
//
// Settings (environment): INTERLOCK_LANGGRAPH_URL (a workspace's LangGraph root, default the
// dev server's demo/default), INTERLOCK_API_KEY (default the dev key), CHAT_UI_URL, INBOX_URL,
// CHROMIUM (default /usr/bin/chromium), SHOTS (the screenshot folder, default ./shots).
//
// Exits 0 when every step showed what it should and no request the UI made failed (HTTP >= 400
// or a network error) and no error reached the browser's console; otherwise 1, naming the step.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const LANGGRAPH_URL =
  process.env.INTERLOCK_LANGGRAPH_URL ??
  "http://127.0.0.1:8000/langgraph/projects/demo/workspaces/default";
const API_KEY =
  process.env.INTERLOCK_API_KEY ?? "ilk_00000000000000de_development-key-not-for-production-use-000";
const CHAT_UI_URL = process.env.CHAT_UI_URL ?? "http://localhost:3000";
const INBOX_URL = process.env.INBOX_URL ?? "http://localhost:3001";
const SHOTS = process.env.SHOTS ?? "shots";
const STEP_MS = Number(process.env.STEP_MS ?? 90_000);

const scenario = process.argv[2];
let current = "starting";
const failures = [];

function step(name) {
  current = name;
  console.log(`- ${name}`);
}

async function shot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${scenario}-${name}.png`);
  await page.screenshot({ path, fullPage: false });
  console.log(`  saved ${path}`);
}

/** A page that records every failed request and console error, for the verdict at the end. */
async function opened(browser, init) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  if (init) await context.addInitScript(init.script, init.arg);
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on("response", (response) => {
    const url = response.url();
    if (response.status() >= 400 && !url.includes("/_next/")) {
      failures.push(`${current}: ${response.request().method()} ${url} -> ${response.status()}`);
    }
  });
  page.on("requestfailed", (request) => {
    const url = request.url();
    // Google Fonts cannot be reached from this machine (the UIs fall back to system fonts); a
    // stream the UI aborts on purpose is not a failure either.
    const why = request.failure()?.errorText;
    if (url.includes("fonts.g") || why === "net::ERR_ABORTED") return;
    failures.push(`${current}: ${request.method()} ${url} failed: ${why}`);
  });
  page.on("console", (message) => {
    const text = message.text();
    // React's development warning about the UI's own markup (Agent Chat UI's clip-path).
    const markup = text.startsWith("Invalid DOM property");
    // A host off this machine (the UIs' fonts and links): the request itself is judged above.
    const offline = text.includes("net::ERR_NAME_NOT_RESOLVED");
    if (message.type() === "error" && !text.includes("fonts.g") && !markup && !offline) {
      failures.push(`${current}: console error: ${text}`);
    }
  });
  return page;
}

// --- Agent Chat UI ----------------------------------------------------------------------------

async function chat(browser, direct) {
  const apiUrl = direct ? LANGGRAPH_URL : `${CHAT_UI_URL}/api`;
  const page = await opened(
    browser,
    // Direct, the key is what a person pastes into the UI's setup form (kept in localStorage);
    // through the passthrough, the Next server adds it (LANGSMITH_API_KEY).
    direct
      ? { script: (key) => window.localStorage.setItem("lg:chat:apiKey", key), arg: API_KEY }
      : undefined,
  );
  const assistant = "outreach-email";
  step("open the UI on the assistant");
  await page.goto(`${CHAT_UI_URL}/?apiUrl=${encodeURIComponent(apiUrl)}&assistantId=${assistant}`);
  const composer = page.getByPlaceholder("Type your message...");
  await composer.waitFor();

  step("the first message waits for a review");
  await composer.fill("send an email");
  await composer.press("Enter");
  await page.getByRole("button", { name: "Approve", exact: true }).first().waitFor();
  await page.getByText("send an email").first().waitFor();
  await shot(page, "1-review");
  // The UI's own check of the server (GET /info) toasts this when it fails.
  if (await page.getByText("Failed to connect to LangGraph server").count()) {
    throw new Error("the UI says it failed to connect to the server");
  }

  step("approve");
  await page.getByRole("button", { name: "Approve", exact: true }).first().click();
  await page.getByText(/Sent/).first().waitFor();
  await idle(page);
  await shot(page, "2-approved");

  step("a second message on the thread, reviewed and approved");
  await composer.fill("send another email");
  await composer.press("Enter");
  await page.getByRole("button", { name: "Approve", exact: true }).first().waitFor();
  await page.getByRole("button", { name: "Approve", exact: true }).first().click();
  await page.getByText(/Sent/).nth(1).waitFor();
  await idle(page);
  await shot(page, "3-second-message");

  step("reload, the thread list open: the history comes back, the thread is listed");
  const threadUrl = page.url();
  if (!threadUrl.includes("threadId=")) throw new Error(`no threadId in the URL: ${threadUrl}`);
  // The list's toggle sets ?chatHistoryOpen=true: loaded so, the page opens with it.
  await page.goto(`${threadUrl}&chatHistoryOpen=true`);
  await page.getByRole("button", { name: "send an email" }).first().waitFor();
  await page.getByText("send another email").first().waitFor();
  await page.getByText(/Sent/).nth(1).waitFor();
  await idle(page);
  await shot(page, "4-reloaded");
  await page.context().close();
}

/** The UI is not loading any more (no stream open). */
async function idle(page) {
  await page.waitForLoadState("networkidle");
}

// --- Agent Inbox -----------------------------------------------------------------------------

async function inbox(browser) {
  const page = await opened(browser);
  const to = `inbox-${Date.now()}@example.com`;

  step("set the key and add the inbox in the UI's own settings, as a person does");
  await page.goto(`${INBOX_URL}/`);
  // With no inbox yet, the inbox reloads itself a few times, then opens its "add" dialog: it is
  // closed to set the key first (a click retries across the reloads).
  await page.getByRole("button", { name: "Cancel" }).click();
  await page.getByRole("button", { name: "Settings" }).click();
  await page.locator("#langchain-api-key").fill(API_KEY);
  await page.keyboard.press("Escape");
  await page.getByRole("button", { name: "Add Inbox" }).first().click();
  await page.locator("#graph-id").fill("inbox-email");
  await page.locator("#deployment-url").fill(LANGGRAPH_URL);
  await page.locator("#name").fill("Interlock");
  await page.locator("form").getByRole("button", { name: "Add Inbox" }).click();
  // Until the inbox is opened on its own URL (its id in ?agent_inbox=, where its sidebar entry
  // leads) the page keeps reloading itself, against LangGraph's own server too, faster than a
  // click lands: the inbox the UI stored is opened by that URL instead.
  const stored = await until("the stored inbox", () =>
    page.evaluate(() => localStorage.getItem("inbox:agent_inboxes")).catch(() => undefined),
  );
  const [{ id }] = JSON.parse(stored);
  await page.goto(`${INBOX_URL}/?agent_inbox=${id}&offset=0&limit=10&inbox=interrupted`);
  await page.waitForLoadState("networkidle");

  step("five threads wait for a person (started through the API, as an application would)");
  const threads = {};
  for (const answer of ["accept", "edit", "respond", "ignore", "resolve"]) {
    threads[answer] = await waitingThread(`reply to ${answer}-${to}`);
  }

  step("the interrupted inbox lists them, each with its action and description");
  await page.reload();
  for (const answer of Object.keys(threads)) {
    await page.getByText(`Send this email to ${answer}-${to}?`).first().waitFor();
  }
  await shot(page, "1-interrupted");
  // Opening a thread is where Agent Inbox f38301b stops, against LangGraph's own server as much
  // as against Interlock (README.md here); the answers it sends from there are replayed with its
  // own client version by tests/js/stock-uis.mjs instead.
  await page.context().close();
}

async function until(what, read) {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`waited ${STEP_MS} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}


async function api(path, init = {}) {
  const headers = { "content-type": "application/json", "x-api-key": API_KEY };
  const answer = await fetch(`${LANGGRAPH_URL}${path}`, { ...init, headers });
  if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await answer.text()}`);
  return answer.json();
}

/** A new thread of inbox-email waiting for a person, started over the LangGraph API. */
async function waitingThread(text) {
  const { thread_id: threadId } = await api("/threads", { method: "POST", body: "{}" });
  const input = { messages: [{ type: "human", content: text }] };
  await api(`/threads/${threadId}/runs/wait`, {
    method: "POST",
    body: JSON.stringify({ assistant_id: "inbox-email", input }),
  });
  return threadId;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  if (scenario === "chat-direct") await chat(browser, true);
  else if (scenario === "chat-proxy") await chat(browser, false);
  else if (scenario === "inbox") await inbox(browser);
  else throw new Error(`name a scenario: chat-direct, chat-proxy or inbox (got ${scenario})`);
} catch (error) {
  failures.push(`${current}: ${error?.stack ?? error}`);
} finally {
  await browser.close();
}
if (failures.length) {
  console.error(`drive.mjs ${scenario}: FAILED\n${failures.join("\n")}`);
  process.exit(1);
}
console.log(`drive.mjs ${scenario}: every step passed`);
