// Watching the gateway for changes, pushed, never polled: one execution through its
// server-sent-events stream, the list of pending reviews through the workspace's change stream.
// Each watcher is one function with a stop handle.

import {
  getExecution,
  listPendingReviews,
  newestFirst,
  openChangesStream,
  openExecutionStream,
} from "./api.js";
import { serverSentEvents } from "./sse.js";

export const RECONNECT_MS = 2000;
const REFRESH_DELAY_MS = 100;
const PROGRESS_EVENTS = new Set(["update", "token"]);
const TERMINAL = new Set(["completed", "error", "cancelled", "expired"]);

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
 * changes. The workspace's change stream opens first; the list is read once it is open, so no
 * change falls between the read and the stream; changes that arrive before the list are applied
 * after it (an announcement older than what the list holds is ignored). A dropped stream is
 * reopened and the list read again. Returns stop(). */
export function watchPendingReviews(onChange, onError = () => {}) {
  const aborter = new AbortController();
  const { signal } = aborter;
  const changed = changesOnly(onChange);

  const follow = async () => {
    // This connection's own signal: a failed list read ends the stream too, and the whole
    // watch starts over.
    const connection = new AbortController();
    const stop = () => connection.abort();
    signal.addEventListener("abort", stop, { once: true });
    try {
      const response = await openChangesStream({ signal: connection.signal });
      const pending = new Map();
      let early = [];
      const apply = (view) => {
        const known = pending.get(view.execution_id);
        if (known && known.updated_at > view.updated_at) return;
        if (view.status === "suspended") pending.set(view.execution_id, view);
        else pending.delete(view.execution_id);
      };
      const show = () => changed([...pending.values()].sort(newestFirst));
      let listFailure = null;
      listPendingReviews({ signal: connection.signal }).then(
        (items) => {
          for (const item of items) pending.set(item.execution_id, item);
          early.forEach(apply);
          early = null;
          show();
        },
        (error) => {
          listFailure = error;
          connection.abort();
        },
      );
      try {
        for await (const event of serverSentEvents(response.body, connection.signal)) {
          if (event.event !== "change") continue;
          const view = JSON.parse(event.data);
          if (early) {
            early.push(view);
          } else {
            apply(view);
            show();
          }
        }
      } catch (error) {
        throw listFailure ?? error;
      }
      if (listFailure) throw listFailure;
    } finally {
      signal.removeEventListener("abort", stop);
      connection.abort();
    }
  };

  (async () => {
    while (!signal.aborted) {
      try {
        await follow();
      } catch (error) {
        if (signal.aborted) return;
        onError(error);
      }
      await sleep(RECONNECT_MS, signal).catch(() => {});
    }
  })();
  return () => aborter.abort();
}

// A reconnect reads the same list again; callers only care when it differs.
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
