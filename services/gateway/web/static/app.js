// The Pending Reviews page: sign in, and the live list of suspended executions. The Review
// Request window is review-window.js; watching for changes is watch.js (watchExecution and
// watchPendingReviews); the API and the session are api.js.

import { ApiError, clearSession, listPendingReviews, loadPageConfig, loadSession, saveSession } from "./api.js";
import { closeReview, installReviewWindow, openFromHash } from "./review-window.js";
import { contextSummary } from "./summary.js";
import { describeError, el, show, suspendReason, timeEl } from "./view.js";
import { setText } from "./visible.js";
import { watchPendingReviews } from "./watch.js";

const $ = (id) => document.getElementById(id);

let stopList = () => {};

// --- signing in and out ----------------------------------------------------------------------

/** The sign-in form, with `message` as an error (a refused key) or `note` as news (signed out). */
function showSignIn(message, note) {
  stopList();
  closeReview();
  show($("loading"), false);
  show($("reviews"), false);
  show($("session-nav"), false);
  show($("sign-in"));
  $("api-key").value = "";
  setText($("sign-in-error"), message ?? "");
  show($("sign-in-error"), Boolean(message));
  $("sign-in-note").textContent = note ?? "";
  show($("sign-in-note"), Boolean(note));
  $("api-key").focus();
}

/** Fill the project and workspace the gateway suggests (in development: the development key's
 * project), unless the reviewer typed their own. The gateway never suggests a key. */
async function prefillSignIn() {
  const config = await loadPageConfig();
  for (const field of ["project", "workspace"]) {
    const input = $(field);
    if (typeof config[field] === "string" && !input.value) input.value = config[field];
  }
}

async function signIn(event) {
  event.preventDefault();
  const session = {
    key: $("api-key").value.trim(),
    project: $("project").value.trim(),
    workspace: $("workspace").value.trim(),
  };
  const button = event.submitter ?? $("sign-in-form").querySelector("button");
  button.disabled = true;
  show($("sign-in-note"), false);
  try {
    // One read proves the key, the project and the workspace before anything is kept.
    await listPendingReviews({ session });
    saveSession(session);
    $("api-key").value = "";
    showReviews();
  } catch (error) {
    setText($("sign-in-error"), describeError(error));
    show($("sign-in-error"));
  } finally {
    button.disabled = false;
  }
}

function signOut(event) {
  event.preventDefault();
  // The project and workspace stay in the form for the next sign-in; the key goes.
  const session = loadSession();
  if (session) {
    $("project").value = session.project;
    $("workspace").value = session.workspace;
  }
  clearSession();
  history.replaceState(null, "", location.pathname);
  showSignIn(null, "Signed out: this tab no longer holds the API key.");
}

// --- the list ----------------------------------------------------------------------------------

function showReviews() {
  const session = loadSession();
  show($("loading"), false);
  show($("sign-in"), false);
  show($("reviews"));
  setText($("session-label"), `${session.project} / ${session.workspace}`);
  show($("session-nav"));
  stopList();
  stopList = watchPendingReviews(renderList, (error) => {
    if (error instanceof ApiError && error.status === 401) {
      clearSession();
      showSignIn(describeError(error));
      return;
    }
    setText($("list-error"), describeError(error));
    show($("list-error"));
  });
  openFromHash();
}

function renderList(items) {
  show($("list-error"), false);
  const waiting = { 0: "Nothing waiting for a decision", 1: "1 execution waiting for a decision" };
  $("review-count").textContent = waiting[items.length] ?? `${items.length} executions waiting for a decision`;
  show($("no-reviews"), items.length === 0);
  show($("review-table"), items.length > 0);
  $("review-rows").replaceChildren(...items.map(reviewRow));
}

function reviewRow(execution) {
  const href = `#review=${encodeURIComponent(execution.execution_id)}`;
  const summary = contextSummary(execution);
  const row = el(
    "tr",
    { "data-execution-id": execution.execution_id },
    el("td", {}, el("span", { className: "agent" }, execution.agent), el("br"), el("code", { className: "id" }, execution.execution_id)),
    el("td", {}, timeEl(execution.created_at)),
    el(
      "td",
      { className: "reason-cell" },
      el("span", { className: "reason-line" }, suspendReason(execution)),
      summary ? el("span", { className: "context-summary" }, summary) : null,
    ),
    el(
      "td",
      { className: "open-cell" },
      el("a", { href, className: "button", "aria-label": `Review ${execution.agent} execution ${execution.execution_id}` }, "Review"),
    ),
  );
  // The whole row opens the review; the link stays the keyboard's (and screen reader's) way in.
  row.addEventListener("click", (event) => {
    if (!event.target.closest("a")) location.hash = href;
  });
  return row;
}

// --- start ------------------------------------------------------------------------------------

$("sign-in-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", signOut);
installReviewWindow((error) => {
  clearSession();
  showSignIn(describeError(error));
});

if (loadSession()) showReviews();
else showSignIn();
prefillSignIn().catch(() => {
  // Only a convenience: without it the reviewer types the project, as in production.
});
