"""``/act/{token}``: the approve / reject links of notifications.

GET shows what the link would decide and a confirm button; only the POST of that form decides
(mail scanners and link previews fetch links: a GET must never act). The first POST spends the
link, whatever happens next, so a link decides at most once. The decision goes through the same
``Intake.decide`` as the API, bound to the generation the link was made for, on behalf of the
recipient the link was sent to: separation of duties applies to them as to an API key's holder
(shared/domain/principals.py). A used link, a link of a suspension that moved on, or an expired
or altered link gets a page that says so, and nothing is decided.
"""

from __future__ import annotations

from html import escape

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse

from services.gateway.intake import (
    DecisionConflict,
    ExecutionNotFound,
    Intake,
    ReviewAnswer,
)
from services.gateway.web import SECURITY_HEADERS
from shared.domain.decisions import (
    AgentVersionChanged,
    DecisionNotAllowed,
    InvalidDecision,
    NotSuspended,
    StaleSuspension,
)
from shared.domain.principals import Reviewer, SeparationOfDuties
from shared.notifications.action_links import ActionLink, LinkExpired, LinkInvalid, verify
from shared.store.links import LinkUse, SpentLinks

USED_OR_MOVED_ON = (
    "This review has already been decided, or the agent has moved on since the link was sent."
    " Nothing was changed."
)
SPENT = "This link has been used already; a link decides once. Open the review instead."


def install_action_links(
    app: FastAPI, intake: Intake, spent_links: SpentLinks, secret: str | None
) -> None:
    router = APIRouter(include_in_schema=False)

    def check(token: str) -> ActionLink | HTMLResponse:
        if secret is None:
            return page(404, "Links are off", "This deployment does not accept decision links.")
        try:
            return verify(token, secret)
        except LinkExpired:
            return page(410, "Link expired", "This link has expired. Open the review instead.")
        except LinkInvalid:
            return page(400, "Invalid link", "This link is not valid. Open the review instead.")

    @router.get("/act/{token}", response_class=HTMLResponse)
    async def confirm(token: str) -> HTMLResponse:
        link = check(token)
        if isinstance(link, HTMLResponse):
            return link
        if await spent_links.spent(link.link_id):
            return page(409, "Link used", SPENT)
        try:
            execution = await intake.get(link.project_id, link.workspace_id, link.execution_id)
        except ExecutionNotFound:
            return page(404, "Not found", "This review no longer exists.")
        suspension = execution.suspension
        if suspension is None or suspension.suspension_id != link.generation:
            return page(409, "Nothing to decide", USED_OR_MOVED_ON)
        context = "".join(
            f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
            for k, v in suspension.suspend_context.items()
        )
        body = (
            f"<p>Agent <strong>{escape(execution.agent)}</strong>, execution"
            f" <code>{escape(execution.execution_id)}</code>.</p>"
            f"<table>{context}</table>"
            f'<form method="post" action="/act/{escape(token)}">'
            f'<button type="submit">Confirm: {escape(link.decision)}</button></form>'
        )
        return page(200, f"Confirm: {link.decision}", body, raw=True)

    @router.post("/act/{token}", response_class=HTMLResponse)
    async def decide(token: str) -> HTMLResponse:
        link = check(token)
        if isinstance(link, HTMLResponse):
            return link
        use = LinkUse(
            link_id=link.link_id,
            execution_id=link.execution_id,
            generation=link.generation,
            recipient=link.recipient,
            decision=link.decision,
        )
        if not await spent_links.spend(use):
            return page(409, "Link used", SPENT)
        answer = ReviewAnswer(
            decision=link.decision,
            generation=link.generation,
            reviewer_notes=f"decided from a {link.channel} notification link",
        )
        try:
            outcome = await intake.decide(
                project_id=link.project_id,
                workspace_id=link.workspace_id,
                execution_id=link.execution_id,
                answer=answer,
                reviewer=Reviewer.of_link(link.channel, link.recipient),
            )
        except ExecutionNotFound:
            return page(404, "Not found", "This review no longer exists.")
        except (DecisionConflict, StaleSuspension, NotSuspended):
            return page(409, "Already decided", USED_OR_MOVED_ON)
        except AgentVersionChanged:
            return page(409, "Agent changed", "The agent changed since; open the review instead.")
        except SeparationOfDuties as exc:
            return page(403, "Not allowed", str(exc))
        except (DecisionNotAllowed, InvalidDecision) as exc:
            return page(400, "Not allowed", str(exc))
        if outcome.awaiting:
            counted = len(outcome.approvals)
            return page(
                200,
                "Approval recorded",
                f"Recorded: {link.decision}. This decision needs {outcome.approvals_required}"
                f" approvals; {counted} so far. The agent waits for the others.",
            )
        return page(200, "Decision recorded", f"Recorded: {link.decision}. The agent resumes.")

    app.include_router(router)


def page(status: int, title: str, body: str, *, raw: bool = False) -> HTMLResponse:
    content = body if raw else f"<p>{escape(body)}</p>"
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · Interlock</title>"
        '<link rel="stylesheet" href="/reviews/static/app.css"></head>'
        f'<body><main class="act"><h1>{escape(title)}</h1>{content}</main></body></html>'
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
