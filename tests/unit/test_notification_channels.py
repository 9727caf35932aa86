"""The notification channels against real loopback receivers: a Starlette app under uvicorn for
the webhook and Slack channels, an aiosmtpd server for email. Webhook signatures are checked
with the ``standardwebhooks`` library, an implementation independent of ours."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import httpx
import pytest
import uvicorn
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from services.notifier.channels import Channel
from services.notifier.channels.email import EmailChannel
from services.notifier.channels.slack import HEADER_LIMIT, SECTION_LIMIT, SlackChannel
from services.notifier.channels.webhook import (
    WebhookChannel,
    encode_body,
    new_secret,
    parse_secret,
    signature_header,
)
from shared.notifications.action_links import ActionLink, LinkMinter, verify
from shared.notifications.model import DeliveryFailed, Notification
from tests.eventually import eventually
from tests.ports import free_port

EXECUTION = "3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01"
HOSTILE = "<script>alert('x')</script> & <!channel> <https://evil.example|click>"


def make_notification(**changes: Any) -> Notification:
    fields: dict[str, Any] = {
        "notification_id": f"{EXECUTION}:1:ops",
        "project_id": "p1",
        "workspace_id": "w1",
        "execution_id": EXECUTION,
        "agent": "refund-approval",
        "suspension_id": 1,
        "suspend_context": {"claim": "CLM-4821", "amount": 120, "note": HOSTILE},
        "allowed_decisions": ["approve", "reject"],
        "deadline": datetime(2030, 1, 2, 10, 30, tzinfo=UTC),
        "review_url": f"http://127.0.0.1:8000/reviews?execution={EXECUTION}&project=p1",
    }
    fields.update(changes)
    return Notification(**fields)


TOOL_CALLS = [
    {
        "name": "send_email",
        "args": {"to": "customer@example.com", "body": "Refund approved"},
        "description": "Send an email to the customer",
        "allowed_decisions": ["approve", "edit", "reject"],
    }
]


# --- a loopback HTTP receiver ------------------------------------------------------------------


@dataclass
class Captured:
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """What the loopback endpoint received and how it answers."""

    url: str
    requests: list[Captured] = field(default_factory=list)
    status: int = 200
    answer: str = "ok"
    known_secrets: list[str] | None = None
    """Set: verify every request with the standardwebhooks library, answering 401 if none of
    these secrets verifies it (as a real receiver would)."""
    verification_errors: list[str] = field(default_factory=list)
    hang: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def verify(self, captured: Captured) -> bool:
        assert self.known_secrets is not None
        for secret in self.known_secrets:
            try:
                Webhook(secret).verify(captured.body, captured.headers)
                return True
            except WebhookVerificationError as exc:
                self.verification_errors.append(str(exc))
        return False


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    state = Receiver(url=f"http://127.0.0.1:{sock.getsockname()[1]}/hook")

    async def handle(request: Request) -> Response:
        captured = Captured(await request.body(), dict(request.headers))
        state.requests.append(captured)
        if state.hang:
            await state.release.wait()
        if state.known_secrets is not None and not state.verify(captured):
            return PlainTextResponse("bad signature", status_code=401)
        return PlainTextResponse(state.answer, status_code=state.status)

    app = Starlette(routes=[Route("/hook", handle, methods=["POST"])])
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def started() -> bool:
        return server.started

    try:
        await eventually(started, bool, timeout=10, interval=0.01, what="the loopback receiver")
        yield state
    finally:
        state.release.set()
        server.should_exit = True
        await task
        sock.close()


async def failure_of(channel: Channel, notification: Notification) -> DeliveryFailed:
    with pytest.raises(DeliveryFailed) as raised:
        await channel.send(notification)
    return raised.value


# --- webhook -----------------------------------------------------------------------------------


async def test_a_webhook_delivery_verifies_with_the_reference_library(receiver: Receiver) -> None:
    secret = new_secret()
    receiver.known_secrets = [secret]
    notification = make_notification()
    channel: Channel = WebhookChannel("ops", receiver.url, [secret])

    await channel.send(notification)

    [delivery] = receiver.requests
    assert receiver.verification_errors == []
    assert delivery.headers["webhook-id"] == notification.notification_id
    assert abs(int(delivery.headers["webhook-timestamp"]) - time.time()) < 60
    assert delivery.headers["content-type"] == "application/json"
    envelope = delivery.json()
    assert envelope == {
        "type": "review.requested",
        "timestamp": notification.model_dump(mode="json")["created_at"],
        # The notifier's bookkeeping of which links to mint is not part of the webhook body.
        "data": notification.model_dump(mode="json", exclude={"link_decisions"}),
    }
    # The library's own signer agrees byte for byte.
    timestamp = datetime.fromtimestamp(int(delivery.headers["webhook-timestamp"]), UTC)
    expected = Webhook(secret).sign(notification.notification_id, timestamp, delivery.body.decode())
    assert delivery.headers["webhook-signature"] == expected


async def test_a_tampered_body_or_id_does_not_verify(receiver: Receiver) -> None:
    secret = new_secret()
    await WebhookChannel("ops", receiver.url, [secret]).send(make_notification())
    [delivery] = receiver.requests
    verifier = Webhook(secret)
    verifier.verify(delivery.body, delivery.headers)

    tampered = delivery.body.replace(b"CLM-4821", b"CLM-9999")
    assert tampered != delivery.body
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        verifier.verify(tampered, delivery.headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        verifier.verify(delivery.body, {**delivery.headers, "webhook-id": f"{EXECUTION}:2:ops"})
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(new_secret()).verify(delivery.body, delivery.headers)


async def test_a_stale_timestamp_is_refused_by_the_receiver(receiver: Receiver) -> None:
    secret = new_secret()
    receiver.known_secrets = [secret]
    six_minutes_ago = WebhookChannel(
        "ops", receiver.url, [secret], clock=lambda: time.time() - 6 * 60
    )

    failure = await failure_of(six_minutes_ago, make_notification())

    assert receiver.verification_errors == ["Message timestamp too old"]
    assert failure.retryable is False
    assert "401" in failure.reason


async def test_during_a_rotation_receivers_knowing_either_secret_accept(
    receiver: Receiver,
) -> None:
    old, new = new_secret(), new_secret()
    channel = WebhookChannel("ops", receiver.url, [old, new])
    notification = make_notification()

    for known in ([new], [old], [new_secret(), old]):
        receiver.known_secrets = known
        await channel.send(notification)
    assert receiver.verification_errors == ["No matching signature found"]  # the unrelated one

    signatures = receiver.requests[0].headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    assert all(signature.startswith("v1,") for signature in signatures)

    receiver.known_secrets = [new_secret()]
    failure = await failure_of(channel, notification)
    assert failure.retryable is False


async def test_every_attempt_carries_the_same_id_and_body(receiver: Receiver) -> None:
    channel = WebhookChannel("ops", receiver.url, [new_secret()])
    notification = make_notification()
    await channel.send(notification)
    await channel.send(notification)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.body == second.body


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (503, True),
        (429, True),
        (408, True),
        (409, True),
        (400, False),
        (404, False),
        (410, False),
        (302, False),
    ],
)
async def test_a_refusing_receiver_fails_the_delivery(
    receiver: Receiver, status: int, retryable: bool
) -> None:
    receiver.status = status
    receiver.answer = "nope"
    failure = await failure_of(
        WebhookChannel("ops", receiver.url, [new_secret()]), make_notification()
    )
    assert failure.retryable is retryable
    assert failure.reason.startswith(f"HTTP {status}")
    assert "nope" in failure.reason
    assert receiver.url not in failure.reason


async def test_a_receiver_slower_than_the_timeout_fails_retryably_in_time(
    receiver: Receiver,
) -> None:
    receiver.hang = True
    channel = WebhookChannel("ops", receiver.url, [new_secret()], timeout=0.5)

    started = time.monotonic()
    failure = await failure_of(channel, make_notification())
    elapsed = time.monotonic() - started

    assert failure.retryable is True
    assert "0.5s" in failure.reason
    assert elapsed < 2.0
    assert len(receiver.requests) == 1


async def test_an_unreachable_receiver_fails_retryably() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"
    failure = await failure_of(WebhookChannel("ops", url, [new_secret()]), make_notification())
    assert failure.retryable is True


def test_the_documented_signature_vector() -> None:
    """docs/notifications.md gives receivers this vector to check their verifier against."""
    body = (
        b'{"type":"review.requested","timestamp":"2026-11-30T09:15:02Z","data":{'
        b'"notification_id":"3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01:1:ops-webhook",'
        b'"type":"review.requested","project_id":"p1","workspace_id":"w1",'
        b'"execution_id":"3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01","agent":"refund-approval",'
        b'"suspension_id":1,"suspend_context":{"claim":"CLM-4821","amount":120,'
        b'"reason":"Parcel arrived damaged"},"allowed_decisions":["approve","reject"],'
        b'"actions":[],"deadline":"2026-12-01T17:00:00Z","review_url":'
        b'"https://interlock.example.com/reviews?project=p1&execution=3f2a9c1e-7b4d-4c1a-9e2f-'
        b'5d6c7b8a9f01","action_links":{},"created_at":"2026-11-30T09:15:02Z"}}'
    )
    documented = Notification(
        notification_id="3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01:1:ops-webhook",
        project_id="p1",
        workspace_id="w1",
        execution_id="3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01",
        agent="refund-approval",
        suspension_id=1,
        suspend_context={"claim": "CLM-4821", "amount": 120, "reason": "Parcel arrived damaged"},
        allowed_decisions=["approve", "reject"],
        deadline=datetime(2026, 12, 1, 17, 0, tzinfo=UTC),
        review_url="https://interlock.example.com/reviews?project=p1&execution=3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01",
        created_at=datetime(2026, 11, 30, 9, 15, 2, tzinfo=UTC),
    )
    # The body is the wire contract: a change here is a change receivers must hear about.
    assert encode_body(documented) == body
    old = parse_secret("whsec_aW50ZXJsb2NrLWRvY3MtZXhhbXBsZS1zZWNyZXQtMDE=")
    new = parse_secret("whsec_aW50ZXJsb2NrLWRvY3MtZXhhbXBsZS1zZWNyZXQtMDI=")
    msg_id = "3f2a9c1e-7b4d-4c1a-9e2f-5d6c7b8a9f01:1:ops-webhook"
    assert signature_header([old, new], msg_id, 1796029000, body) == (
        "v1,zo9ImMpN2KxwjdGpsFeheDeWqGZ3Y28YnG1oF8e4bhc= "
        "v1,JJo4X9Urmozwx8gSNEDPojQpQBJIWJM7E70yTU8cOeM="
    )


@pytest.mark.parametrize(
    "secrets",
    [[], ["not-prefixed"], ["whsec_not base64!"], ["whsec_c2hvcnQ="]],
    ids=["none", "no-prefix", "not-base64", "too-short"],
)
def test_a_webhook_channel_refuses_unusable_secrets(secrets: list[str]) -> None:
    with pytest.raises(ValueError) as raised:
        WebhookChannel("ops", "http://127.0.0.1:9/hook", secrets)
    for secret in secrets:
        assert secret.removeprefix("whsec_") not in str(raised.value)


# --- Slack -------------------------------------------------------------------------------------


def mrkdwn_of(message: dict[str, Any]) -> str:
    texts = [message["text"]]
    for block in message["blocks"]:
        if "text" in block:
            texts.append(block["text"]["text"])
        texts += [element.get("text", "") for element in block.get("elements", [])]
    return "\n".join(text if isinstance(text, str) else text["text"] for text in texts)


async def test_a_slack_message_shows_the_request_and_links_to_the_review(
    receiver: Receiver,
) -> None:
    notification = make_notification()
    await SlackChannel("team", receiver.url).send(notification)

    [delivery] = receiver.requests
    message = delivery.json()
    header, *_ = message["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Review requested: refund-approval"},
    }
    text = mrkdwn_of(message)
    assert "*claim*: CLM-4821" in text
    assert "*amount*: 120" in text
    assert "*Allowed decisions*\n\N{BULLET} approve, reject" in text
    stamp = int(datetime(2030, 1, 2, 10, 30, tzinfo=UTC).timestamp())
    assert f"<!date^{stamp}^" in text
    assert "2030-01-02 10:30 UTC" in text
    [button] = message["blocks"][-1]["elements"]
    assert button["url"] == notification.review_url
    assert button["text"]["text"] == "Open review"
    assert EXECUTION[:8] in message["text"]


async def test_slack_text_escapes_agent_data(receiver: Receiver) -> None:
    await SlackChannel("team", receiver.url).send(make_notification())

    text = mrkdwn_of(receiver.requests[0].json())
    assert (
        "&lt;script&gt;alert('x')&lt;/script&gt; &amp; &lt;!channel&gt; "
        "&lt;https://evil.example|click&gt;"
    ) in text
    assert "<script>" not in text
    assert "<!channel>" not in text
    assert "<https://evil" not in text
    # The review link's & is escaped in the fallback text too.
    assert "&project=p1" not in text.split("\n")[0]


async def test_slack_shows_pending_tool_calls_and_stays_within_limits(
    receiver: Receiver,
) -> None:
    context = {f"key{i}": "&" * 1000 for i in range(30)}
    notification = make_notification(
        agent="a" * 128, allowed_decisions=None, actions=TOOL_CALLS, suspend_context=context
    )
    await SlackChannel("team", receiver.url).send(notification)

    message = receiver.requests[0].json()
    text = mrkdwn_of(message)
    assert "*Pending tool calls*" in text
    assert "send_email" in text
    assert "customer@example.com" in text
    assert "decisions: approve, edit, reject" in text
    assert len(message["blocks"][0]["text"]["text"]) <= HEADER_LIMIT
    sections = [block["text"]["text"] for block in message["blocks"] if block["type"] == "section"]
    assert all(len(section) <= SECTION_LIMIT for section in sections)
    assert "more" in sections[0]


async def test_a_slack_refusal_is_permanent_and_keeps_the_url_secret(receiver: Receiver) -> None:
    receiver.status = 404
    receiver.answer = "no_service"
    failure = await failure_of(SlackChannel("team", receiver.url), make_notification())
    assert failure.retryable is False
    assert "no_service" in failure.reason
    assert receiver.url not in failure.reason


# --- email -------------------------------------------------------------------------------------


@dataclass
class Inbox:
    """An aiosmtpd handler: keeps what it accepts, refuses the addresses in ``refuse``."""

    port: int = 0
    received: list[Envelope] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if address in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.received.append(envelope)
        return "250 Message accepted for delivery"

    def message(self, index: int = 0) -> EmailMessage:
        content = self.received[index].content
        assert isinstance(content, bytes)
        parsed = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed


def authenticator(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
) -> AuthResult:
    valid = LoginPassword(b"notifier", b"s3cret")
    # handled=False: aiosmtpd answers a failure with 535 itself.
    return AuthResult(success=auth_data == valid, handled=False)


@pytest.fixture
async def inbox() -> AsyncIterator[Inbox]:
    handler = Inbox()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(
            handler,
            hostname="localhost",
            loop=loop,
            authenticator=authenticator,
            auth_require_tls=False,
        ),
        "127.0.0.1",
        0,
    )
    handler.port = server.sockets[0].getsockname()[1]
    try:
        yield handler
    finally:
        server.close()
        await server.wait_closed()


def email_channel(inbox: Inbox, **changes: Any) -> EmailChannel:
    fields: dict[str, Any] = {
        "name": "mail",
        "host": "127.0.0.1",
        "port": inbox.port,
        "sender": "Interlock <interlock@example.com>",
        "recipients": ["alice@example.com", "bob@example.com"],
    }
    fields.update(changes)
    return EmailChannel(**fields)


async def test_an_email_carries_text_and_escaped_html(inbox: Inbox) -> None:
    notification = make_notification()
    await email_channel(inbox).send(notification)

    [envelope] = inbox.received
    assert envelope.mail_from == "interlock@example.com"
    assert envelope.rcpt_tos == ["alice@example.com", "bob@example.com"]
    message = inbox.message()
    assert message["Subject"] == "Review requested: refund-approval (3f2a9c1e)"
    assert message["To"] == "alice@example.com, bob@example.com"
    assert message.get_content_type() == "multipart/alternative"
    text_part = message.get_body(preferencelist=("plain",))
    html_part = message.get_body(preferencelist=("html",))
    assert text_part is not None and html_part is not None
    text, page = text_part.get_content(), html_part.get_content()

    assert f"note: {HOSTILE}" in text
    assert "claim: CLM-4821" in text
    assert "approve, reject" in text
    assert "Deadline: 2030-01-02 10:30 UTC" in text
    assert f"Open review: {notification.review_url}" in text

    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;!channel&gt;" in page
    assert "CLM-4821" in page
    assert "2030-01-02 10:30 UTC" in page
    escaped_url = notification.review_url.replace("&", "&amp;")
    assert f'<a href="{escaped_url}">Open review</a>' in page


async def test_an_email_lists_pending_tool_calls(inbox: Inbox) -> None:
    notification = make_notification(allowed_decisions=None, actions=TOOL_CALLS, deadline=None)
    await email_channel(inbox).send(notification)

    text_part = inbox.message().get_body(preferencelist=("plain",))
    assert text_part is not None
    text = text_part.get_content()
    assert "Pending tool calls:" in text
    assert "send_email" in text
    assert "decisions: approve, edit, reject" in text
    assert "Deadline" not in text


async def test_retries_of_an_email_share_one_message_id(inbox: Inbox) -> None:
    channel = email_channel(inbox)
    await channel.send(make_notification())
    await channel.send(make_notification())
    assert inbox.message(0)["Message-ID"] == inbox.message(1)["Message-ID"]
    assert inbox.message(0)["Message-ID"].endswith("@example.com>")


async def test_email_logs_in_when_given_credentials(inbox: Inbox) -> None:
    await email_channel(inbox, username="notifier", password="s3cret").send(make_notification())
    assert len(inbox.received) == 1

    wrong = email_channel(inbox, username="notifier", password="guess")
    failure = await failure_of(wrong, make_notification())
    assert failure.retryable is False
    assert "535" in failure.reason


async def test_an_unreachable_smtp_server_fails_retryably() -> None:
    channel = EmailChannel("mail", "127.0.0.1", free_port(), "a@example.com", ["b@example.com"])
    failure = await failure_of(channel, make_notification())
    assert failure.retryable is True


async def test_a_refused_recipient_is_permanent(inbox: Inbox) -> None:
    inbox.refuse = {"gone@example.com"}
    failure = await failure_of(
        email_channel(inbox, recipients=["gone@example.com"]), make_notification()
    )
    assert failure.retryable is False
    assert "550" in failure.reason
    assert "gone@example.com" in failure.reason
    assert inbox.received == []


async def test_a_partly_refused_email_is_not_retried(inbox: Inbox) -> None:
    # Retrying would send the accepted recipients a second copy.
    inbox.refuse = {"gone@example.com"}
    channel = email_channel(inbox, recipients=["alice@example.com", "gone@example.com"])
    failure = await failure_of(channel, make_notification())
    assert failure.retryable is False
    assert "delivered to 1 of 2" in failure.reason
    assert "gone@example.com" in failure.reason
    [envelope] = inbox.received
    assert envelope.rcpt_tos == ["alice@example.com"]


@pytest.mark.parametrize(
    "recipient", ["not an address", "alice@", "alice@example.com\r\nBcc: eve@example.com"]
)
async def test_a_malformed_address_fails_without_connecting(recipient: str) -> None:
    # Nothing listens on the port: had the channel connected, it would fail retryably.
    channel = EmailChannel("mail", "127.0.0.1", free_port(), "a@example.com", [recipient])
    failure = await failure_of(channel, make_notification())
    assert failure.retryable is False
    assert "malformed" in failure.reason


# --- action links --------------------------------------------------------------------------------

LINK_SECRET = "unit-test-link-secret-of-some-length"


def minter() -> LinkMinter:
    return LinkMinter(secret=LINK_SECRET, base_url="https://interlock.example.test")


def links_in(text: str) -> dict[str, ActionLink]:
    found = re.findall(r"https://interlock\.example\.test/act/([A-Za-z0-9._-]+)", text)
    return {verify(t, LINK_SECRET).decision: verify(t, LINK_SECRET) for t in found}


async def test_each_email_recipient_gets_links_of_their_own(inbox: Inbox) -> None:
    channel = email_channel(inbox, links=minter())
    await channel.send(make_notification(link_decisions=["approve", "reject"]))

    assert [e.rcpt_tos for e in inbox.received] == [["alice@example.com"], ["bob@example.com"]]
    seen_ids = set()
    for index, who in enumerate(("alice@example.com", "bob@example.com")):
        message = inbox.message(index)
        assert message["To"] == who
        text_part = message.get_body(preferencelist=("plain",))
        assert text_part is not None
        links = links_in(text_part.get_content())
        assert sorted(links) == ["approve", "reject"]
        assert {link.recipient for link in links.values()} == {f"person:{who}"}
        assert all(link.channel == "mail" for link in links.values())
        seen_ids |= {link.link_id for link in links.values()}
    assert len(seen_ids) == 4
    # Each recipient's message has an id of its own, stable across retries.
    assert inbox.message(0)["Message-ID"] != inbox.message(1)["Message-ID"]
    await channel.send(make_notification(link_decisions=["approve", "reject"]))
    assert inbox.message(0)["Message-ID"] == inbox.message(2)["Message-ID"]


async def test_a_partly_refused_email_with_links_is_not_retried(inbox: Inbox) -> None:
    inbox.refuse = {"gone@example.com"}
    channel = email_channel(
        inbox, recipients=["alice@example.com", "gone@example.com"], links=minter()
    )
    failure = await failure_of(channel, make_notification(link_decisions=["approve"]))
    assert failure.retryable is False and "delivered to 1 of 2" in failure.reason
    assert [e.rcpt_tos for e in inbox.received] == [["alice@example.com"]]


async def test_without_link_decisions_an_email_is_one_message_without_links(inbox: Inbox) -> None:
    await email_channel(inbox, links=minter()).send(make_notification())
    [envelope] = inbox.received
    assert envelope.rcpt_tos == ["alice@example.com", "bob@example.com"]
    assert "/act/" not in inbox.message().as_string()


async def test_slack_links_decide_as_the_channel_a_group() -> None:
    posted: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content))
        return httpx.Response(200, text="ok")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    channel = SlackChannel(
        "team-slack", "https://hooks.slack.test/x", client=client, links=minter()
    )
    await channel.send(make_notification(link_decisions=["approve", "reject"]))
    await client.aclose()
    links = links_in(json.dumps(posted[0]))
    assert sorted(links) == ["approve", "reject"]
    assert {link.recipient for link in links.values()} == {"group:slack:team-slack"}
