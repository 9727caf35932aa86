// The gateway's JSON API as the page uses it: the reviewer's session, fetch with the API key,
// and problem documents (RFC 9457) turned into ApiError. Same origin: the page is served by the
// gateway it talks to, so there is no URL to configure and no CORS.

const SESSION_KEY = "interlock.reviews.session";
const PAGE_CONFIG_PATH = "/reviews/config";
const PAGE_SIZE = 200; // the API's maximum: the fewest requests per refresh of the list

/** The signed-in reviewer: {key, project, workspace}, or null. sessionStorage, not
 * localStorage: the key lives only as long as the tab, and other tabs do not see it. */
export function loadSession() {
  try {
    const session = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? "null");
    return session && session.key && session.project && session.workspace ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
}

export function clearSession() {
  sessionStorage.removeItem(SESSION_KEY);
}

/** What the gateway suggests for the sign-in form: {project, workspace} in development (the
 * development key's project), {} elsewhere. Never a key. */
export async function loadPageConfig() {
  const response = await fetch(PAGE_CONFIG_PATH, { headers: { Accept: "application/json" }, cache: "no-store" });
  return response.ok ? response.json() : {};
}

/** An answer of the gateway that is not a success, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(status, title, detail, body = null) {
    super(`${title}: ${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.body = body;
  }
}

async function problemOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body === "object" && "title" in body) {
      return new ApiError(response.status, String(body.title), String(body.detail ?? ""), body);
    }
  } catch {
    // Not JSON (a proxy's error page, say): fall through to the plain text.
  }
  const detail = text.trim().slice(0, 200) || response.statusText;
  return new ApiError(response.status, `HTTP ${response.status}`, detail);
}

async function send(method, path, { session = loadSession(), params = {}, body, signal, headers = {} } = {}) {
  if (!session) {
    throw new ApiError(401, "Not signed in", "sign in with an API key first");
  }
  const url = new URL(`/api/v1/projects/${encodeURIComponent(session.project)}${path}`, location.origin);
  url.searchParams.set("workspace_id", session.workspace);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
  }
  const allHeaders = { Authorization: `Bearer ${session.key}`, Accept: "application/json", ...headers };
  if (body !== undefined) allHeaders["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: allHeaders,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "Gateway unreachable", `the request did not reach the gateway (${error.message})`);
  }
  if (!response.ok) throw await problemOf(response);
  return response;
}

async function request(method, path, options = {}) {
  return (await send(method, path, options)).json();
}

/** Open the execution's server-sent-events stream (continuing after `lastEventId` if given).
 * Resolves to the streaming Response, or null when the gateway answers 204: the stream has
 * nothing more, ever. fetch rather than EventSource: EventSource cannot send the API key. */
export async function openExecutionStream(executionId, { lastEventId, signal } = {}) {
  const headers = { Accept: "text/event-stream" };
  if (lastEventId) headers["Last-Event-ID"] = lastEventId;
  const response = await send("GET", `/executions/${encodeURIComponent(executionId)}/stream`, {
    headers,
    signal,
  });
  return response.status === 204 ? null : response;
}

/** Open the workspace's change stream: a `change` event (the execution, as the API shows it)
 * whenever any execution of the workspace changes. Nothing is replayed: read what to show after
 * it opened. Resolves to the streaming Response. */
export function openChangesStream({ signal } = {}) {
  return send("GET", "/changes", { headers: { Accept: "text/event-stream" }, signal });
}

export function newestFirst(a, b) {
  const byTime = Date.parse(b.created_at) - Date.parse(a.created_at);
  return byTime || (a.execution_id < b.execution_id ? 1 : -1);
}

/** Every suspended execution, newest first. The API lists oldest first, a page at a time, so
 * this follows next_cursor to the end and sorts here. */
export async function listPendingReviews({ session, signal } = {}) {
  const items = [];
  let cursor = null;
  do {
    const page = await request("GET", "/executions", {
      session,
      signal,
      params: { status: "suspended", limit: PAGE_SIZE, cursor },
    });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items.sort(newestFirst);
}

export function getExecution(executionId, { signal } = {}) {
  return request("GET", `/executions/${encodeURIComponent(executionId)}`, { signal });
}

/** POST the resume body; resolves to the ResumeAccepted answer (status "accepted" or
 * "awaiting_approvals"). */
export function submitDecision(executionId, body) {
  return request("POST", `/executions/${encodeURIComponent(executionId)}/resume`, { body });
}
