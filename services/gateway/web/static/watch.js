// Watching the gateway for changes: one execution through its server-sent-events stream, the
// list of pending reviews by polling (there is no stream across executions). Each watcher is
// one function with a stop handle.

import { getExecution, listPendingReviews, openExecutionStream } from "./api.js";
import { serverSentEvents } from "./sse.js";

export const RECONNECT_MS = 2000;
export const LIST_POLL_MS = 2000;
const REFRESH_DELAY_MS = 100;
const PROGRESS_EVENTS = new Set(["update", "token"]);
const TERMINAL = new Set(["completed", "error", "cancelled", "expired"]);

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

/** Watch one execution: `onChange(execution)` with the GET body now and whenever it changes,
 * `onProgress(kind, data)` for the agent's node updates and tokens. The stream says when
 * something changed; the GET body (with approvals and the review request) says what. A dropped
 * stream is reopened with Last-Event-ID, so nothing is missed; after a terminal status
 * (completed, error, cancelled) the watch ends by itself. Returns stop(). */
export function watchExecution(executionId, onChange, onError = () => {}, onProgress = () => {}) {
  const aborter = new AbortController();
  const { signal } = aborter;
  const changed = changesOnly(onChange);
  let lastEventId = null;
  let ended = false;

  const refresh = async () => {
    const execution = await getExecution(executionId, { signal });
    changed(execution);
    ended = TERMINAL.has(execution.status);
  };
  // A burst of events (the history replayed on connect) becomes one GET, not one per event.
  let pending = null;
  const refreshSoon = () => {
    pending ??= sleep(REFRESH_DELAY_MS, signal).then(() => {
      pending = null;
      return refresh();
    });
    return pending;
  };

  const follow = async () => {
    await refresh();
    if (ended) return;
    const response = await openExecutionStream(executionId, { lastEventId, signal });
    if (response === null) return refresh();
    for await (const event of serverSentEvents(response.body, signal)) {
      if (event.id) lastEventId = event.id;
      if (PROGRESS_EVENTS.has(event.event)) {
        onProgress(event.event, JSON.parse(event.data));
      } else if (event.event === "end") {
        return refresh();
      } else {
        refreshSoon().catch((error) => signal.aborted || onError(error));
      }
    }
  };

  (async () => {
    while (!signal.aborted && !ended) {
      try {
        await follow();
      } catch (error) {
        if (signal.aborted) return;
        onError(error);
      }
      if (!ended) await sleep(RECONNECT_MS, signal).catch(() => {});
    }
  })();
  return () => aborter.abort();
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
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
