// One line of context per pending review, for triage in the list: what the agent wants to do
// (a tool and its main argument) or what it is about (the first few plain facts it gave).

import { pendingActions, REASON_KEYS } from "./view.js";

const MAX_VALUE = 60;
const MAX_LINE = 160;
const MAX_FACTS = 3;
const MAX_ACTIONS = 3;
// Already the row's suspend reason, or the decision list rather than a fact of the case.
const NOT_FACTS = new Set([...REASON_KEYS, "allowed_decisions", "interrupts"]);

function truncate(text, max) {
  // Not \s nor trim(), which also take U+FEFF and U+2028 that the page must show. By code
  // point, so a cut never splits a character in two.
  const flat = [...String(text).replace(/[ \t\n]+/g, " ").replace(/^ | $/g, "")];
  return flat.length > max ? `${flat.slice(0, max - 1).join("")}…` : flat.join("");
}

function isScalar(value) {
  return ["string", "number", "boolean"].includes(typeof value) && /[^ \t\n]/.test(String(value));
}

/** The argument a reviewer recognises a call by: its first plain one, as `name: value`. */
function mainArgument(args) {
  const found = Object.entries(args ?? {}).find(([, value]) => isScalar(value));
  return found ? `${found[0]}: ${truncate(found[1], MAX_VALUE)}` : "";
}

function actionSummary(actions) {
  const shown = actions.slice(0, MAX_ACTIONS).map((action) => {
    const argument = mainArgument(action.args);
    return argument ? `${action.name} (${argument})` : action.name;
  });
  const more = actions.length - shown.length;
  return more > 0 ? `${shown.join("; ")}; and ${more} more` : shown.join("; ");
}

function factSummary(context) {
  return Object.entries(context)
    .filter(([key, value]) => !NOT_FACTS.has(key) && isScalar(value))
    .slice(0, MAX_FACTS)
    .map(([key, value]) => `${key}: ${truncate(value, MAX_VALUE)}`)
    .join(" · ");
}

/** The execution's context in one line (empty when it gave none worth a line). */
export function contextSummary(execution) {
  const actions = pendingActions(execution);
  const line = actions.length ? actionSummary(actions) : factSummary(execution.suspend_context ?? {});
  return truncate(line, MAX_LINE);
}
