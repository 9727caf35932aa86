"""``interlock invoke`` and sessions: the chat is one session (each message its next turn, so the
agent sees the earlier ones), ``--session`` continues one in either mode, and a message a busy
session refuses leaves the chat open. Against the real gateway app in-process (the ``cli``
fixture of test_cli) with the ``conversation`` agent, whose reply names the earlier messages."""

from __future__ import annotations

import re

import pytest

from interlock.client import invoke as invoke_module
from tests.unit.test_cli import Cli, cli  # noqa: F401 (the fixture)

GREETING = re.compile(
    r"^Chatting with conversation in new session (\S+) \(continue it later with --session\)\."
    r" Ctrl-D or 'exit' to quit\.$",
    re.MULTILINE,
)


@pytest.fixture(autouse=True)
def in_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)


def turns(through: Cli, session_id: str) -> list[tuple[int, str]]:
    """The session's turns as the gateway lists them, oldest first: (turn, status)."""
    listed = through.api("GET", f"/sessions/{session_id}")["turns"]
    return [(t["turn"], t["status"]) for t in reversed(listed)]


def test_the_chat_is_one_session_and_a_follow_up_after_a_review_knows_the_earlier_turns(
    cli: Cli,  # noqa: F811
) -> None:
    typed = "my name is Ada\nrefund please\n1\nchecked\nwhat is my name?\n"
    chat = cli("invoke", "conversation", input=typed)
    assert chat.exit_code == 0, chat.output
    greeted = GREETING.search(chat.stdout)
    assert greeted and chat.stdout.startswith(greeted[0]), chat.stdout
    session_id = greeted[1]
    assert chat.stdout.count(session_id) == 1  # said once, at the start
    assert "turn 1: you said 'my name is Ada'; before: []" in chat.stdout
    assert (
        "Execution resumed\nturn 2: you said 'refund please'; before: ['my name is Ada'];"
        " reviewer said approve\n" in chat.stdout
    )
    assert (
        "turn 3: you said 'what is my name?'; before: ['my name is Ada', 'refund please']"
        in chat.stdout
    )

    assert turns(cli, session_id) == [(1, "completed"), (2, "completed"), (3, "completed")]
    executions = cli.api("GET", "/executions")["items"]
    assert [(e["session_id"], e["turn"]) for e in executions] == [
        (session_id, 1),
        (session_id, 2),
        (session_id, 3),
    ]
    assert executions[1]["decisions"][0]["reviewer_notes"] == "checked"


def test_each_chat_starts_a_session_of_its_own(cli: Cli) -> None:  # noqa: F811
    first = cli("invoke", "conversation", input="hello\n")
    second = cli("invoke", "conversation", input="hello again\n")
    ids = [GREETING.search(chat.stdout) for chat in (first, second)]
    assert ids[0] and ids[1] and ids[0][1] != ids[1][1]
    assert "turn 1: you said 'hello again'; before: []" in second.stdout


def test_session_continues_a_session_once_and_in_a_chat(cli: Cli) -> None:  # noqa: F811
    once = cli("invoke", "conversation", "my name is Ada", "--session", "s-ada", "--json")
    assert once.exit_code == 0, once.output
    assert '"session_id": "s-ada"' in once.stdout and '"turn": 1' in once.stdout
    again = cli("invoke", "conversation", "I like tea", "--session", "s-ada")
    assert again.exit_code == 0, again.output
    assert "turn 2: you said 'I like tea'; before: ['my name is Ada']" in again.stdout

    chat = cli("invoke", "conversation", "--session", "s-ada", input="what is my name?\n")
    assert chat.exit_code == 0, chat.output
    assert chat.stdout.startswith(
        "Chatting with conversation in session s-ada (2 turns so far). Ctrl-D or 'exit' to quit.\n"
    )
    assert (
        "turn 3: you said 'what is my name?'; before: ['my name is Ada', 'I like tea']"
        in chat.stdout
    )
    assert turns(cli, "s-ada") == [(1, "completed"), (2, "completed"), (3, "completed")]

    # An id no session has yet starts one, as the API does (a script may name its sessions).
    fresh = cli("invoke", "conversation", "--session", "s-new", input="hi\n")
    assert fresh.stdout.startswith(
        "Chatting with conversation in new session s-new (continue it later with --session)."
    )
    assert turns(cli, "s-new") == [(1, "completed")]

    # Without --session a one-off execution is no session's turn.
    alone = cli("invoke", "conversation", "hi", "--json")
    assert '"session_id": null' in alone.stdout


def test_a_busy_session_refuses_the_message_and_the_chat_goes_on(cli: Cli) -> None:  # noqa: F811
    waiting = cli("invoke", "conversation", "refund please", "--session", "s-busy", "--quiet")
    assert waiting.exit_code == 3, waiting.output
    execution_id = waiting.stdout.strip()

    chat = cli("invoke", "conversation", "--session", "s-busy", input="hello\nstill there?\n")
    assert chat.exit_code == 0, chat.output
    assert chat.stdout.startswith(
        "Chatting with conversation in session s-busy (1 turn so far). Ctrl-D or 'exit' to quit.\n"
        f"Waiting for review: interlock executions resume {execution_id} --decision ...\n"
    )
    refused = (
        "Session is busy: session s-busy has a turn suspended: wait for it, answer its review,"
        " or send another multitask_strategy (enqueue, interrupt, rollback)\n"
        f"Follow the busy turn with `interlock executions get {execution_id}`\n"
    )
    assert chat.stderr == refused * 2  # both messages refused; the chat went on to EOF
    assert turns(cli, "s-busy") == [(1, "suspended")]  # nothing queued behind the review

    once = cli("invoke", "conversation", "hello", "--session", "s-busy")
    assert once.exit_code == 2 and once.stderr.startswith("Session is busy: "), once.output


def test_a_session_of_another_agent_or_a_malformed_id_is_refused(cli: Cli) -> None:  # noqa: F811
    assert cli("invoke", "conversation", "hi", "--session", "s-other").exit_code == 0
    other = cli("invoke", "refund-approval", "--session", "s-other", input="Refund CLM-4821\n")
    assert other.exit_code == 0, other.output
    assert (
        "Agent does not match the session: session s-other is a conversation with agent"
        " 'conversation', not 'refund-approval'" in other.stderr
    )

    malformed = cli("invoke", "conversation", "--session", "no spaces", input="hi\n")
    assert malformed.exit_code == 2, malformed.output
    assert "You>" not in malformed.stdout
