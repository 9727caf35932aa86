// Watching the gateway for changes. Polling for now; each watcher is one function with a stop
// handle so that a server-sent-events stream (read with fetch) can replace its insides without
// the callers noticing.

import { getExecution, listPendingReviews } from "./api.js";

export const EXECUTION_POLL_MS = 1500;
export const LIST_POLL_MS = 2000;
const TERMINAL = new Set(["completed", "error", "cancelled"]);

/** Poll `fetchOnce(signal)` every `intervalMs`, one request at a time (a slow answer delays the
 * next poll rather than piling requests up); `onValue` gets each answer, `onError` each failure,
 * and polling goes on after a failure: a gateway restart should not need a page reload.
 * `onValue` returning true ends the watch. Returns stop(). */
function poll(fetchOnce, intervalMs, onValue, onError) {
  const aborter = new AbortController();
  let timer = null;
  const tick = async () => {
    let done = false;
    try {
      done = onValue(await fetchOnce(aborter.signal)) === true;
    } catch (error) {
      if (aborter.signal.aborted) return;
      onError(error);
    }
    if (!done && !aborter.signal.aborted) timer = setTimeout(tick, intervalMs);
  };
  tick();
  return () => {
    aborter.abort();
    clearTimeout(timer);
  };
}

/** Watch one execution: `onChange(execution)` with the GET body now and whenever it changes.
 * After a terminal status (completed, error, cancelled) nothing changes any more, so the watch
 * ends by itself. Returns stop(). */
export function watchExecution(executionId, onChange, onError = () => {}) {
  const changed = changesOnly(onChange);
  return poll(
    (signal) => getExecution(executionId, { signal }),
    EXECUTION_POLL_MS,
    (execution) => {
      changed(execution);
      return TERMINAL.has(execution.status);
    },
    onError,
  );
}

/** Watch the pending reviews: `onChange(items)`, newest first, now and whenever the list
 * changes. Returns stop(). */
export function watchPendingReviews(onChange, onError = () => {}) {
  return poll((signal) => listPendingReviews({ signal }), LIST_POLL_MS, changesOnly(onChange), onError);
}

// Polling sees the same answer again and again; callers only care when it differs.
function changesOnly(onChange) {
  let last = null;
  return (value) => {
    const seen = JSON.stringify(value);
    if (seen !== last) {
      last = seen;
      onChange(value);
    }
  };
}
