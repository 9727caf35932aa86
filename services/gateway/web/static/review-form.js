// The decision part of the Review Request window: the controls for what the pending
// suspension asks, and the resume body they make. The body follows the CLI's inline review
// (interlock/client/review.py) exactly, so both reviewer surfaces send the same answers:
//
//   an agent's own interrupt (Atlas):  {"decision": "approve", "reviewer_notes": "..."}
//   one that declares no decisions:    {"resume": <the value interrupt() returns>}
//   LangChain middleware actions:      {"decisions": [{"type": "approve"},
//                                        {"type": "edit", "edited_action": {"name", "args"}},
//                                        {"type": "reject", "message": "..."},
//                                        {"type": "respond", "message": "..."}]}
//
// plus "generation" (guards against answering a suspension that moved on) and, when several
// interrupts are pending, the "interrupt_id" of the first, which is the one answered.

import { el } from "./view.js";
import { editableJson, setText } from "./visible.js";

/** A value the reviewer must fix before anything is sent; `field` is the control to focus. */
export class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

/** Fill `container` with the controls for the execution's pending review. Returns readBody(),
 * which returns the resume body or throws FieldError (shown next to the field). */
export function renderDecisionFields(container, execution) {
  const reviews = execution.reviews ?? [];
  const review = reviews[0] ?? { kind: "decision" };
  container.replaceChildren();
  if (reviews.length > 1) {
    container.append(
      el(
        "p",
        { className: "note" },
        `${reviews.length} reviews are pending; this answers the first. The next one appears here once it is submitted.`,
      ),
    );
  }
  const readAnswer =
    review.kind === "actions" ? actionControls(container, review) : decisionControl(container, execution, review);
  const notes = labelled(
    el("textarea", { id: "reviewer-notes", name: "reviewer_notes", rows: 3, maxLength: 10000 }),
    "Reviewer Notes",
    "Optional. Recorded with the decision in the audit trail; the agent receives them too.",
  );
  container.append(notes.wrapper);
  return () => {
    clearErrors(container);
    const body = readAnswer();
    const text = notes.control.value.trim();
    if (text) body.reviewer_notes = text;
    if (execution.generation !== null && execution.generation !== undefined) {
      body.generation = execution.generation;
    }
    if (reviews.length > 1) body.interrupt_id = review.interrupt_id;
    return body;
  };
}

/** Show `error` next to its field and move the focus there. */
export function showFieldError(error) {
  const message = document.getElementById(`${error.field.id}-error`);
  setText(message, error.message);
  message.hidden = false;
  error.field.setAttribute("aria-invalid", "true");
  error.field.focus();
}

function clearErrors(container) {
  for (const field of container.querySelectorAll("[aria-invalid]")) field.removeAttribute("aria-invalid");
  for (const message of container.querySelectorAll(".field-error")) message.hidden = true;
}

// --- one decision (an agent's own interrupt) ----------------------------------------------------

function decisionControl(container, execution, review) {
  const choices = review.allowed_decisions?.length ? review.allowed_decisions : (execution.allowed_decisions ?? []);
  if (!choices.length) return answerControl(container, review);
  const select = choiceList("decision", choices, "Choose a decision…");
  container.append(labelled(select, "Decision").wrapper);
  return () => ({ decision: required(select, "Choose a decision.") });
}

// --- any value (an interrupt that declares no decisions) --------------------------------------

// The agent declared no decisions: interrupt() returns whatever is sent ({"resume": value}, as
// LangGraph's Command(resume=...)). JSON is sent as the value it spells (true, 30, {...}); any
// other text as that text. The answer_schema the interrupt may declare is shown, and checked by
// the gateway, which names what does not fit.
function answerControl(container, review) {
  const hint = review.answer_schema
    ? `JSON the agent checks against: ${JSON.stringify(review.answer_schema)}`
    : "JSON (true, 30, {\"key\": \"value\"}) is sent as that value; other text as text.";
  const answer = labelled(
    el("textarea", { id: "resume", name: "resume", rows: 5, maxLength: 100000, spellcheck: false }),
    "Answer",
    hint,
  );
  if (review.answer_schema?.properties) {
    // A starting point: the object's keys, so the reviewer fills in values.
    const keys = Object.keys(review.answer_schema.properties);
    answer.control.value = JSON.stringify(Object.fromEntries(keys.map((key) => [key, ""])), null, 2);
  }
  container.append(answer.wrapper);
  return () => {
    const text = required(answer.control, "Type the answer.");
    try {
      return { resume: JSON.parse(text) };
    } catch {
      if (review.answer_schema) throw new FieldError(answer.control, "The answer must be JSON.");
      return { resume: text };
    }
  };
}

// --- one decision per tool call (LangChain's HumanInTheLoopMiddleware) -------------------------

function actionControls(container, review) {
  const actions = review.actions ?? [];
  const readers = actions.map((action, index) => {
    const fieldset = el("fieldset", { className: "action" });
    container.append(fieldset);
    return actionControl(fieldset, action, index + 1, actions.length);
  });
  return () => ({ decisions: readers.map((read) => read()) });
}

function actionControl(fieldset, action, position, total) {
  const id = `action-${position}`;
  fieldset.append(
    el("legend", {}, `Action ${position} of ${total}: `, el("code", {}, action.name)),
    action.description ? el("p", { className: "action-description" }, action.description) : null,
    el("p", { className: "label" }, "Arguments"),
    el("pre", { className: "json" }, JSON.stringify(action.args ?? {}, null, 2)),
  );
  const select = choiceList(`${id}-decision`, action.allowed_decisions ?? [], "Choose a decision…");
  const args = labelled(
    el("textarea", {
      id: `${id}-args`,
      rows: 6,
      spellcheck: false,
      className: "code",
      value: editableJson(action.args ?? {}),
    }),
    "Edited arguments (JSON)",
    "The call runs with these arguments instead.",
  );
  const message = labelled(el("textarea", { id: `${id}-message`, rows: 2, maxLength: 100000 }), "Message");
  fieldset.append(labelled(select, `Decision for action ${position} (${action.name})`).wrapper, args.wrapper, message.wrapper);

  const messageLabel = message.wrapper.querySelector("label");
  const sync = () => {
    args.wrapper.hidden = select.value !== "edit";
    message.wrapper.hidden = !["reject", "respond"].includes(select.value);
    messageLabel.textContent =
      select.value === "respond" ? "Response (becomes the tool's result)" : "Message for the agent (optional)";
  };
  select.addEventListener("change", sync);
  sync();

  return () => {
    const type = required(select, "Choose a decision for this action.");
    if (type === "edit") {
      return { type, edited_action: { name: action.name, args: parseArgs(args.control, action) } };
    }
    if (type === "respond") {
      return { type, message: required(message.control, "Write the response: it becomes the tool's result.") };
    }
    if (type === "reject") {
      const text = message.control.value.trim();
      return text ? { type, message: text } : { type };
    }
    return { type };
  };
}

/** Edited args as a JSON object that fits the tool's schema where the gateway gave one: a typo
 * is caught here, not as a 400 after the fact. */
function parseArgs(control, action) {
  let args;
  try {
    args = JSON.parse(control.value);
  } catch (error) {
    throw new FieldError(control, `Invalid JSON: ${error.message}`);
  }
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    throw new FieldError(control, "Invalid JSON: the arguments must be a JSON object");
  }
  const problem = action.args_schema ? schemaProblem(args, action.args_schema) : null;
  if (problem) throw new FieldError(control, `Invalid arguments for ${action.name}: ${problem}`);
  return args;
}

const JSON_TYPES = {
  string: (v) => typeof v === "string",
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === "number",
  boolean: (v) => typeof v === "boolean",
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  array: (v) => Array.isArray(v),
  null: (v) => v === null,
};

// The top level of a JSON schema only (required keys, property types, extra keys): enough for
// the typos a reviewer makes; the gateway checks the whole schema on submit anyway.
function schemaProblem(args, schema) {
  for (const key of schema.required ?? []) {
    if (!(key in args)) return `'${key}' is a required property`;
  }
  const properties = schema.properties ?? {};
  for (const [key, value] of Object.entries(args)) {
    const declared = properties[key];
    if (!declared) {
      if (schema.additionalProperties === false) return `'${key}' is not an argument of this tool`;
      continue;
    }
    const types = [declared.type].flat().filter(Boolean);
    if (types.length && !types.some((t) => JSON_TYPES[t]?.(value) ?? true)) {
      return `${key}: ${JSON.stringify(value)} is not of type ${types.map((t) => `'${t}'`).join(", ")}`;
    }
  }
  return null;
}

// --- form controls ----------------------------------------------------------------------------

function choiceList(id, choices, placeholder) {
  return el(
    "select",
    { id, name: id, required: true },
    el("option", { value: "" }, placeholder),
    choices.map((choice) => el("option", { value: choice }, choice)),
  );
}

/** A control with its <label>, an optional hint and a hidden error line, both announced with it. */
function labelled(control, label, hint) {
  const hintId = `${control.id}-hint`;
  const errorId = `${control.id}-error`;
  control.setAttribute("aria-describedby", hint ? `${hintId} ${errorId}` : errorId);
  const error = el("p", { id: errorId, className: "field-error", hidden: true });
  const wrapper = el(
    "div",
    { className: "field" },
    el("label", { for: control.id }, label),
    control,
    hint ? el("p", { id: hintId, className: "hint" }, hint) : null,
    error,
  );
  // An error speaks of the value that was there: it goes once the reviewer changes it.
  const clear = () => {
    control.removeAttribute("aria-invalid");
    error.hidden = true;
  };
  control.addEventListener("input", clear);
  control.addEventListener("change", clear);
  return { wrapper, control };
}

function required(control, message) {
  const value = control.value.trim();
  if (!value) throw new FieldError(control, message);
  return value;
}
