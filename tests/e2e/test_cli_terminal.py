"""The reviewer CLI as people and scripts run it: ``interlock`` processes in a real
pseudo-terminal (pexpect) and as plain subprocesses, against the four services as separate
processes over real Kafka and FerretDB.

tests/unit/test_cli.py runs the same commands in-process with Typer's CliRunner; this adds what
only real processes show: the terminal's echo and line endings, Rich's spinner drawing on the
terminal the prompts use (it must leave nothing behind), Ctrl-D and Ctrl-C coming from the line
discipline, real exit statuses, the installed ``interlock`` script, and real network errors.
Every test uses a workspace of its own, so the executions it lists are the ones it started.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from interlock.profile import RunningInstance, RunningProfile, mongodb_store
from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import ledger_entries
from tests.eventually import eventually
from tests.ports import free_port

pytestmark = pytest.mark.e2e

PROJECT = "proj-cli"
WAIT = 60.0
"""Seconds any one expected output may take: the machine is shared with other e2e runs."""
ROWS, COLUMNS = 40, 120
CLI = [sys.executable, "-m", "interlock.cli"]
SCRIPT = Path(sys.executable).with_name("interlock")


"""The console script ``pip install`` wrote next to this interpreter."""

GREETING = re.compile(
    r"Chatting with (\S+) in new session (\S+) \(continue it later with --session\)\."
    r" Ctrl-D or 'exit' to quit\.\n"
)
"""A chat's first line: the new session every message of it is a turn of."""

# Rich's transient status on a colour terminal: hide the cursor, redraw the spinner line, then
# move up and erase it. Nothing of it may remain between the lines a reviewer reads.
SPINNER = re.compile(r"\x1b\[\?25l.*?\x1b\[\?25h\r\x1b\[1A\x1b\[2K", re.DOTALL)


def review_block(claim_id: str, amount: int, order: str) -> list[str]:
    """The Atlas review prompt of the refund agent, line by line (docs/cli.md)."""
    return [
        "--- Execution suspended for human review ---",
        "",
        f"  claim_id: {claim_id}",
        f"  task_description: Approve refund of ${amount} for order #{order}",
        "",
        "Select a decision:",
        "  1) approve",
        "  2) reject",
        "Select [1-2]: ",
    ]


class Terminal:
    """An ``interlock`` process in a pseudo-terminal, read in order: each ``shows`` consumes the
    output up to the text it waits for."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.transcript = io.StringIO()
        child.logfile_read = self.transcript

    def _wait(self, pattern: Any, *, exact: bool = True) -> str:
        try:
            if exact:
                self.child.expect_exact(pattern, timeout=WAIT)
            else:
                self.child.expect(pattern, timeout=WAIT)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            raise AssertionError(
                f"waited for {pattern!r} ({type(exc).__name__}); the terminal showed:\n"
                f"{self.transcript.getvalue()}"
            ) from None
        return self.screen(self.child.before)

    @staticmethod
    def screen(raw: str) -> str:
        """What a reviewer reads: Unix line ends, the erased spinner gone."""
        return SPINNER.sub("", raw.replace("\r\n", "\n"))

    async def shows(self, *lines: str) -> None:
        """The next output is exactly these lines; the last one may be a prompt, which ends
        with the space the prompt prints before reading (typing earlier would echo before it)."""
        *head, last = lines
        before = await self.until(last)
        expected = "".join(f"{line}\n" for line in head)
        assert before == expected, (
            f"expected {lines!r}; the terminal showed:\n{self.transcript.getvalue()}"
        )

    async def opens_chat(self, agent: str) -> str:
        """The chat's greeting, then its first prompt; returns the session the greeting names."""
        shown = await self.until("You> ")
        opened = GREETING.fullmatch(shown)
        assert opened and opened[1] == agent, self.transcript.getvalue()
        return opened[2]

    async def until(self, text: str) -> str:
        """Everything shown before ``text``, whatever it says."""
        return await asyncio.to_thread(self._wait, text)

    async def type(self, text: str) -> None:
        """Type a line at the prompt shown: the terminal echoes it right there."""
        self.child.sendline(text)
        echoed = await asyncio.to_thread(self._wait, f"{text}\r\n")
        assert echoed == "", self.transcript.getvalue()

    async def interrupt(self) -> None:
        """Ctrl-C: the line discipline echoes ``^C`` and sends SIGINT."""
        self.child.sendintr()
        await asyncio.to_thread(self._wait, "^C")

    async def end(self) -> tuple[str, int]:
        """The rest of the output and the exit status, once the process has exited."""
        rest = await asyncio.to_thread(self._wait, pexpect.EOF, exact=False)
        await asyncio.to_thread(self.child.close)
        assert self.child.signalstatus is None, self.transcript.getvalue()
        return rest, int(self.child.exitstatus)


def as_in_a_terminal() -> None:
    """Ctrl-C interrupts, as in a terminal's foreground job, whatever the test runner inherited:
    a runner started in the background of a non-interactive shell ignores SIGINT, its children
    inherit that, and Python then never raises ``KeyboardInterrupt`` (seen in a CI run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Reviewer:
    """An owner of PROJECT working in a workspace of their own, with the CLI configured by the
    environment alone (no profile file)."""

    cluster: Cluster
    http: httpx.AsyncClient
    workspace: str
    env: dict[str, str]

    @contextmanager
    def terminal(self, *args: str, **env: str) -> Iterator[Terminal]:
        child = pexpect.spawn(
            CLI[0],
            [*CLI[1:], *args],
            env={**self.env, **env},
            cwd=str(REPO),
            encoding="utf-8",
            dimensions=(ROWS, COLUMNS),
            timeout=WAIT,
            preexec_fn=as_in_a_terminal,
        )
        try:
            yield Terminal(child)
        finally:
            if child.isalive():
                child.terminate(force=True)

    async def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """The CLI as a script runs it: no terminal anywhere."""
        return await asyncio.to_thread(
            subprocess.run,
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            env={**self.env, **env},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=2 * WAIT,
        )

    async def executions(self) -> list[dict[str, Any]]:
        """This workspace's executions, oldest first."""
        response = await self.http.get(f"/api/v1/projects/{PROJECT}/executions", params=self._in)
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    async def audit(self, execution_id: str) -> dict[str, Any]:
        path = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/audit"
        response = await self.http.get(path, params=self._in)
        assert response.status_code == 200, response.text
        return dict(response.json())

    @property
    def _in(self) -> dict[str, str]:
        return {"workspace_id": self.workspace}


@asynccontextmanager
async def reviewer_of(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Reviewer]:
    """A new owner key of PROJECT and a new workspace on ``cluster``."""
    secret = await cluster.key(PROJECT)
    workspace = f"ws-cli-{uuid.uuid4().hex[:8]}"
    # Only the CLI's own settings: the services' INTERLOCK_* variables must not leak into it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
    env.update(
        {
            "INTERLOCK_URL": cluster.base_url,
            "INTERLOCK_API_KEY": secret,
            "INTERLOCK_PROJECT": PROJECT,
            "INTERLOCK_WORKSPACE": workspace,
            "INTERLOCK_PROFILE": str(tmp_path / "no-profile.toml"),
            # A reviewer's colour terminal of a fixed size: the spinner really draws.
            "TERM": "xterm-256color",
            "COLUMNS": str(COLUMNS),
            "LINES": str(ROWS),
        }
    )
    env.pop("NO_COLOR", None)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=cluster.base_url, headers=headers, timeout=20) as http:
        yield Reviewer(cluster, http, workspace, env)


@pytest.fixture
async def reviewer(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Reviewer]:
    async with reviewer_of(cluster, tmp_path) as someone:
        yield someone


@pytest.fixture
async def stalling_cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """A cluster of its own whose one sandbox freezes (SIGSTOP) the first time an agent run
    ends, before reporting it: that execution stays running, later ones pending."""
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path / "cluster")
    cluster.create_topics()
    cluster.start("orchestrator", "notifier", "gateway")
    faults = {
        "INTERLOCK_FAULTS": "sandbox.before_report=stall",
        "INTERLOCK_FAULTS_ONCE_DIR": str(tmp_path / "faults"),
    }
    cluster.start("sandbox", env=faults)
    try:
        await cluster.wait_ready()
        yield cluster
    finally:
        # Thawed, the sandbox finds its run fenced by the cancel and stops like the others.
        if cluster.running("sandbox"):
            cluster.send_signal("sandbox", signal.SIGCONT)
        cluster.stop()


def stopped(pid: int) -> bool:
    """Whether the process is frozen by SIGSTOP (state T in /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] == "T"
    except OSError:
        return False


@pytest.mark.timeout(300)
async def test_chat_reviews_a_refund(reviewer: Reviewer) -> None:
    with reviewer.terminal("invoke", "refund-approval") as term:
        session_id = await term.opens_chat("refund-approval")
        await term.type("Refund claim CLM-4821")
        await term.shows(*review_block("CLM-4821", 240, "98765"))
        await term.type("1")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("looks right")
        refunded = await term.until("You> ")
        term.child.sendeof()
        rest, status = await term.end()
    assert (rest, status) == ("\n", 0)

    [execution] = await reviewer.executions()
    assert (execution["session_id"], execution["turn"]) == (session_id, 1)
    assert execution["status"] == "completed"
    assert refunded == f"Execution resumed\nRefunded $240 ({execution['result']['refund_id']}).\n"
    [decision] = (await reviewer.audit(execution["execution_id"]))["decisions"]
    assert (decision["decision"], decision["reviewer_notes"]) == ("approve", "looks right")
    assert decision["reviewer"].startswith("key:")
    [refund] = ledger_entries(reviewer.cluster, execution["execution_id"])
    assert (refund["kind"], refund["amount"]) == ("refund", 240)


@pytest.mark.timeout(300)
async def test_chat_is_one_session_a_follow_up_after_a_review_knows_the_earlier_turns(
    reviewer: Reviewer,
) -> None:
    """The Atlas guide: "the CLI resumes the execution and prints Execution resumed. The session
    stays open, and you can send a follow-up message to retrieve the agent's post-resume
    output." Every message of the chat is a turn of one session, so the follow-up is answered
    knowing the turns before it, and ``--session`` continues that session later."""
    with reviewer.terminal("invoke", "conversation") as term:
        session_id = await term.opens_chat("conversation")
        await term.type("my name is Ada")
        await term.shows("turn 1: you said 'my name is Ada'; before: []", "You> ")
        await term.type("refund please")
        await term.shows(
            "--- Execution suspended for human review ---",
            "",
            "  task_description: Approve: refund please",
            "",
            "Select a decision:",
            "  1) approve",
            "  2) reject",
            "Select [1-2]: ",
        )
        await term.type("1")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("")
        await term.shows(
            "Execution resumed",
            "turn 2: you said 'refund please'; before: ['my name is Ada']; reviewer said approve",
            "You> ",
        )
        await term.type("what is my name?")
        await term.shows(
            "turn 3: you said 'what is my name?'; before: ['my name is Ada', 'refund please']",
            "You> ",
        )
        term.child.sendeof()
        rest, status = await term.end()
    assert (rest, status) == ("\n", 0)

    executions = await reviewer.executions()
    assert [(e["session_id"], e["turn"], e["status"]) for e in executions] == [
        (session_id, 1, "completed"),
        (session_id, 2, "completed"),
        (session_id, 3, "completed"),
    ]
    [decision] = (await reviewer.audit(executions[1]["execution_id"]))["decisions"]
    assert decision["decision"] == "approve"
    path = f"/api/v1/projects/{PROJECT}/sessions/{session_id}"
    listed = await reviewer.http.get(path, params={"workspace_id": reviewer.workspace})
    assert listed.status_code == 200, listed.text
    assert [t["execution_id"] for t in reversed(listed.json()["turns"])] == [
        e["execution_id"] for e in executions
    ]

    # Later, from a script: --session continues the same conversation.
    later = await reviewer.run(
        "invoke", "conversation", "and now?", "--session", session_id, "--json"
    )
    assert later.returncode == 0, later
    fourth = json.loads(later.stdout)
    assert (fourth["session_id"], fourth["turn"]) == (session_id, 4)
    assert fourth["result"]["messages"][-1]["content"] == (
        "turn 4: you said 'and now?'; before: ['my name is Ada', 'refund please',"
        " 'what is my name?']"
    )


@pytest.mark.timeout(300)
async def test_chat_reviews_a_refund_then_answers_a_follow_up(reviewer: Reviewer) -> None:
    with reviewer.terminal("invoke", "refund-approval") as term:
        await term.opens_chat("refund-approval")
        await term.type("Refund claim CLM-4821")
        await term.shows(*review_block("CLM-4821", 240, "98765"))
        await term.type("1")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("looks right")
        refunded = await term.until("You> ")

        # The follow-up is the session's second turn; a decision may be typed by name too.
        await term.type("Refund claim CLM-1002")
        await term.shows(*review_block("CLM-1002", 35, "55501"))
        await term.type("reject")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("no receipt")
        await term.shows("Execution resumed", "Refund rejected. Notes: no receipt", "You> ")

        term.child.sendeof()
        rest, status = await term.end()
    assert (rest, status) == ("\n", 0)

    first, second = await reviewer.executions()
    assert first["status"] == "completed" and second["status"] == "completed"
    assert first["input"]["message"] == "Refund claim CLM-4821"
    assert refunded == f"Execution resumed\nRefunded $240 ({first['result']['refund_id']}).\n"
    [decision] = (await reviewer.audit(first["execution_id"]))["decisions"]
    assert (decision["decision"], decision["reviewer_notes"]) == ("approve", "looks right")
    assert decision["reviewer"].startswith("key:")
    [refund] = ledger_entries(reviewer.cluster, first["execution_id"])
    assert (refund["kind"], refund["amount"]) == ("refund", 240)
    [rejection] = (await reviewer.audit(second["execution_id"]))["decisions"]
    assert (rejection["decision"], rejection["reviewer_notes"]) == ("reject", "no receipt")
    assert second["result"]["outcome"] == "rejected"


def action_block(index: int) -> list[str]:
    """One of the three emails of "send 3 emails" as the review walks it."""
    to, subject = f"prospect{index}@example.com", f"Interlock intro ({index}/3)"
    return [
        "",
        f"Action {index} of 3: send_email",
        f"  to: {to}",
        f"  subject: {subject}",
        "  body: Hello, may we tell you more?",
        "",
        f"  | Send an email to {to}",
        f"  | Subject: {subject}",
        "  | ",
        "  | Hello, may we tell you more?",
        "",
        "Select a decision:",
        "  1) approve",
        "  2) edit",
        "  3) reject",
        "Select [1-3]: ",
    ]


@pytest.mark.timeout(300)
async def test_chat_walks_three_actions_approve_edit_reject(reviewer: Reviewer) -> None:
    second = {
        "to": "prospect2@example.com",
        "subject": "Interlock intro (2/3)",
        "body": "Hello, may we tell you more?",
    }
    edited = {**second, "to": "reviewed@example.com"}
    with reviewer.terminal("invoke", "outreach-email") as term:
        await term.opens_chat("outreach-email")
        await term.type("send 3 emails")
        await term.shows("--- Execution suspended for human review ---", *action_block(1))
        await term.type("1")
        await term.shows(*action_block(2))
        await term.type("2")
        await term.shows(f"Current args: {json.dumps(second)}", "Edited args (JSON): ")
        await term.type("{not json")
        await term.shows(
            "Invalid JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
            "Edited args (JSON): ",
        )
        # The tool's schema came from the gateway: a missing argument is caught before sending.
        await term.type('{"to": "reviewed@example.com"}')
        await term.shows(
            "Invalid args for send_email: 'subject' is a required property",
            "Edited args (JSON): ",
        )
        await term.type(json.dumps(edited))
        await term.shows(*action_block(3))
        await term.type("3")
        await term.shows("Message for the agent (optional): [default: ] ")
        await term.type("not this prospect")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("batch checked")
        reply = await term.until("You> ")
        # Ctrl-C at the message prompt ends the session as Ctrl-D does.
        await term.interrupt()
        rest, status = await term.end()
    assert (rest, status) == ("\n", 0)

    [execution] = await reviewer.executions()
    assert execution["status"] == "completed", execution
    [record] = execution["decisions"]
    assert record["decisions"] == [
        {"type": "approve", "edited_action": None, "message": None},
        {"type": "edit", "edited_action": {"name": "send_email", "args": edited}, "message": None},
        {"type": "reject", "edited_action": None, "message": "not this prospect"},
    ]
    assert record["reviewer_notes"] == "batch checked"
    assert record["edits"][0]["before"]["args"] == second
    assert record["edits"][0]["after"]["args"] == edited
    sent = ledger_entries(reviewer.cluster, execution["execution_id"])
    assert sorted(e["to"] for e in sent) == ["prospect1@example.com", "reviewed@example.com"]
    # The reply printed is the agent's last message, all its lines: one result per tool call.
    [*_, last] = execution["result"]["messages"]
    assert last["role"] == "assistant" and last["content"].startswith("Done. ")
    assert reply == f"Execution resumed\n{last['content']}\n"
    for result in ("to prospect1@example.com", "to reviewed@example.com", "not this prospect"):
        assert result in reply


@pytest.mark.timeout(300)
async def test_ctrl_c_during_a_review_leaves_the_execution_suspended(reviewer: Reviewer) -> None:
    with reviewer.terminal("invoke", "refund-approval") as term:
        await term.opens_chat("refund-approval")
        await term.type("Refund claim CLM-4821")
        await term.shows(*review_block("CLM-4821", 240, "98765"))
        await term.interrupt()
        rest, status = await term.end()
    [execution] = await reviewer.executions()
    execution_id = execution["execution_id"]
    assert (rest, status) == (
        f"\nReview abandoned: execution {execution_id} stays suspended.\n",
        3,
    )
    assert execution["status"] == "suspended" and execution["decisions"] == []
    assert ledger_entries(reviewer.cluster, execution_id) == []


@pytest.mark.timeout(300)
async def test_a_refused_decision_is_one_line_and_the_session_goes_on(
    reviewer: Reviewer,
) -> None:
    member = await reviewer.cluster.key(PROJECT, "PROJECT_MEMBER")
    with reviewer.terminal("invoke", "refund-approval", INTERLOCK_API_KEY=member) as term:
        await term.opens_chat("refund-approval")
        await term.type("Refund claim CLM-4821")
        await term.shows(*review_block("CLM-4821", 240, "98765"))
        await term.type("1")
        await term.shows("Reviewer notes (optional): [default: ] ")
        await term.type("")
        await term.shows(
            "Role not allowed: resume requires PROJECT_OWNER; this key has PROJECT_MEMBER",
            "You> ",
        )
        term.child.sendeof()
        rest, status = await term.end()
    assert (rest, status) == ("\n", 0)
    [execution] = await reviewer.executions()
    assert execution["status"] == "suspended" and execution["decisions"] == []


@pytest.mark.timeout(300)
async def test_scripts_get_exit_codes_json_and_one_line_errors(reviewer: Reviewer) -> None:
    once = await reviewer.run("invoke", "refund-approval", "Refund claim CLM-4821", "--json")
    assert (once.returncode, once.stderr) == (3, ""), once
    suspended = json.loads(once.stdout)
    assert suspended["status"] == "suspended"
    assert suspended["suspend_context"]["claim_id"] == "CLM-4821"
    execution_id = suspended["execution_id"]

    # The installed script with the message on a pipe: runs once, no session, no prompt.
    piped = await asyncio.to_thread(
        subprocess.run,
        f"echo 'Refund claim CLM-1002' | {shlex.quote(str(SCRIPT))} invoke refund-approval",
        shell=True,
        env=reviewer.env,
        capture_output=True,
        text=True,
        timeout=2 * WAIT,
    )
    assert piped.returncode == 3, piped
    assert "You> " not in piped.stdout and "Select [" not in piped.stdout
    waiting = re.search(
        r"Waiting for review: interlock executions resume (\S+) --decision \.\.\.", piped.stdout
    )
    assert waiting, piped.stdout

    resumed = await reviewer.run(
        "executions", "resume", execution_id, "--decision", "approve", "--notes", "scripted"
    )
    assert (resumed.returncode, resumed.stdout) == (0, "Execution resumed (decision approve)\n")

    async def shown() -> dict[str, Any]:
        result = await reviewer.run("executions", "get", execution_id, "--json")
        assert result.returncode == 0, result
        return dict(json.loads(result.stdout))

    done = await eventually(
        shown,
        lambda body: body["status"] in ("completed", "error"),
        timeout=WAIT,
        interval=0.5,
        what=f"{execution_id} to finish",
    )
    assert done["status"] == "completed" and done["result"]["outcome"] == "refunded", done
    assert done["decisions"][0]["reviewer_notes"] == "scripted"
    other = [e for e in await reviewer.executions() if e["execution_id"] != execution_id]
    assert [(e["execution_id"], e["status"], e["input"]["message"]) for e in other] == [
        (waiting[1], "suspended", "Refund claim CLM-1002")
    ]

    wrong_key = await reviewer.run(
        "invoke",
        "refund-approval",
        "Refund claim CLM-4821",
        "--json",
        INTERLOCK_API_KEY="ilk_0000000000000000_wrong",
    )
    assert (wrong_key.returncode, wrong_key.stderr) == (
        2,
        "Authentication required: the API key is not valid (unknown, malformed or revoked)\n",
    )
    # --json: the problem document on stdout too, for the script to read.
    assert json.loads(wrong_key.stdout)["type"].endswith("/unauthenticated")

    down = await reviewer.run("reviews", "--url", f"http://127.0.0.1:{free_port()}")
    assert down.returncode == 2 and down.stdout == ""
    assert down.stderr.startswith("error: cannot reach the gateway at http://127.0.0.1:")
    assert "the URL is from --url" in down.stderr
    assert down.stderr.count("\n") == 1 and "Traceback" not in down.stderr


@pytest.mark.timeout(300)
async def test_a_cancelled_execution_ends_the_wait_at_once(
    stalling_cluster: Cluster, tmp_path: Path
) -> None:
    async with reviewer_of(stalling_cluster, tmp_path) as reviewer:
        with reviewer.terminal("invoke", "refund-approval") as term:
            await term.opens_chat("refund-approval")
            await term.type("Refund claim CLM-4821")
            # Both wait with the default --timeout of 120 s: a cancel must end the wait at once,
            # not leave them polling for a suspension that can no longer come.
            once = asyncio.create_task(
                reviewer.run("invoke", "refund-approval", "Refund claim CLM-1002", "--json")
            )
            sandbox = stalling_cluster.processes["sandbox"][0]
            executions = await eventually(
                reviewer.executions,
                lambda items: len(items) == 2 and stopped(sandbox.pid),
                timeout=WAIT,
                what="both executions, and the sandbox frozen in one of them",
            )
            assert {e["status"] for e in executions} <= {"pending", "running"}, executions
            for execution in executions:
                cancel = ("executions", "cancel", execution["execution_id"])
                cancelled = await reviewer.run(*cancel, "--reason", "claim withdrawn")
                assert cancelled.returncode == 0, cancelled

            await term.shows("Execution cancelled", "You> ")
            term.child.sendeof()
            rest, status = await term.end()
        assert (rest, status) == ("\n", 0)
        result = await once
        assert result.returncode == 1, result
        assert json.loads(result.stdout)["status"] == "cancelled"


@pytest.mark.timeout(300)
async def test_in_the_folder_of_a_running_instance_the_cli_needs_no_settings(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The running-instance profile as ``interlock up`` writes it (interlock/profile.py), here
    for the test's cluster: the CLI reads the gateway and the key from it, and ``interlock keys``
    writes to its MongoDB database, where the gateway finds a new key at once."""
    folder = tmp_path / "checkout"
    owner = await cluster.key(PROJECT)
    RunningProfile(
        RunningInstance(
            url=cluster.base_url,
            pid=os.getpid(),  # alive for as long as the test runs
            store=mongodb_store(cluster.env["INTERLOCK_MONGODB_URI"], cluster.database),
            api_key=owner,
            project=PROJECT,
            workspace=f"ws-cli-{uuid.uuid4().hex[:8]}",
        ),
        folder / ".interlock" / "profile.toml",
    ).write()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
    env["HOME"] = str(tmp_path / "home")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=2 * WAIT
        )

    listed = await asyncio.to_thread(cli, "executions", "list", "--json", "--verbose")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []
    assert f"gateway {cluster.base_url} (from the profile {folder}" in listed.stderr

    created = await asyncio.to_thread(
        cli, "keys", "create", "--project", PROJECT, "--role", "PROJECT_READ_ONLY", "--verbose"
    )
    assert created.returncode == 0, created.stderr
    assert f"database {cluster.database} (from the profile" in created.stderr
    secret = created.stdout.split("secret:", 1)[1].split()[0]
    read = await asyncio.to_thread(cli, "reviews", "--json", "--key", secret)
    assert read.returncode == 0, read.stderr

    key_id = created.stdout.split("key id:", 1)[1].split()[0]
    revoked = await asyncio.to_thread(cli, "keys", "revoke", key_id, "--project", PROJECT)
    assert revoked.returncode == 0, revoked.stderr
    refused = await asyncio.to_thread(cli, "reviews", "--json", "--key", secret)
    assert refused.returncode == 2 and json.loads(refused.stdout)["status"] == 401
