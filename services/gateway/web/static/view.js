// Small DOM and wording helpers. Everything from the API is put in the page as text nodes
// (never innerHTML): agent output and reviewer notes are untrusted. Text children go through
// visible.js, so invisible characters in them show as <U+XXXX> tokens.

import { visibleNodes } from "./visible.js";

/** `el("p", {className: "x"}, "text", child)`: an element with properties and children. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("data-") || name.startsWith("aria-") || name === "for") {
      node.setAttribute(name, value === true ? "" : String(value));
    } else {
      node[name] = value;
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(...(child instanceof Node ? [child] : visibleNodes(String(child))));
  }
  return node;
}

export function show(node, visible = true) {
  node.hidden = !visible;
}

/** A context value as one reads it: strings as they are, anything else as indented JSON. */
export function plain(value, indent = 0) {
  return typeof value === "string" ? value : JSON.stringify(value, null, indent);
}

const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** A <time> element in the reader's locale and zone; the ISO stamp stays in its datetime. */
export function timeEl(iso) {
  if (!iso) return el("span", { className: "muted" }, "—");
  return el("time", { dateTime: iso, title: iso }, TIME_FORMAT.format(new Date(iso)));
}

export function statusEl(status) {
  return el("span", { className: `status status-${status}` }, status);
}

/** The actions a LangChain middleware suspension asks about, across its pending interrupts. */
export function pendingActions(execution) {
  return (execution.reviews ?? []).filter((r) => r.kind === "actions").flatMap((r) => r.actions ?? []);
}

export const REASON_KEYS = ["task_description", "reason", "description", "question", "message"];

/** Why the execution waits, in one line: the agent's own words where it gave some. */
export function suspendReason(execution) {
  const actions = pendingActions(execution);
  if (actions.length) {
    const counts = new Map();
    for (const action of actions) counts.set(action.name, (counts.get(action.name) ?? 0) + 1);
    const names = [...counts].map(([name, n]) => (n > 1 ? `${name} ×${n}` : name)).join(", ");
    return `${actions.length} tool call${actions.length > 1 ? "s" : ""} to review: ${names}`;
  }
  const context = execution.suspend_context ?? {};
  for (const key of REASON_KEYS) {
    if (typeof context[key] === "string" && context[key].trim()) return context[key];
  }
  if (Array.isArray(context.interrupts)) return `${context.interrupts.length} interrupts to review`;
  return "Waiting for a decision";
}

/** The suspend context as a reviewer reads it; allowed_decisions shows as the choices instead. */
export function contextItems(execution) {
  const context = execution.suspend_context ?? {};
  return Object.entries(context).filter(([key]) => key !== "allowed_decisions");
}

/** What the execution started with: the message, or each message of the conversation. */
export function inputMessages(execution) {
  const input = execution.input ?? {};
  if (input.message !== null && input.message !== undefined) return [{ role: "user", content: input.message }];
  return input.messages ?? [];
}

/** The agent's last words: its last assistant message with text, else its `outcome`. */
export function agentOutput(execution) {
  const result = execution.result;
  if (result === null || result === undefined) return null;
  if (typeof result !== "object" || Array.isArray(result)) return plain(result);
  for (const message of [...(result.messages ?? [])].reverse()) {
    if (message && message.role === "assistant" && message.content) return String(message.content);
  }
  return result.outcome === undefined || result.outcome === null ? null : String(result.outcome);
}

const HINTS_BY_STATUS = {
  0: "Check that the gateway is running, then try again.",
  // Said on the sign-in form: the page forgets a key the gateway refuses and asks for another.
  401: "Check the API key and sign in again (`interlock keys create` makes one).",
  404: "Check the project and workspace, and that this key may see them.",
  429: "Too many requests: wait a moment and try again.",
  503: "A backing service is down: try again in a moment.",
};
const MOVED_ON = "The execution changed since this window opened; it now shows its current state.";
const HINTS_BY_PROBLEM = {
  "stale-generation": MOVED_ON,
  "not-suspended": MOVED_ON,
  "decision-conflict": MOVED_ON,
};

/** An ApiError in words (the problem's title and detail), with what the reviewer can do. */
export function describeError(error) {
  if (!error.title) return String(error.message ?? error);
  const slug = String(error.body?.type ?? "").split("/").pop();
  const hint = HINTS_BY_PROBLEM[slug] ?? HINTS_BY_STATUS[error.status];
  const words = `${error.title}: ${error.detail}`.replace(/[.\s]+$/, "");
  return hint ? `${words}. ${hint}` : `${words}.`;
}
