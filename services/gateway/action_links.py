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

from services.gateway.answers import DecisionOutcome, ReviewAnswer
from services.gateway.errors import DecisionConflict, ExecutionNotFound
from services.gateway.intake import Intake
from services.gateway.web import SECURITY_HEADERS
from shared.domain.decisions import AgentVersionChanged, NotSuspended, StaleSuspension
from shared.domain.execution import Execution
from shared.domain.principals import Reviewer
from shared.errors import InterlockError
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
    links = ActionLinks(intake, spent_links, secret)
    router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)
    router.add_api_route("/act/{token}", links.confirm, methods=["GET"])
    router.add_api_route("/act/{token}", links.decide, methods=["POST"])
    app.include_router(router)


class ActionLinks:
    """Following a link: ``confirm`` (the GET) asks, ``decide`` (the POST) spends and decides."""

    def __init__(self, intake: Intake, spent_links: SpentLinks, secret: str | None) -> None:
        self._intake = intake
        self._spent_links = spent_links
        self._secret = secret

    def _verified(self, token: str) -> ActionLink | HTMLResponse:
        if self._secret is None:
            return page(404, "Links are off", "This deployment does not accept decision links.")
        try:
            return verify(token, self._secret)
        except LinkExpired:
            return page(410, "Link expired", "This link has expired. Open the review instead.")
        except LinkInvalid:
            return page(400, "Invalid link", "This link is not valid. Open the review instead.")

    async def confirm(self, token: str) -> HTMLResponse:
        link = self._verified(token)
        if isinstance(link, HTMLResponse):
            return link
        if await self._spent_links.spent(link.link_id):
            return page(409, "Link used", SPENT)
        try:
            execution = await self._intake.get(
                link.project_id, link.workspace_id, link.execution_id
            )
        except ExecutionNotFound as exc:
            return refusal_page(exc)
        suspension = execution.suspension
        if suspension is None or suspension.suspension_id != link.generation:
            return page(409, "Nothing to decide", USED_OR_MOVED_ON)
        return confirm_page(token, link, execution)

    async def decide(self, token: str) -> HTMLResponse:
        link = self._verified(token)
        if isinstance(link, HTMLResponse):
            return link
        use = LinkUse(
            link_id=link.link_id,
            execution_id=link.execution_id,
            generation=link.generation,
            recipient=link.recipient,
            decision=link.decision,
        )
        if not await self._spent_links.spend(use):
            return page(409, "Link used", SPENT)
        answer = ReviewAnswer(
            decision=link.decision,
            generation=link.generation,
            reviewer_notes=f"decided from a {link.channel} notification link",
        )
        try:
            outcome = await self._intake.decide(
                project_id=link.project_id,
                workspace_id=link.workspace_id,
                execution_id=link.execution_id,
                answer=answer,
                reviewer=Reviewer.of_link(link.channel, link.recipient),
            )
        except InterlockError as exc:
            if exc.problem_status >= 500:
                raise  # a 503 (retry later) or a bug: the API's problem document says which
            return refusal_page(exc)
        return outcome_page(link.decision, outcome)


def confirm_page(token: str, link: ActionLink, execution: Execution) -> HTMLResponse:
    """What the link would decide, on which execution and its context, and the button."""
    assert execution.suspension is not None
    context = "".join(
        f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
        for k, v in execution.suspension.suspend_context.items()
    )
    body = (
        f"<p>Agent <strong>{escape(execution.agent)}</strong>, execution"
        f" <code>{escape(execution.execution_id)}</code>.</p>"
        f"<table>{context}</table>"
        f'<form method="post" action="/act/{escape(token)}">'
        f'<button type="submit">Confirm: {escape(link.decision)}</button></form>'
    )
    return page(200, f"Confirm: {link.decision}", body, raw=True)


LINK_WORDING = {
    ExecutionNotFound.problem_type: ("Not found", "This review no longer exists."),
    DecisionConflict.problem_type: ("Already decided", USED_OR_MOVED_ON),
    StaleSuspension.problem_type: ("Already decided", USED_OR_MOVED_ON),
    NotSuspended.problem_type: ("Already decided", USED_OR_MOVED_ON),
    AgentVersionChanged.problem_type: (
        "Agent changed",
        "The agent changed since; open the review instead.",
    ),
}
"""A link's reader follows an email, not the API: where the problem's own detail names ids and
API fields, the page says it in words (the status is the problem's all the same)."""


def refusal_page(exc: InterlockError) -> HTMLResponse:
    """The page of a decision refused: the error's problem status, in a link reader's words."""
    title, text = LINK_WORDING.get(exc.problem_type, (exc.problem_title, str(exc)))
    return page(exc.problem_status, title, text)


def outcome_page(decision: str, outcome: DecisionOutcome) -> HTMLResponse:
    if outcome.awaiting:
        more = outcome.approvals_missing
        return page(
            200,
            "Approval recorded",
            f"Your approval ({decision}) is recorded. This decision needs"
            f" {outcome.approvals_required} approvals: {outcome.approvals_counted} so far,"
            f" {more} more {'is' if more == 1 else 'are'} needed before the agent resumes.",
        )
    return page(200, "Decision recorded", f"Recorded: {decision}. The agent resumes.")


def page(status: int, title: str, body: str, *, raw: bool = False) -> HTMLResponse:
    content = body if raw else f"<p>{escape(body)}</p>"
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · Interlock</title>"
        '<link rel="stylesheet" href="/reviews/static/app.css"></head>'
        f'<body><main class="act"><h1>{escape(title)}</h1>{content}</main></body></html>'
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
