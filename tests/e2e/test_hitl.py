"""LangChain ``HumanInTheLoopMiddleware`` agents through Interlock: every decision type of the
LangChain HITL document, per-call answers one at a time, the 400s, and the risk-tier policy.
Four service processes, real Kafka, FerretDB; scripted fake models."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import Api, ledger_entries
from tests.ports import free_port

pytestmark = pytest.mark.e2e


def decisions(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"decisions": list(items), **extra}


def edit(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


async def suspended_actions(api: Api, agent: str, message: str) -> dict[str, Any]:
    body = await api.start_suspended(agent, message)
    assert body["reviews"] and body["reviews"][0]["kind"] == "actions", body
    return body


def emails(cluster: Cluster, execution_id: str) -> list[dict[str, Any]]:
    return [e for e in ledger_entries(cluster, execution_id) if e["kind"] == "email"]


async def test_three_actions_answered_approve_edit_reject_in_order(
    api: Api, cluster: Cluster
) -> None:
    body = await suspended_actions(api, "outreach-email", "send 3 emails")
    execution_id = body["execution_id"]
    [review] = body["reviews"]
    assert review["mode"] == "batched"
    assert [a["name"] for a in review["actions"]] == ["send_email"] * 3
    assert all(a["allowed_decisions"] == ["approve", "edit", "reject"] for a in review["actions"])
    assert (
        "Send an email to prospect1@example.com"
        in body["suspend_context"]["action_requests"][0]["description"]
    )
    second = review["actions"][1]["args"]
    response = await api.resume(
        execution_id,
        decisions(
            {"type": "approve"},
            edit("send_email", **{**second, "to": "reviewed@example.com"}),
            {"type": "reject", "message": "not this prospect"},
        ),
    )
    assert response.status_code == 202, response.text
    assert response.json()["decision"] == "approve, edit, reject"
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed", done
    sent = sorted(e["to"] for e in emails(cluster, execution_id))
    assert sent == ["prospect1@example.com", "reviewed@example.com"]
    [record] = done["decisions"]
    assert [d["type"] for d in record["decisions"]] == ["approve", "edit", "reject"]
    assert record["edits"][0]["before"]["args"]["to"] == "prospect2@example.com"
    assert record["edits"][0]["after"]["args"]["to"] == "reviewed@example.com"
    tool_results = [m for m in done["result"]["messages"] if m["role"] == "tool"]
    assert any("not this prospect" in str(m["content"]) for m in tool_results)


async def test_approve_with_the_atlas_word_and_reject_with_a_message(
    api: Api, cluster: Cluster
) -> None:
    approved = await suspended_actions(api, "outreach-email", "send 1 email")
    assert (await api.resume(approved["execution_id"], {"decision": "approve"})).status_code == 202
    rejected = await suspended_actions(api, "outreach-email", "send 1 email")
    response = await api.resume(
        rejected["execution_id"], decisions({"type": "reject", "message": "wrong list"})
    )
    assert response.status_code == 202
    await api.wait_for(approved["execution_id"], "completed")
    done = await api.wait_for(rejected["execution_id"], "completed")
    assert len(emails(cluster, approved["execution_id"])) == 1
    assert emails(cluster, rejected["execution_id"]) == []
    rejection = [m for m in done["result"]["messages"] if m["role"] == "tool"]
    assert "wrong list" in str(rejection[0]["content"])


async def test_respond_answers_for_the_tool_which_never_runs(api: Api, cluster: Cluster) -> None:
    body = await suspended_actions(api, "outreach-email", "ask the user, then send 1 email")
    execution_id = body["execution_id"]
    [action] = body["reviews"][0]["actions"]
    assert action["name"] == "ask_user" and action["allowed_decisions"] == ["respond"]
    response = await api.resume(
        execution_id, decisions({"type": "respond", "message": "Tuesday at 10"})
    )
    assert response.status_code == 202, response.text
    # The answer became the tool's result; the email the model then writes waits for review.
    second = await api.wait_for_suspension(execution_id, after=body["suspension_id"])
    email_args = second["reviews"][0]["actions"][0]["args"]
    assert "Tuesday at 10" in email_args["body"]
    assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 202
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed", done
    assert len(emails(cluster, execution_id)) == 1


async def test_per_call_mode_answered_one_interrupt_at_a_time(api: Api, cluster: Cluster) -> None:
    body = await suspended_actions(api, "outreach-email-per-call", "send 2 emails")
    execution_id = body["execution_id"]
    assert len(body["reviews"]) == 2 and {r["mode"] for r in body["reviews"]} == {"per_call"}
    first, second = body["reviews"]
    ambiguous = await api.resume(execution_id, decisions({"type": "approve"}))
    assert ambiguous.status_code == 400 and "interrupt_id" in ambiguous.json()["detail"]
    response = await api.resume(
        execution_id, decisions({"type": "approve"}, interrupt_id=first["interrupt_id"])
    )
    assert response.status_code == 202, response.text
    again = await api.wait_for_suspension(execution_id, after=body["suspension_id"])
    assert [r["interrupt_id"] for r in again["reviews"]] == [second["interrupt_id"]]
    to = second["actions"][0]["args"]
    response = await api.resume(
        execution_id,
        decisions(
            edit("send_email", **{**to, "to": "edited@example.com"}), generation=again["generation"]
        ),
    )
    assert response.status_code == 202, response.text
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed", done
    assert sorted(e["to"] for e in emails(cluster, execution_id)) == [
        "edited@example.com",
        first["actions"][0]["args"]["to"],
    ]


@pytest.mark.parametrize(
    ("agent", "message", "answer", "reason"),
    [
        (
            "outreach-email",
            "send 2 emails",
            decisions({"type": "approve"}),
            "2 action(s) are pending and 1 decision(s) were sent",
        ),
        (
            "sql-ops",
            "sql: DELETE FROM orders",
            decisions(edit("execute_sql", query="SELECT 1")),
            "decision 1 (edit) for action execute_sql is not allowed; allowed: approve, reject",
        ),
        (
            "outreach-email",
            "send 1 email",
            decisions(edit("send_email", to=42, subject="x", body="y")),
            "do not fit send_email's schema: to: 42 is not of type 'string'",
        ),
        (
            "outreach-email",
            "send 1 email",
            decisions(edit("ask_user", question="?")),
            "renames the call to ask_user, whose policy is stricter",
        ),
        (
            "outreach-email",
            "ask the user",
            decisions({"type": "respond"}),
            "needs a 'message': it becomes the tool's result",
        ),
        ("outreach-email", "send 2 emails", {"decision": "approve"}, "2 actions are pending"),
    ],
    ids=[
        "count",
        "type-not-allowed",
        "edit-schema",
        "rename-stricter",
        "respond-no-message",
        "word-for-many",
    ],
)
async def test_invalid_answers_are_400_and_leave_the_execution_suspended(
    api: Api, cluster: Cluster, agent: str, message: str, answer: dict[str, Any], reason: str
) -> None:
    body = await suspended_actions(api, agent, message)
    execution_id = body["execution_id"]
    response = await api.resume(execution_id, answer)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert reason in response.json()["detail"]
    after = await api.status_of(execution_id)
    assert after["status"] == "suspended" and after["decisions"] == []
    # A valid answer still goes through: nothing was claimed by the invalid one.
    count = len(body["reviews"][0]["actions"])
    first_type = body["reviews"][0]["actions"][0]["allowed_decisions"][0]
    fix = decisions(
        *[
            {"type": "reject", "message": "no"}
            if first_type != "respond"
            else {"type": "respond", "message": "ok"}
            for _ in range(count)
        ]
    )
    assert (await api.resume(execution_id, fix)).status_code == 202


async def test_policy_tiers_decide_what_pauses(api: Api, cluster: Cluster) -> None:
    read = await api.invoke("sql-ops", "read customers")
    done = await api.wait_for(read.json()["execution_id"], "completed", "suspended", "error")
    assert done["status"] == "completed"  # low tier: runs without review
    body = await suspended_actions(api, "sql-ops", "sql: DELETE FROM orders WHERE id = 7")
    [action] = body["reviews"][0]["actions"]
    assert (action["name"], action["allowed_decisions"]) == ("execute_sql", ["approve", "reject"])
    assert (await api.resume(body["execution_id"], {"decision": "approve"})).status_code == 202
    await api.wait_for(body["execution_id"], "completed")
    queries = [
        e["query"] for e in ledger_entries(cluster, body["execution_id"]) if e["kind"] == "sql"
    ]
    assert queries == ["DELETE FROM orders WHERE id = 7"]


@pytest.mark.parametrize(
    ("policy", "reason", "serves"),
    [
        # The agents file itself is invalid: no service starts on it (as with a TOML error).
        ('[agents.sql-ops.policy]\nexecute_sql = "extreme"\n', "extreme", False),
        # The agent's graph lacks the tool: that agent does not load, the others serve.
        ('[agents.sql-ops.policy]\ndrop_table = "high"\n', "drop_table", True),
    ],
    ids=["unknown-tier", "unknown-tool"],
)
async def test_a_bad_policy_never_runs_the_agents_tools_unreviewed(
    cluster: Cluster, tmp_path: Path, policy: str, reason: str, serves: bool
) -> None:
    """A policy that does not parse makes the agents file invalid: the sandbox does not start,
    naming why. One that names a tool the agent lacks makes that agent unloadable: the sandbox
    says why (agent.unloadable) and the agent beside it loads. The sandbox runs on topics and a
    group of its own, so it takes no work from the session's cluster."""
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.sql-ops]\nfactory = "agents.sql_ops:build_graph"\ndescription = "ops"\n'
        + policy
        + '[agents.refund-approval]\nfactory = "agents.refund_approval:build_graph"\n'
    )
    own = f"bad-policy-{uuid.uuid4().hex[:8]}"
    env = {
        **cluster.env,
        "INTERLOCK_AGENTS_FILE": str(agents),
        "INTERLOCK_TOPIC_PREFIX": f"{own}.",
        "INTERLOCK_CONSUMER_GROUP_PREFIX": own,
        # And a database of its own: the versions it publishes are not the session's.
        "INTERLOCK_MONGODB_DATABASE": own.replace("-", "_"),
        "INTERLOCK_HEALTH_PORT": str(free_port()),
    }
    env.pop("INTERLOCK_KAFKA_GROUP_INSTANCE_ID", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "interlock.cli",
        "service",
        "sandbox",
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    lines: list[str] = []

    async def until_both_reported() -> None:
        assert process.stdout is not None
        while not (
            any('"agent.unloadable"' in line for line in lines)
            and any('"agent.loaded"' in line and "refund-approval" in line for line in lines)
        ):
            line = await process.stdout.readline()
            if not line:
                raise AssertionError("the sandbox exited:\n" + "".join(lines[-40:]))
            lines.append(line.decode(errors="replace"))

    if not serves:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode != 0
        text = output.decode(errors="replace")
        assert "sql-ops" in text and reason in text, text[-2000:]
        return
    try:
        await asyncio.wait_for(until_both_reported(), timeout=60)
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)
    [unloadable] = [line for line in lines if '"agent.unloadable"' in line]
    assert "sql-ops" in unloadable and reason in unloadable, unloadable
