"""Who decides, for separation of duties: every decision has a person (or a group) behind it.

A decision comes through one of two channels, and each names an *identity*:

- an API key: the person the key was issued to (``person:<email>``) when the key records an
  email, else the key itself (``key:<key id>``);
- a notification link: the recipient the link was issued to, a person for an email recipient
  (``person:<email>``), a group for a Slack channel (``group:slack:<channel>``: whoever reads
  the channel may click).

Identities are what the rules compare (pure functions here, no I/O):

- the requester may not decide (``self_approval = false``): the reviewer's identity must differ
  from the requester's; and because a link's clicker is only known as the recipient, a link
  decides such a request only when both the recipient and the requester are known persons;
- a quorum counts identities, so one person approving by key and by link counts once;
- an agent may refuse link approvals altogether (``link_approvals = false``): links may then
  reject but never approve.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import InterlockError

PERSON = "person:"
KEY = "key:"
GROUP = "group:"


def person(email: str) -> str:
    """The identity of the person with this email address (compared case-insensitively)."""
    return PERSON + email.strip().casefold()


def key_identity(key_id: str, email: str | None) -> str:
    return person(email) if email else KEY + key_id


def group(kind: str, name: str) -> str:
    return f"{GROUP}{kind}:{name}"


def is_person(identity: str | None) -> bool:
    return identity is not None and identity.startswith(PERSON)


@dataclass(frozen=True)
class Reviewer:
    """The principal behind one decision."""

    label: str
    """How the audit trail names them: ``key:<id> (<name>)``, or ``link:<channel> for <who>``."""
    identity: str
    """Who they are for separation of duties (see the module docstring)."""
    key_id: str | None = None
    """The API key that decided (re-checked for revocation when a quorum completes)."""
    via_link: bool = False

    @classmethod
    def of_key(cls, key_id: str, name: str, email: str | None) -> Reviewer:
        return cls(
            label=f"key:{key_id} ({name})", identity=key_identity(key_id, email), key_id=key_id
        )

    @classmethod
    def of_link(cls, channel: str, recipient: str) -> Reviewer:
        """``recipient`` is the identity the link was issued to."""
        shown = recipient.removeprefix(PERSON)
        return cls(label=f"link:{channel} for {shown}", identity=recipient, via_link=True)


SEPARATION_TITLES = {
    "self-approval": "Self-approval not allowed",
    "link-not-personal": "A shared link cannot decide this",
    "requester-unknown": "A link cannot decide this",
    "link-approval-not-allowed": "Links may not approve this",
}
"""The problem title of each rule (the rule's slug is the problem's type)."""


class SeparationOfDuties(InterlockError):
    """The reviewer may not take this decision; ``slug`` says which rule (HTTP 403)."""

    problem_type = "not-allowed"
    problem_title = "Not allowed"
    problem_status = 403

    def __init__(self, slug: str, message: str) -> None:
        super().__init__(message)
        self.slug = slug
        self.problem_type = slug
        self.problem_title = SEPARATION_TITLES.get(slug, self.problem_title)


def check_reviewer(
    reviewer: Reviewer,
    *,
    agent: str,
    self_approval: bool,
    requester_identity: str | None,
    requester_label: str | None,
) -> None:
    """Raise SeparationOfDuties when ``reviewer`` may not decide a request of this requester.

    ``requester_identity`` is None for executions stored before identities were recorded (or
    requested by an outside producer): then only the label can be compared, as before.
    """
    if self_approval:
        return
    same = (
        reviewer.identity == requester_identity
        if requester_identity is not None
        else reviewer.label == requester_label
    )
    if same:
        raise SeparationOfDuties(
            "self-approval",
            f"agent {agent} does not let the principal that invoked an execution decide its"
            " suspensions; another owner must review it",
        )
    if reviewer.via_link and not is_person(reviewer.identity):
        raise SeparationOfDuties(
            "link-not-personal",
            f"agent {agent} does not let the requester decide, and a link sent to"
            f" {reviewer.identity.removeprefix(GROUP)} may be used by anyone who reads it;"
            " open the review and decide with your own API key",
        )
    if reviewer.via_link and not is_person(requester_identity):
        raise SeparationOfDuties(
            "requester-unknown",
            f"agent {agent} does not let the requester decide, and the key that invoked this"
            " execution names no person (no email), so a link cannot show that its recipient is"
            " someone else; open the review and decide with your own API key",
        )


def check_link_approval(reviewer: Reviewer, *, agent: str, link_approvals: bool) -> None:
    """Raise SeparationOfDuties when the agent takes approvals from API keys only."""
    if reviewer.via_link and not link_approvals:
        raise SeparationOfDuties(
            "link-approval-not-allowed",
            f"agent {agent} takes approvals only from API keys (link_approvals = false);"
            " a link may reject, but to approve open the review and use your own API key",
        )
