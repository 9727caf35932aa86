// The Review Request window: what a suspended execution asks, the decision form, and after a
// submit the execution's live status until it ends. Opened by the URL's #review=<execution id>
// (the list's links set it, so a notification can link straight to one review).

import { ApiError, loadSession, submitDecision } from "./api.js";
import { decisionLines, endHeadline, endInWords, stepInWords } from "./outcome.js";
import { FieldError, renderDecisionFields, showFieldError } from "./review-form.js";
import {
  agentOutput,
  contextItems,
  describeError,
  el,
  inputMessages,
  pendingActions,
  plain,
  show,
  statusEl,
  suspendReason,
  timeEl,
} from "./view.js";
import { setText } from "./visible.js";
import { watchExecution } from "./watch.js";

const $ = (id) => document.getElementById(id);
const REVIEW_HASH = /^#review=(.+)$/;
const TERMINAL = new Set(["completed", "error", "cancelled", "expired"]);

let onUnauthorized = () => {};

/** Wire the window's controls; `unauthorized(error)` is called when the key stops working. */
export function installReviewWindow(unauthorized) {
  onUnauthorized = unauthorized;
  $("decision-form").addEventListener("submit", submit);
  $("close-review").addEventListener("click", () => $("review-dialog").close());
  $("review-dialog").addEventListener("close", onDialogClosed);
  window.addEventListener("hashchange", openFromHash);
}

/** The window's state: which execution, the suspension its form shows, and once an answer was
 * sent, what became of it ("Decision submitted", or an approval that waits for more owners);
 * `asked` keeps each suspension's reviews seen here, to name the tool calls in its outcome. */
let review = null;

/** Open the window on the execution the URL names, or close it when the URL names none. */
export function openFromHash() {
  const match = REVIEW_HASH.exec(location.hash);
  if (!match || !loadSession()) {
    closeReview();
    return;
  }
  const executionId = decodeURIComponent(match[1]);
  if (review?.executionId === executionId) return;
  review?.stop();
  review = {
    executionId,
    shown: null,
    submitted: null,
    readBody: null,
    ended: false,
    asked: new Map(),
    stop: () => {},
  };
  for (const id of ["review-content", "review-error", "progress", "progress-activity"]) {
    show($(id), false);
  }
  $("progress-activity").dataset.tokens = "";
  show($("review-loading"));
  const dialog = $("review-dialog");
  if (!dialog.open) dialog.showModal();
  const current = review;
  review.stop = watchExecution(
    executionId,
    (execution) => current === review && onExecution(execution),
    (error) => current === review && onWatchError(error),
    (kind, data) => current === review && onActivity(kind, data),
  );
}

/** What the agent is doing now, from the stream: the step it finished, or the words it is
 * writing (the last 200 characters, so a long answer does not grow the window). Once the
 * execution has ended the line says so, and late events no longer change it. */
function onActivity(kind, data) {
  if (review.ended) return;
  const line = $("progress-activity");
  if (kind === "update") {
    const step = stepInWords(data.node);
    if (step === null) return; // a middleware hook or LangGraph's own: nothing a reviewer asked
    setText(line, step);
  } else if (kind === "token") {
    const text = (line.dataset.tokens ?? "") + data.text;
    line.dataset.tokens = text.slice(-200);
    setText(line, `Agent: ${line.dataset.tokens}`);
  }
  show(line);
}

export function closeReview() {
  // Stop watching now, not when the close event comes: after a sign-out, a read in between
  // would find no key and report it.
  forgetReview();
  const dialog = $("review-dialog");
  if (dialog.open) dialog.close();
}

function forgetReview() {
  review?.stop();
  review = null;
}

function onDialogClosed() {
  // Esc, the close button, the back button or signing out: forget the execution and take it
  // out of the URL. The close event comes a task later; the window may have reopened since.
  if ($("review-dialog").open) return;
  forgetReview();
  if (REVIEW_HASH.test(location.hash)) history.replaceState(null, "", location.pathname);
}

function onWatchError(error) {
  if (error instanceof ApiError && error.status === 401) {
    onUnauthorized(error);
    return;
  }
  show($("review-loading"), false);
  setText($("review-error"), describeError(error));
  show($("review-error"));
}

/** Same question as the CLI's moved_on: does the execution now wait on another suspension
 * than the one the form shows? Until the orchestrator applies a decision, the gateway still
 * shows the answered suspension. */
function askedAnew(shown, execution) {
  return (
    execution.status === "suspended" &&
    (shown === null ||
      shown.generation !== execution.generation ||
      JSON.stringify(shown.reviews) !== JSON.stringify(execution.reviews))
  );
}

function onExecution(execution) {
  show($("review-loading"), false);
  show($("review-error"), false);
  show($("review-content"));
  if (execution.status === "suspended") review.asked.set(execution.suspension_id, execution.reviews ?? []);
  if (askedAnew(review.shown, execution)) {
    const again = review.submitted !== null;
    review.shown = execution;
    review.submitted = null;
    renderRequest(execution);
    review.readBody = renderDecisionFields($("decision-fields"), execution);
    show($("decision-form"));
    show($("submit-error"), false);
    show($("progress"), again);
    if (again) progress("The agent asks for another review", execution);
    return;
  }
  if (review.shown === null) {
    // Opened after it stopped waiting (a stale link, or another reviewer was quicker).
    review.shown = execution;
    renderRequest(execution);
  }
  if (execution.status !== "suspended" || review.submitted !== null) {
    show($("decision-form"), false);
    show($("progress"));
    progress(progressTitle(review.submitted, execution), execution);
  }
}

function progressTitle(submitted, execution) {
  if (submitted === null) return "This execution is not waiting for a review";
  // An approval that waited for other owners: it is over once the execution moves on.
  if (!submitted.accepted && execution.status !== "suspended") return "The review was decided";
  return submitted.title;
}

function renderRequest(execution) {
  $("review-facts").replaceChildren(
    ...fact("Execution ID", el("code", { id: "review-execution-id" }, execution.execution_id)),
    ...fact("Agent", execution.agent),
    ...fact("Submitted", timeEl(execution.created_at)),
    ...fact("Suspended", timeEl(execution.suspended_at)),
  );
  $("review-message").replaceChildren(
    ...inputMessages(execution).map((m) =>
      el("blockquote", {}, m.role === "user" ? null : el("span", { className: "role" }, `${m.role}: `), plain(m.content, 2)),
    ),
  );
  // A later turn of a session: what the earlier turns said, as the agent saw them.
  const conversation = execution.conversation ?? [];
  show($("review-conversation-section"), conversation.length > 0);
  setText($("review-conversation-title"), `The conversation so far (turn ${execution.turn ?? 1} of session ${execution.session_id ?? ""})`);
  $("review-conversation").replaceChildren(
    ...conversation.map((m) => el("blockquote", {}, el("span", { className: "role" }, `${m.role}: `), plain(m.content, 2))),
  );
  setText($("review-reason"), execution.status === "suspended" ? suspendReason(execution) : "—");
  const context = execution.suspend_context;
  show($("review-context-section"), Boolean(context));
  if (context) {
    // Tool calls are shown with their decision controls; the raw context still has them.
    const items = pendingActions(execution).length ? [] : contextItems(execution);
    $("review-context").replaceChildren(...items.flatMap(([key, value]) => fact(key, plain(value, 2))));
    show($("review-context"), items.length > 0);
    setText($("review-context-raw"), JSON.stringify(context, null, 2));
  }
}

function fact(term, ...value) {
  return [el("dt", {}, term), el("dd", {}, ...value)];
}

function progress(title, execution) {
  $("progress-title").textContent = title;
  // An accepted decision leaves the execution shown as suspended until the orchestrator
  // applies it: say what is happening rather than what was.
  const applying = review?.submitted?.accepted && execution.status === "suspended";
  $("progress-status").replaceChildren(statusEl(applying ? "resuming" : execution.status));
  const ended = TERMINAL.has(execution.status);
  if (ended) {
    review.ended = true;
    const line = $("progress-activity");
    setText(line, endInWords(execution.status));
    show(line);
  }
  $("outcome").replaceChildren(...(ended ? outcomeNodes(execution) : []));
  show($("outcome"), ended);
}

/** How it ended, what each review decided, and the agent's last words. */
function outcomeNodes(execution) {
  const decided = decisionLines(execution, (record) => askedActionNames(record));
  const nodes = [
    el("h3", {}, "Outcome"),
    el("p", { className: execution.status === "error" ? "error" : "outcome-headline" }, endHeadline(execution)),
  ];
  if (decided.length) {
    nodes.push(
      el("h3", {}, "Decisions"),
      el(
        "ul",
        { className: "decision-lines" },
        decided.map(({ headline, details }) =>
          el("li", {}, headline, details.length ? el("ul", {}, details.map((line) => el("li", {}, line))) : null),
        ),
      ),
    );
  }
  const output = agentOutput(execution);
  if (output !== null) {
    // After tool-call reviews the agent's last message may quote what LangChain wrote to it
    // for each call (its text for a rejection): the decisions above say it in words, so the
    // message is there on request.
    const quotesToolResults = (execution.decisions ?? []).some((record) => record.decisions);
    const message = el("p", { className: "output" }, output);
    nodes.push(
      quotesToolResults
        ? el("details", { className: "agent-message" }, el("summary", {}, "The agent's last message"), message)
        : el("div", { className: "agent-message" }, el("h3", {}, "The agent's answer"), message),
    );
  }
  return nodes;
}

/** The tool calls a decision record answered, by name, as this window saw them asked. */
function askedActionNames(record) {
  const reviews = review?.asked.get(record.suspension_id) ?? [];
  const answered = reviews.find((r) => r.interrupt_id === record.interrupt_id) ?? (reviews.length === 1 ? reviews[0] : null);
  return (answered?.actions ?? []).map((action) => action.name);
}

async function submit(event) {
  event.preventDefault();
  if (!review?.readBody) return;
  const current = review;
  show($("submit-error"), false);
  let body;
  try {
    body = current.readBody();
  } catch (error) {
    if (error instanceof FieldError) {
      showFieldError(error);
      return;
    }
    throw error;
  }
  const button = $("submit-decision");
  button.disabled = true;
  try {
    const accepted = await submitDecision(current.executionId, body);
    if (current !== review) return;
    const waiting = accepted.status === "awaiting_approvals";
    const count = accepted.approvals?.length ?? 0;
    current.submitted = {
      accepted: !waiting,
      title: waiting
        ? `Approval recorded (${count} of ${accepted.approvals_required}): the execution stays suspended until enough owners give the same answer`
        : "Decision submitted",
    };
    show($("decision-form"), false);
    show($("progress"));
    progress(current.submitted.title, current.shown);
  } catch (error) {
    if (current !== review) return;
    setText($("submit-error"), describeError(error));
    show($("submit-error"));
  } finally {
    button.disabled = false;
  }
}
