"""The reviewer CLI against the real gateway app, in-process: the four services' handlers on the
synchronous in-memory bus (tests/direct_bus.py) with the in-memory store (as in
test_inprocess_flow), the gateway served by Starlette's TestClient, which is the httpx client the
CLI is handed. The bus runs every step before ``publish`` returns, so each execution is settled
by the time the gateway answers and the CLI's polling never sleeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import Result
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver
from structlog.testing import capture_logs
from typer.testing import CliRunner

from agents.ledger import read_all
from interlock.cli import app
from interlock.client import invoke as invoke_module
from interlock.client import render
from interlock.client.api import ApiError
from interlock.client.config import ConfigError, load_config
from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.notifier.app import NotifierSettings
from services.notifier.app import register as register_notifier
from services.orchestrator.app import OrchestratorSettings
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import SandboxSettings
from services.sandbox.app import register as register_sandbox
from shared.store.api_keys import Role, create_key
from shared.store.memory import InMemoryStore
from tests.direct_bus import DirectBus

REVIEW_BLOCK = """--- Execution suspended for human review ---

  claim_id: CLM-4821
  task_description: Approve refund of $240 for order #98765

Select a decision:
  1) approve
  2) reject
Select [1-2]:"""


@dataclass
class Cli:
    client: TestClient
    env: dict[str, str]
    ledger: Path

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(
            app, list(args), input=input, env=self.env, obj=lambda: self.client
        )

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """The gateway directly, to set up and to check what the CLI did."""
        headers = {"Authorization": f"Bearer {self.env['INTERLOCK_API_KEY']}"}
        url = f"/api/v1/projects/demo{path}"
        response = self.client.request(
            method, url, params={"workspace_id": "default"}, headers=headers, **kwargs
        )
        assert response.status_code < 300, response.text
        return response.json()

    def start(self, agent: str, message: str) -> str:
        body = {"agent": agent, "message": message}
        started = self.api("POST", "/workspaces/default/invoke", json=body)
        return str(started["execution_id"])


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(ledger))
    common = {"kafka_bootstrap_servers": "unused:9092", "topic_prefix": "cli."}
    settings = SandboxSettings(**common)
    bus = DirectBus()
    store = InMemoryStore()
    saver = InMemorySaver()
    register_orchestrator(
        bus, OrchestratorSettings(**common), store, bus, erase_checkpoints=saver_eraser(saver)
    )
    register_sandbox(bus, settings, store, bus, saver)
    register_notifier(bus, NotifierSettings(**common), bus)
    # create_app would reconfigure structlog for the whole process: loggers cached under that
    # configuration escape later tests' capture_logs. Capturing here keeps the services' logs
    # out of the CLI's output and leaves the configuration as it was.
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    gateway = create_app(GatewaySettings(**common), store=store, publisher=bus)
    # The gateway's requests, hence the services' handlers the bus runs in them, and the store
    # live on the TestClient's event loop.
    with capture_logs(), TestClient(gateway) as client:
        _, secret = client.portal.call(
            lambda: create_key(store.api_keys, project_id="demo", role=Role.OWNER, name="t")
        )
        env = {
            "INTERLOCK_URL": str(client.base_url),
            "INTERLOCK_API_KEY": secret,
            "INTERLOCK_PROFILE": str(tmp_path / "missing.toml"),
            "INTERLOCK_PROJECT": "",
            "INTERLOCK_WORKSPACE": "",
            "COLUMNS": "200",
        }
        yield Cli(client, env, ledger)


def test_executions_list_and_get(cli: Cli) -> None:
    first = cli.start("refund-approval", "Refund claim CLM-4821")
    second = cli.start("refund-approval", "Refund claim CLM-1002")

    table = cli("executions", "list")
    assert table.exit_code == 0, table.output
    assert first in table.stdout and second in table.stdout and "suspended" in table.stdout

    raw = cli("executions", "list", "--json", "--status", "suspended", "--limit", "1")
    page = json.loads(raw.stdout)
    assert [i["execution_id"] for i in page["items"]] == [first] and page["next_cursor"]

    everything = json.loads(cli("executions", "list", "--json", "--limit", "1", "--all").stdout)
    assert [i["execution_id"] for i in everything["items"]] == [first, second]

    shown = cli("executions", "get", first)
    assert shown.exit_code == 0
    assert "CLM-4821" in shown.stdout and "approve, reject" in shown.stdout

    body = json.loads(cli("executions", "get", first, "--json").stdout)
    assert body["status"] == "suspended" and body["generation"] == 1


def test_resume_then_audit(cli: Cli) -> None:
    first = cli.start("refund-approval", "Refund claim CLM-4821")
    second = cli.start("refund-approval", "Refund claim CLM-1002")

    resumed = cli("executions", "resume", first, "--decision", "approve", "--notes", "verified")
    assert resumed.exit_code == 0, resumed.output
    assert "Execution resumed (decision approve)" in resumed.stdout

    args = ("executions", "resume", second, "--decision", "reject", "--generation", "1", "--json")
    accepted = json.loads(cli(*args).stdout)
    assert accepted["decision"] == "reject" and accepted["status"] == "accepted"

    trail = cli("executions", "audit", first)
    assert trail.exit_code == 0
    assert "suspended -> resuming" in trail.stdout and "verified" in trail.stdout

    audit = json.loads(cli("executions", "audit", first, "--json").stdout)
    assert audit["decisions"][0]["decision"] == "approve"
    assert audit["decisions"][0]["reviewer_notes"] == "verified"
    assert cli.api("GET", f"/executions/{first}")["result"]["outcome"] == "refunded"


def test_resume_with_langchain_decisions(cli: Cli) -> None:
    execution_id = cli.start("outreach-email", "send 1 email")
    decisions = json.dumps([{"type": "reject", "message": "not now"}])
    resumed = cli("executions", "resume", execution_id, "--decisions-json", decisions)
    assert resumed.exit_code == 0, resumed.output
    assert cli.api("GET", f"/executions/{execution_id}")["status"] == "completed"
    assert read_all(cli.ledger) == []


def test_reviews_lists_pending_reviews_with_their_context(cli: Cli) -> None:
    assert "No pending reviews." in cli("reviews").stdout
    refund = cli.start("refund-approval", "Refund claim CLM-4821")
    email = cli.start("outreach-email", "send 1 email")

    shown = cli("reviews")
    assert shown.exit_code == 0
    assert refund in shown.stdout and "Approve refund of $240 for order #98765" in shown.stdout
    assert email in shown.stdout and "action send_email" in shown.stdout

    page = json.loads(cli("reviews", "--json").stdout)
    assert {i["execution_id"] for i in page["items"]} == {refund, email}
    assert all(i["status"] == "suspended" for i in page["items"])


def test_invoke_exit_codes(cli: Cli) -> None:
    suspended = cli("invoke", "refund-approval", "Refund claim CLM-4821", "--json")
    assert suspended.exit_code == 3, suspended.output
    execution = json.loads(suspended.stdout)
    assert execution["status"] == "suspended"
    assert execution["suspend_context"]["claim_id"] == "CLM-4821"

    resumed = cli("executions", "resume", execution["execution_id"], "--decision", "approve")
    assert resumed.exit_code == 0
    assert cli.api("GET", f"/executions/{execution['execution_id']}")["status"] == "completed"

    # Reading a table needs no review: the agent runs to the end.
    done = cli("invoke", "sql-ops", "read orders")
    assert done.exit_code == 0, done.output
    assert "completed" in done.stdout

    failed = cli("invoke", "refund-approval", "Refund claim CLM-9999")
    assert failed.exit_code == 1, failed.output
    assert "CLM-9999 does not exist" in failed.stdout


def test_invoke_reads_the_message_from_a_file_or_stdin(cli: Cli, tmp_path: Path) -> None:
    message = tmp_path / "message.txt"
    message.write_text("Refund claim CLM-1002\n")
    from_file = cli("invoke", "refund-approval", "--file", str(message), "--json")
    assert from_file.exit_code == 3
    assert json.loads(from_file.stdout)["input"]["message"] == "Refund claim CLM-1002"

    piped = cli("invoke", "refund-approval", input="Refund claim CLM-4821\n")
    assert piped.exit_code == 3 and "Waiting for review" in piped.stdout

    both = cli("invoke", "refund-approval", "x", "--file", str(message))
    assert both.exit_code == 2 and "not both" in both.stderr
    assert cli("invoke", "refund-approval", input="").exit_code == 2


def test_interactive_review_prompt(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    session = cli("invoke", "refund-approval", input="Refund claim CLM-4821\n1\nverified\n")
    assert session.exit_code == 0, session.output
    assert REVIEW_BLOCK in session.stdout
    assert "Reviewer notes (optional): [default: ]" in session.stdout
    after_notes = session.stdout.split("Reviewer notes (optional): [default: ]", 1)[1]
    assert "Execution resumed" in after_notes
    assert "Refunded $240" in after_notes

    executions = cli.api("GET", "/executions")["items"]
    assert len(executions) == 1 and executions[0]["status"] == "completed"
    decision = executions[0]["decisions"][0]
    assert (decision["decision"], decision["reviewer_notes"]) == ("approve", "verified")


def test_a_wrong_choice_is_asked_again(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    session = cli("invoke", "refund-approval", input="Refund claim CLM-4821\n5\n2\nno receipt\n")
    assert session.exit_code == 0, session.output
    assert "Select [1-2]: 5\nChoose a number from 1 to 2.\nSelect [1-2]: 2\n" in session.stdout
    assert "Refund rejected. Notes: no receipt" in session.stdout
    outcomes = [e["result"]["outcome"] for e in cli.api("GET", "/executions")["items"]]
    assert outcomes == ["rejected"]


def test_interactive_session_takes_follow_up_messages(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    # A wrong choice is asked again; the follow-up message is the session's second turn.
    typed = "Refund claim CLM-4821\n5\n2\nno receipt\nRefund claim CLM-1002\n1\n\n"
    session = cli("invoke", "refund-approval", input=typed)
    assert session.exit_code == 0, session.output
    assert session.stdout.count("--- Execution suspended for human review ---") == 2
    assert "Refund rejected. Notes: no receipt" in session.stdout
    assert "Refunded $35" in session.stdout
    outcomes = [e["result"]["outcome"] for e in cli.api("GET", "/executions")["items"]]
    assert outcomes == ["rejected", "refunded"]


@pytest.mark.parametrize("word", ["exit", "quit", " EXIT "])
def test_exit_or_quit_ends_the_chat_without_starting_an_execution(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, word: str
) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    session = cli("invoke", "refund-approval", input=f"{word}\nRefund claim CLM-4821\n")
    assert session.exit_code == 0, session.output
    assert "--- Execution suspended" not in session.stdout
    assert cli.api("GET", "/executions")["items"] == []


def test_interactive_action_review_with_an_edit(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    edited = {"to": "ceo@example.com", "subject": "Hi", "body": "Edited."}
    typed = "\n".join(
        [
            "send 1 email",
            "2",  # edit
            "{not json",  # re-asked
            '{"to": "ceo@example.com"}',  # missing subject and body: re-asked
            json.dumps(edited),
            "checked",
            "",
        ]
    )
    session = cli("invoke", "outreach-email", input=typed)
    assert session.exit_code == 0, session.output
    assert "Action 1 of 1: send_email" in session.stdout
    assert "to: prospect1@example.com" in session.stdout
    assert "1) approve\n  2) edit\n  3) reject\nSelect [1-3]:" in session.stdout
    assert "Invalid JSON: Expecting property name" in session.stdout
    assert "Invalid args for send_email: 'subject' is a required property" in session.stdout
    assert "Execution resumed" in session.stdout

    sent = [e for e in read_all(cli.ledger) if e["kind"] == "email"]
    assert [(e["to"], e["subject"], e["body"]) for e in sent] == [
        ("ceo@example.com", "Hi", "Edited.")
    ]
    execution = cli.api("GET", "/executions")["items"][0]
    assert execution["status"] == "completed"
    assert execution["decisions"][0]["decisions"][0]["type"] == "edit"
    assert execution["decisions"][0]["reviewer_notes"] == "checked"


def test_eof_during_a_review_leaves_the_execution_suspended(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invoke_module, "stdin_is_tty", lambda: True)
    session = cli("invoke", "refund-approval", input="Refund claim CLM-4821\n")
    assert session.exit_code == 3
    assert "stays suspended" in session.stdout
    assert cli.api("GET", "/executions")["items"][0]["status"] == "suspended"


def test_problems_are_one_line_and_exit_2(cli: Cli) -> None:
    execution_id = cli.start("refund-approval", "Refund claim CLM-4821")
    refused = cli("executions", "resume", execution_id, "--decision", "escalate")
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "Decision not allowed: decision 'escalate' is not allowed here;"
        " allowed decisions: approve, reject\n"
    )

    missing = cli("executions", "get", "nope")
    assert (missing.exit_code, missing.stderr.strip()) == (
        2,
        "Execution not found: no execution nope here",
    )
    unknown = cli("invoke", "no-such-agent", "hi")
    assert unknown.exit_code == 2 and unknown.stderr.startswith("Unknown agent: ")

    usage = cli("executions", "resume", execution_id)
    assert usage.exit_code == 2 and "exactly one of --decision" in usage.stderr
    bad_json = cli("executions", "resume", execution_id, "--decisions-json", "[oops")
    assert bad_json.exit_code == 2 and "not JSON" in bad_json.stderr

    wrong_key = cli("executions", "list", "--key", "ilk_0000000000000000_wrong")
    assert wrong_key.exit_code == 2 and len(wrong_key.stderr.strip().splitlines()) == 1


def test_unreachable_gateway(cli: Cli) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    down = httpx.Client(transport=httpx.MockTransport(refuse))
    result = CliRunner().invoke(
        app, ["reviews", "--url", "http://gateway.invalid:8000"], env=cli.env, obj=lambda: down
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: cannot reach the gateway at http://gateway.invalid:8000"
    )
    assert "Traceback" not in result.output


def test_config_precedence(tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text('url = "http://profile:1/"\napi_key = "p-key"\nworkspace = "w-profile"\n')
    env = {"INTERLOCK_PROFILE": str(profile), "INTERLOCK_API_KEY": "env-key"}
    config = load_config(env=env)
    assert (config.url, config.api_key, config.project, config.workspace) == (
        "http://profile:1",
        "env-key",
        "demo",
        "w-profile",
    )
    flagged = load_config(url="http://flag:2", key="flag-key", project="p", env=env)
    assert (flagged.url, flagged.api_key, flagged.project) == ("http://flag:2", "flag-key", "p")
    with pytest.raises(ConfigError, match="no API key"):
        load_config(env={"INTERLOCK_PROFILE": str(tmp_path / "none.toml")})
    profile.write_text("url = [")
    with pytest.raises(ConfigError, match="cannot read the profile"):
        load_config(env=env)


def test_missing_key_is_a_usage_error(tmp_path: Path) -> None:
    env = {"INTERLOCK_PROFILE": str(tmp_path / "none.toml"), "INTERLOCK_API_KEY": ""}
    result = CliRunner().invoke(app, ["reviews"], env=env)
    assert result.exit_code == 2 and result.stderr.startswith("error: no API key")


def test_existing_commands_still_listed() -> None:
    shown = CliRunner().invoke(app, ["--help"])
    for command in ("service", "up", "topics", "keys", "executions", "reviews", "invoke"):
        assert command in shown.stdout


def test_cancel_stops_a_suspended_execution_and_refuses_a_finished_one(cli: Cli) -> None:
    execution_id = cli.start("refund-approval", "Refund claim CLM-4821")
    cancelled = cli("executions", "cancel", execution_id, "--reason", "claim withdrawn")
    assert cancelled.exit_code == 0, cancelled.output
    assert f"Cancellation of {execution_id} accepted" in cancelled.stdout
    shown = cli.api("GET", f"/executions/{execution_id}")
    assert shown["status"] == "cancelled"
    audit = cli.api("GET", f"/executions/{execution_id}/audit")
    assert audit["items"][-1]["reason"] == "claim withdrawn"
    again = cli("executions", "cancel", execution_id)
    assert again.exit_code == 2
    assert "Execution already finished: execution is already cancelled" in again.stderr
    late = cli("executions", "resume", execution_id, "--decision", "approve")
    assert late.exit_code == 2 and "not suspended" in late.stderr


def test_json_prints_the_problem_on_stdout_and_keeps_the_exit_code(cli: Cli) -> None:
    missing = cli("executions", "get", "nope", "--json")
    assert missing.exit_code == 2
    problem = json.loads(missing.stdout)
    assert problem["status"] == 404 and problem["type"].endswith("/execution-not-found")
    # The gateway's title and detail, once each, on one line.
    assert len(missing.stderr.splitlines()) == 1 and "nope" in missing.stderr

    execution_id = cli.start("refund-approval", "Refund claim CLM-4821")
    refused = cli("executions", "resume", execution_id, "--decision", "escalate", "--json")
    assert refused.exit_code == 2
    assert json.loads(refused.stdout)["type"].endswith("/decision-not-allowed")


def test_an_id_no_route_matches_reads_as_a_missing_execution(cli: Cli) -> None:
    result = cli("executions", "get", "a b/c")
    assert result.exit_code == 2
    assert result.stderr == "Not found: no execution 'a b/c' in project demo, workspace default\n"


def test_title_and_detail_are_each_said_once() -> None:
    assert ApiError(404, "Not Found", "Not Found").sentence() == "Not Found"
    assert ApiError(404, "Not Found", "").sentence() == "Not Found"
    assert ApiError(409, "Conflict", "conflict: stale generation").sentence() == (
        "conflict: stale generation"
    )
    assert ApiError(503, "Service unavailable", "retry later").sentence() == (
        "Service unavailable: retry later"
    )


def test_a_failed_execution_reads_as_a_sentence(cli: Cli) -> None:
    failed = cli("invoke", "refund-approval", "Refund claim CLM-9999")
    assert failed.exit_code == 1, failed.output
    assert "error: ClaimNotFound: claim CLM-9999 does not exist" in failed.stdout, failed.stdout
    assert "{" not in failed.stdout.split("error:", 1)[1]
    assert render.failure({"error_type": "unknown", "message": ""}) == (
        "the agent failed without saying why"
    )
    assert render.failure({"error_type": "RequestNotDelivered", "message": "x"}) == (
        "RequestNotDelivered: x"
    )


def test_flags_show_as_flags_in_help() -> None:
    for args in (
        ["--help"],
        ["executions", "get", "--help"],
        ["reviews", "--help"],
        ["invoke", "--help"],
        ["keys", "list", "--help"],
        ["dev", "--help"],
    ):
        shown = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        assert "<bool>" not in shown.stdout, shown.stdout
    get = CliRunner().invoke(app, ["executions", "get", "--help"], env={"COLUMNS": "200"})
    assert "--json " in get.stdout and "--verbose" in get.stdout
    dev = CliRunner().invoke(app, ["dev", "--help"], env={"COLUMNS": "200"})
    assert "--log-format" in dev.stdout


def test_invisible_characters_are_shown_in_text_and_exact_in_json(cli: Cli) -> None:
    message = "Refund claim CLM-4821 \u202eevil\u202c and a bell\x07"
    execution_id = cli.start("refund-approval", message)
    shown = cli("executions", "get", execution_id)
    assert shown.exit_code == 0, shown.output
    assert "CLM-4821 <U+202E>evil<U+202C> and a bell<U+0007>" in shown.stdout
    assert "\u202e" not in shown.stdout and "\x07" not in shown.stdout
    listed = cli("reviews")
    assert "<U+202E>" in listed.stdout and "\u202e" not in listed.stdout

    raw = cli("executions", "get", execution_id, "--json")
    assert json.loads(raw.stdout)["input"]["message"] == message
    assert "\u202e" not in raw.stdout and "\\u202e" in raw.stdout

    cli("executions", "resume", execution_id, "--decision", "approve", "--notes", "ok\u2066x")
    trail = cli("executions", "audit", execution_id)
    assert "ok<U+2066>x" in trail.stdout and "\u2066" not in trail.stdout


def test_invisible_characters_in_the_review_prompt() -> None:
    execution = {"suspend_context": {"amount\u200b": "240 \u202e042", "allowed_decisions": []}}
    block = render.decision_block(execution, ["approve\u200f"])
    assert "  amount<U+200B>: 240 <U+202E>042" in block and "1) approve<U+200F>" in block
    action = {"name": "send\x1b[2J", "args": {"to": "a\u202eb"}, "description": "x\x00y"}
    shown = render.action_block(action, 1, 1)
    assert "send<U+001B>[2J" in shown and "to: a<U+202E>b" in shown and "x<U+0000>y" in shown


def test_verbose_names_the_gateway_and_where_it_came_from(cli: Cli) -> None:
    result = cli("reviews", "--verbose")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        f"interlock: gateway {cli.env['INTERLOCK_URL']} (from INTERLOCK_URL);"
        " key from INTERLOCK_API_KEY; project demo, workspace default"
    )
    assert cli.env["INTERLOCK_API_KEY"] not in result.stderr


def test_an_unreachable_gateway_says_where_the_url_came_from(tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    down = httpx.Client(transport=httpx.MockTransport(refuse))
    env = {
        "INTERLOCK_PROFILE": str(tmp_path / "none.toml"),
        "INTERLOCK_API_KEY": "k",
        "INTERLOCK_URL": "",
        "INTERLOCK_PORT": "8100",
    }
    result = CliRunner().invoke(app, ["reviews", "--json"], env=env, obj=lambda: down)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: cannot reach the gateway at http://127.0.0.1:8100 ([Errno 111] Connection"
        " refused); the URL is from the default with INTERLOCK_PORT=8100. Start Interlock with"
        " `interlock dev` (or `make dev`), or point at a running one with --url or INTERLOCK_URL"
    ]


def test_dev_passes_the_log_format_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock import dev as dev_module

    seen: list[str] = []

    async def serve(settings: dev_module.DevSettings) -> None:
        seen.append(settings.log_format)

    monkeypatch.setattr(dev_module, "serve", serve)
    for choice in ("json", "console", "auto"):
        result = CliRunner().invoke(app, ["dev", "--log-format", choice], env={})
        assert result.exit_code == 0, result.output
    assert seen == ["json", "console", "auto"]
    wrong = CliRunner().invoke(app, ["dev", "--log-format", "xml"])
    assert wrong.exit_code == 2 and seen == ["json", "console", "auto"]
