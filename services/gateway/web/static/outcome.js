// What became of an execution, in a reviewer's words: its progress while it runs, how it ended,
// and what each review decided. Read from the API's structured fields (status, error, the
// decision records); never from what LangChain writes to the model, such as the tool message it
// puts in place of a rejected call.

const END_IN_WORDS = {
  completed: "Finished: the execution completed.",
  error: "Stopped: the execution failed.",
  cancelled: "Stopped: the execution was cancelled.",
  expired: "Stopped: nobody reviewed it before its deadline, so it expired.",
};

const STEPS_IN_WORDS = {
  model: "The agent's model answered",
  agent: "The agent's model answered",
  tools: "The agent ran its tool calls",
};

/** The live window's line for an execution that has ended, or null while it runs. */
export function endInWords(status) {
  return END_IN_WORDS[status] ?? null;
}

/** The live window's line for a finished step, or null for a step nobody reviews: LangGraph's
 * own (__start__) and middleware hooks (HumanInTheLoopMiddleware.after_model). */
export function stepInWords(node) {
  const name = String(node ?? "");
  if (!name || name.startsWith("__") || name.includes("Middleware.")) return null;
  return STEPS_IN_WORDS[name] ?? `Agent finished step: ${name}`;
}

/** The outcome's headline: how the execution ended. */
export function endHeadline(execution) {
  switch (execution.status) {
    case "completed":
      return "Completed";
    case "error": {
      const error = execution.error ?? {};
      const why = error.message || error.error_type;
      return why ? `Failed: ${why}` : "Failed";
    }
    case "cancelled":
      return "Cancelled";
    case "expired":
      return "Expired: nobody reviewed it before its deadline";
    default:
      return null;
  }
}

const VERDICTS = { approve: "Approved", reject: "Rejected" };
const DEADLINES = "system:deadlines";

function who(record) {
  if (record.reviewer === DEADLINES) return "the deadline";
  const approvers = record.approvers ?? [];
  if (approvers.length > 1) return approvers.join(" and ");
  return record.reviewer ?? "an outside producer";
}

/** Each decision record as lines of words: who decided what, then per tool call what it ran
 * with, and the reviewer's notes. `actionNames(record)` names the calls where known. */
export function decisionLines(execution, actionNames = () => []) {
  return (execution.decisions ?? []).map((record) => {
    if (!record.decisions) {
      const verdict = VERDICTS[record.decision] ?? `Decided "${record.decision}"`;
      return { headline: `${verdict} by ${who(record)}`, details: notes(record) };
    }
    const names = actionNames(record);
    const edits = new Map((record.edits ?? []).map((edit) => [edit.position, edit]));
    const details = record.decisions.map((decision, index) => {
      const position = index + 1;
      const edit = edits.get(position);
      const name = edit?.before?.name ?? names[index];
      const call = name ? `${name} (call ${position})` : `Call ${position}`;
      return `${call}: ${actionInWords(decision, edit)}`;
    });
    return { headline: `Tool calls reviewed by ${who(record)}`, details: [...details, ...notes(record)] };
  });
}

function notes(record) {
  return record.reviewer_notes ? [`Reviewer notes: ${record.reviewer_notes}`] : [];
}

function actionInWords(decision, edit) {
  switch (decision.type) {
    case "approve":
      return "approved";
    case "edit":
      return `edited arguments: ${editInWords(edit?.before, decision.edited_action)}`;
    case "reject":
      return decision.message ? `rejected: ${decision.message}` : "rejected";
    case "respond":
      return `answered instead of running: ${decision.message ?? ""}`;
    default:
      return decision.type;
  }
}

/** What an edit changed: `to: a@x → b@x`, argument by argument (and the tool, if renamed). */
function editInWords(before, after) {
  if (!after) return "changed";
  const changes = [];
  if (before && before.name !== after.name) changes.push(`tool ${before.name} → ${after.name}`);
  const old = before?.args ?? {};
  const now = after.args ?? {};
  for (const key of new Set([...Object.keys(old), ...Object.keys(now)])) {
    const was = JSON.stringify(old[key]);
    const is = JSON.stringify(now[key]);
    if (was === is) continue;
    if (!(key in now)) changes.push(`${key} removed`);
    else if (!(key in old)) changes.push(`${key}: ${argument(now[key])} (added)`);
    else changes.push(`${key}: ${argument(old[key])} → ${argument(now[key])}`);
  }
  return changes.length ? changes.join("; ") : "unchanged";
}

function argument(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}
