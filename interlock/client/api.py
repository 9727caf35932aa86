"""A small synchronous client of the gateway's HTTP API.

Synchronous on purpose: the CLI does one thing at a time and blocks on the reviewer anyway. The
``httpx.Client`` is passed in, so tests hand over a client bound to the app in-process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, connect_sse

from interlock.client.config import Config

Json = dict[str, Any]
TERMINAL = frozenset({"completed", "error", "cancelled", "expired"})
"""Statuses an execution never leaves: a wait returns at once on any of them."""
SETTLED = TERMINAL | {"suspended"}
"""Statuses an execution stays in until someone (a reviewer, or nobody) acts."""
PROGRESS_EVENTS = frozenset({"update", "token"})
HTTP_TIMEOUT_SECONDS = 30.0
STREAM_READ_TIMEOUT_SECONDS = 30.0
RECONNECT_SECONDS = 1.0


class ApiError(Exception):
    """The gateway answered with an error (a problem document, usually)."""

    def __init__(self, status: int, title: str, detail: str, body: Any = None) -> None:
        super().__init__(f"{title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.body = body

    @property
    def problem(self) -> Json:
        """The problem document as the gateway sent it, or one made of what it sent instead
        (for ``--json``: scripts get a body to read whatever failed)."""
        if isinstance(self.body, dict):
            return self.body
        return {"status": self.status, "title": self.title, "detail": self.detail}

    def sentence(self) -> str:
        """The error as a person reads it: the title and the detail, each said once."""
        title, detail = self.title.strip(), self.detail.strip()
        if not detail or _same(detail, title):
            return title
        if not title or _same(detail[: len(title)], title):
            return detail
        return f"{title}: {detail}"


def _same(one: str, other: str) -> bool:
    return one.casefold().strip(" .") == other.casefold().strip(" .")


class GatewayUnreachable(Exception):
    def __init__(self, url: str, cause: Exception) -> None:
        reason = str(cause) or type(cause).__name__
        super().__init__(f"cannot reach the gateway at {url} ({reason})")
        self.url = url


def _problem(response: httpx.Response, missing: str | None = None) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "title" in body:
        error = ApiError(
            response.status_code, str(body["title"]), str(body.get("detail") or ""), body
        )
    else:
        text = response.text.strip()[:200] or response.reason_phrase
        error = ApiError(response.status_code, f"HTTP {response.status_code}", text, body)
    if response.status_code == 404 and missing and _says_only_not_found(error):
        # No route matched (an id with "/" in it), or the key's project is not this one: the
        # CLI knows what it asked for, which says more to the person who typed it.
        return ApiError(404, "Not found", missing, body)
    return error


def _says_only_not_found(error: ApiError) -> bool:
    """A 404 that names nothing: a bare "Not Found", or the gateway's generic ``not-found``
    problem (as opposed to ``execution-not-found``, whose detail names the execution)."""
    generic = isinstance(error.body, dict) and str(error.body.get("type", "")).endswith(
        "/not-found"
    )
    return generic or _same(error.detail or error.title, error.title)


class Gateway:
    def __init__(self, http: httpx.Client, config: Config) -> None:
        self._http = http
        self.config = config
        self._headers = {
            "Authorization": f"Bearer {config.api_key}",
            "User-Agent": "interlock-cli",
        }

    @property
    def _project(self) -> str:
        return f"{self.config.url}/api/v1/projects/{self.config.project}"

    def _request(
        self,
        method: str,
        url: str,
        *,
        params: Json | None = None,
        body: Any = None,
        missing: str | None = None,
    ) -> Json:
        """One request; an error answer raises ``ApiError`` (``missing`` says what a bare 404
        means here)."""
        scope = {"workspace_id": self.config.workspace}
        query = {k: v for k, v in {**scope, **(params or {})}.items() if v is not None}
        try:
            response = self._http.request(
                method, url, params=query, json=body, headers=self._headers
            )
        except httpx.TransportError as exc:
            raise GatewayUnreachable(self.config.url, exc) from exc
        if response.is_error:
            raise _problem(response, missing)
        data: Json = response.json()
        return data

    def effects(self) -> Json:
        """What the dev effects sink received (interlock/effects_sink.py)."""
        return self._request(
            "GET",
            f"{self.config.url}/dev/effects",
            missing="this Interlock hosts no effects sink: only `interlock dev` does, in the"
            " development environment",
        )

    def _execution_url(self, execution_id: str) -> str:
        # Quoted whole: an id with "/" or "?" in it must not reach another route.
        return f"{self._project}/executions/{quote(execution_id, safe='')}"

    def _no_execution(self, execution_id: str) -> str:
        return (
            f"no execution {execution_id!r} in project {self.config.project},"
            f" workspace {self.config.workspace}"
        )

    def invoke(self, agent: str, message: str, *, session_id: str | None = None) -> Json:
        """Start an execution of ``agent``; with ``session_id``, as that session's next turn
        (the agent sees the earlier ones). A turn is refused (409 ``session-busy``) while the
        session has one running or waiting for a review, rather than queued behind it: the CLI
        waits for the turn it sends, and one queued behind someone else's review would leave it
        waiting for nothing it can see."""
        url = f"{self._project}/workspaces/{self.config.workspace}/invoke"
        body: Json = {"agent": agent, "message": message}
        if session_id is not None:
            body |= {"session_id": session_id, "multitask_strategy": "reject"}
        return self._request("POST", url, body=body)

    def session(self, session_id: str) -> Json | None:
        """The session and its latest turns, newest first; None when it has none yet."""
        url = f"{self._project}/sessions/{quote(session_id, safe='')}"
        try:
            return self._request("GET", url)
        except ApiError as exc:
            if exc.status == 404 and str(exc.problem.get("type", "")).endswith(
                "/session-not-found"
            ):
                return None
            raise

    def get(self, execution_id: str) -> Json:
        url = self._execution_url(execution_id)
        return self._request("GET", url, missing=self._no_execution(execution_id))

    def audit(self, execution_id: str) -> Json:
        url = f"{self._execution_url(execution_id)}/audit"
        return self._request("GET", url, missing=self._no_execution(execution_id))

    def resume(self, execution_id: str, body: Json) -> Json:
        url = f"{self._execution_url(execution_id)}/resume"
        return self._request("POST", url, body=body, missing=self._no_execution(execution_id))

    def cancel(self, execution_id: str, reason: str | None) -> Json:
        url = f"{self._execution_url(execution_id)}/cancel"
        body = {"reason": reason} if reason else {}
        return self._request("POST", url, body=body, missing=self._no_execution(execution_id))

    def page(self, *, status: str | None, limit: int, cursor: str | None = None) -> Json:
        params = {"status": status, "limit": limit, "cursor": cursor}
        return self._request("GET", f"{self._project}/executions", params=params)

    def pages(self, *, status: str | None, limit: int) -> Iterator[Json]:
        """Every page, following ``next_cursor`` until the gateway says there is no more."""
        cursor: str | None = None
        while True:
            page = self.page(status=status, limit=limit, cursor=cursor)
            yield page
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def wait(
        self,
        execution_id: str,
        until: Callable[[Json], bool],
        *,
        timeout: float,
        on_progress: Callable[[str, Json], None] | None = None,
    ) -> Json:
        """Follow the execution's event stream until ``until(execution)`` holds or ``timeout``
        seconds pass; returns the last execution seen either way (the caller tells the two apart
        with ``until``). ``on_progress(kind, data)`` gets the agent's node updates and tokens.

        The stream says when to look (a review request, the end, the stream closing); the GET
        body says what is there. A dropped stream is reopened after the last event seen. A caller
        that asked for progress reads the stream at least once, even when the execution had
        already settled before the first look: the stream replays the durable progress log, so
        a fast agent's node updates are not lost to the race."""
        deadline = time.monotonic() + timeout
        execution = self.get(execution_id)
        last_event_id: str | None = None
        owe_progress = on_progress is not None
        while (owe_progress or not until(execution)) and time.monotonic() < deadline:
            owe_progress = False
            try:
                last_event_id = self._follow_stream(
                    execution_id,
                    until,
                    last_event_id=last_event_id,
                    deadline=deadline,
                    on_progress=on_progress or (lambda kind, data: None),
                )
            except (httpx.TransportError, SSEError):
                time.sleep(min(RECONNECT_SECONDS, max(deadline - time.monotonic(), 0.0)))
            execution = self.get(execution_id)
        return execution

    def _follow_stream(
        self,
        execution_id: str,
        until: Callable[[Json], bool],
        *,
        last_event_id: str | None,
        deadline: float,
        on_progress: Callable[[str, Json], None],
    ) -> str | None:
        """Read the stream until ``until`` holds, it closes, or the deadline; return the id of
        the last event read."""
        headers = dict(self._headers)
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        params = {"workspace_id": self.config.workspace, "until": "suspended"}
        # The gateway pings every 15 s: a longer silence is a dead connection.
        read_timeout = max(min(deadline - time.monotonic(), STREAM_READ_TIMEOUT_SECONDS), 0.1)
        url = f"{self._execution_url(execution_id)}/stream"
        with connect_sse(
            self._http,
            "GET",
            url,
            params=params,
            headers=headers,
            timeout=httpx.Timeout(HTTP_TIMEOUT_SECONDS, read=read_timeout),
        ) as source:
            response = source.response
            if response.status_code == 204:  # the end was seen already
                return last_event_id
            if response.is_error:
                response.read()
                raise _problem(response, self._no_execution(execution_id))
            for event in source.iter_sse():
                last_event_id = event.id or last_event_id
                if event.event in PROGRESS_EVENTS:
                    on_progress(event.event, json.loads(event.data))
                elif event.event in ("interrupt", "end") and until(self.get(execution_id)):
                    break
                if time.monotonic() >= deadline:
                    break
        return last_event_id


def settled(execution: Json) -> bool:
    return execution.get("status") in SETTLED


def past_suspension(generation: int) -> Callable[[Json], bool]:
    """After a decision on suspension ``generation``: the execution ended, or waits at a later
    suspension (until the orchestrator applies the decision the gateway still shows this one)."""

    def check(execution: Json) -> bool:
        if execution.get("status") in TERMINAL:
            return True
        later = int(execution.get("generation") or 0) > generation
        return execution.get("status") == "suspended" and later

    return check


def moved_on(previous: Json) -> Callable[[Json], bool]:
    """After a resume: the execution left the suspension that was answered. Until the
    orchestrator applies the decision the gateway still shows that same suspension, so
    ``settled`` alone would return at once."""

    def check(execution: Json) -> bool:
        if execution.get("status") in TERMINAL:
            return True
        if execution.get("status") != "suspended":
            return False
        return (execution.get("generation"), execution.get("reviews")) != (
            previous.get("generation"),
            previous.get("reviews"),
        )

    return check
