"""The risk-tier review policy (shared/domain/policy.py) and its place in the agent registry."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware

from shared.agents import RegistryError, load_registry
from shared.domain.policy import (
    DEFAULT_TIERS,
    AgentPolicy,
    PolicyError,
    parse_policy,
    stricter,
)
from shared.errors import InterlockError

HIGH = ["approve", "edit", "reject"]
MEDIUM = ["approve", "reject"]


def sql_ops(tiers: Any = None, **extra: Any) -> AgentPolicy:
    return parse_policy("sql-ops", {"execute_sql": "medium", "read_data": "low", **extra}, tiers)


# --- parsing and defaults ---------------------------------------------------------------------


def test_default_tiers() -> None:
    defaults = dict(DEFAULT_TIERS)
    assert defaults == {"high": tuple(HIGH), "medium": tuple(MEDIUM), "low": None}
    policy = parse_policy("a", {"w": "high", "x": "medium", "y": "low"})
    assert policy.decisions_for("w") == HIGH
    assert policy.decisions_for("x") == MEDIUM
    assert policy.decisions_for("y") is None


def test_an_explicit_list_is_kept_in_canonical_order() -> None:
    policy = parse_policy("a", {"ask_user": ["respond"], "t": ["reject", "approve"]})
    assert policy.decisions_for("ask_user") == ["respond"]
    assert policy.decisions_for("t") == ["approve", "reject"]
    assert policy.tools["t"].tier is None
    assert policy.tools["ask_user"].decisions == ("respond",)


def test_tiers_can_be_overridden_and_added() -> None:
    policy = sql_ops(
        {"medium": ["approve"], "careful": ["approve", "edit"], "trusted": False},
        deploy="careful",
        lint="trusted",
    )
    assert policy.decisions_for("execute_sql") == ["approve"]
    assert policy.decisions_for("deploy") == ["approve", "edit"]
    assert policy.decisions_for("lint") is None
    assert policy.tiers["high"] == tuple(HIGH)  # untouched defaults stay


def test_an_empty_policy_table_reviews_everything_at_high() -> None:
    policy = parse_policy("a", {})
    assert policy.decisions_for("anything") == HIGH


def test_default_deny_unlisted_tools_get_the_high_tier() -> None:
    assert sql_ops().decisions_for("drop_database") == HIGH
    overridden = sql_ops({"high": ["approve", "reject", "edit", "respond"]})
    assert overridden.decisions_for("drop_database") == ["approve", "edit", "reject", "respond"]


def test_policy_is_an_interlock_error() -> None:
    assert issubclass(PolicyError, InterlockError)


# --- every error message names the agent, the tool (or tier) and what is allowed ---------------


@pytest.mark.parametrize(
    ("table", "tiers", "expected"),
    [
        (
            {"execute_sql": "hgh"},
            None,
            "agent 'sql-ops': tool 'execute_sql': unknown tier 'hgh'; use a tier (high, low,"
            " medium) or a list of decisions (approve, edit, reject, respond)",
        ),
        (
            {"ask_user": ["answer"]},
            None,
            "agent 'sql-ops': tool 'ask_user': unknown decision 'answer'; decisions are approve,"
            " edit, reject, respond",
        ),
        (
            {"execute_sql": []},
            None,
            "agent 'sql-ops': tool 'execute_sql': an empty list of decisions would leave the"
            " reviewer no answer; list at least one of approve, edit, reject, respond (or use"
            " tier 'low' to run without review)",
        ),
        (
            {"execute_sql": 3},
            None,
            "agent 'sql-ops': tool 'execute_sql': must be a tier name (high, low, medium) or a"
            " list of decisions (approve, edit, reject, respond), got int 3",
        ),
        (
            {"execute_sql": True},
            None,
            "agent 'sql-ops': tool 'execute_sql': must be a tier name (high, low, medium) or a"
            " list of decisions (approve, edit, reject, respond), got bool True",
        ),
        (
            {"execute_sql": {"allowed_decisions": ["approve"]}},
            None,
            "agent 'sql-ops': tool 'execute_sql': must be a tier name (high, low, medium) or a"
            " list of decisions (approve, edit, reject, respond), got dict",
        ),
        (
            {"execute_sql": ["approve", "approve"]},
            None,
            "agent 'sql-ops': tool 'execute_sql': a decision is listed twice",
        ),
        (
            {"execute_sql": [1]},
            None,
            "agent 'sql-ops': tool 'execute_sql': unknown decision 1",
        ),
        (
            {"execute_sql": "careful"},
            {"careful": "approve"},
            "agent 'sql-ops': tier 'careful': must be a list of decisions (approve, edit, reject,"
            " respond) or false (no review), got str 'approve'",
        ),
        (
            {},
            {"medium": []},
            "agent 'sql-ops': tier 'medium': an empty list of decisions",
        ),
        (
            {},
            {"medium": ["maybe"]},
            "agent 'sql-ops': tier 'medium': unknown decision 'maybe'",
        ),
        (
            {},
            {"high": False},
            "agent 'sql-ops': tier 'high' must require review (a list of decisions): tools the"
            " policy does not list fall back to it (default deny)",
        ),
        (
            ["execute_sql"],
            None,
            "agent 'sql-ops': [policy] must be a table keyed by name, got list",
        ),
        ({}, "medium", "agent 'sql-ops': [tiers] must be a table keyed by name, got str"),
    ],
)
def test_a_policy_that_does_not_parse_says_what_is_allowed(
    table: Any, tiers: Any, expected: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy("sql-ops", table, tiers)
    assert expected in str(caught.value)


def test_an_added_tier_is_offered_in_the_unknown_tier_message() -> None:
    with pytest.raises(PolicyError, match=r"use a tier \(careful, high, low, medium\)"):
        parse_policy("a", {"t": "carefull"}, {"careful": ["approve"]})


def test_check_tools_refuses_a_tool_the_agent_does_not_have() -> None:
    policy = sql_ops(drop_table="high")
    policy.check_tools(["execute_sql", "read_data", "drop_table", "extra"])  # extra tools are fine
    with pytest.raises(PolicyError) as caught:
        policy.check_tools(["execute_sql", "read_data"])
    assert str(caught.value) == (
        "agent 'sql-ops': the policy names tool 'drop_table', which the agent does not have;"
        " its tools are execute_sql, read_data"
    )


# --- conversion to HumanInTheLoopMiddleware's interrupt_on ------------------------------------


def test_interrupt_on_lists_every_tool_with_its_decisions() -> None:
    def describe(tool_call: Any, state: Any, runtime: Any) -> str:
        return "described"

    policy = sql_ops(ask_user=["respond"])
    result = policy.interrupt_on(
        ["execute_sql", "read_data", "ask_user", "unlisted"], descriptions={"ask_user": describe}
    )
    assert result == {
        "execute_sql": {"allowed_decisions": MEDIUM},
        "read_data": False,
        "ask_user": {"allowed_decisions": ["respond"], "description": describe},
        "unlisted": {"allowed_decisions": HIGH},  # default deny
    }
    for value in result.values():
        assert value is False or isinstance(value, dict)
        if isinstance(value, dict):
            assert isinstance(value["allowed_decisions"], list)


def test_interrupt_on_is_accepted_by_the_middleware() -> None:
    policy = sql_ops()
    middleware: HumanInTheLoopMiddleware[Any, Any, Any] = HumanInTheLoopMiddleware(
        interrupt_on=policy.interrupt_on(["execute_sql", "read_data", "unlisted"])
    )
    # The middleware drops False (runs unreviewed) and keeps the configs as given.
    assert middleware.interrupt_on == {
        "execute_sql": {"allowed_decisions": MEDIUM},
        "unlisted": {"allowed_decisions": HIGH},
    }


def test_interrupt_on_checks_the_tools_and_the_descriptions() -> None:
    with pytest.raises(PolicyError, match="names tool 'read_data'"):
        sql_ops().interrupt_on(["execute_sql"])
    with pytest.raises(PolicyError, match="descriptions given for unknown tool 'nope'"):
        sql_ops().interrupt_on(["execute_sql", "read_data"], descriptions={"nope": "text"})


# --- the rename rule --------------------------------------------------------------------------

RESPOND = ["respond"]
ALL = ["approve", "edit", "reject", "respond"]


@pytest.mark.parametrize(
    ("a", "b", "is_stricter"),
    [
        (HIGH, HIGH, False),  # the same policy
        (HIGH, None, False),  # B runs unreviewed: the model could have made the call itself
        (HIGH, ALL, False),
        (ALL, HIGH, False),  # B lacks respond, but the reviewer edited, not responded
        (HIGH, ["edit"], False),  # B runs only once edited: it was
        (HIGH, MEDIUM, True),  # B is reviewed and not editable
        (HIGH, RESPOND, True),  # send_email -> ask_user, whose code must never run
        (ALL, RESPOND, True),
        (MEDIUM, HIGH, True),  # A is not editable: no edit to rename
        (MEDIUM, None, True),
        (RESPOND, HIGH, True),
        (None, MEDIUM, True),  # A runs unreviewed: never paused, never edited
        (None, None, True),
    ],
)
def test_stricter(a: list[str] | None, b: list[str] | None, is_stricter: bool) -> None:
    assert stricter(a, b) is is_stricter


def test_renames_follow_the_stricter_rule_with_default_deny() -> None:
    policy = parse_policy(
        "outreach",
        {"send_email": "high", "ask_user": ["respond"], "log": "low", "sql": "medium"},
    )
    assert policy.allows_rename("send_email", "log")
    assert policy.allows_rename("send_email", "unlisted")  # unlisted = high: editable
    assert not policy.allows_rename("send_email", "ask_user")
    assert not policy.allows_rename("send_email", "sql")
    assert not policy.allows_rename("sql", "send_email")
    assert not policy.allows_rename("log", "send_email")
    for tool in ("send_email", "sql", "log", "ask_user"):  # keeping the tool is no rename
        assert policy.allows_rename(tool, tool)
    policy.check_rename("send_email", "log")
    with pytest.raises(PolicyError) as caught:
        policy.check_rename("send_email", "ask_user")
    assert str(caught.value) == (
        "agent 'outreach': an edit may not turn a 'send_email' call into a 'ask_user' call:"
        " 'ask_user' is reviewed (respond) but does not allow edits"
    )
    with pytest.raises(PolicyError, match=r"'sql' \(approve/reject\) does not allow edits"):
        policy.check_rename("sql", "send_email")
    with pytest.raises(PolicyError, match=r"'log' \(no review\) does not allow edits"):
        policy.check_rename("log", "unlisted")


# --- registry ---------------------------------------------------------------------------------


def registry(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text('[agents.plain]\nfactory = "agents.refund_approval:build_graph"\n\n' + body)
    return path


def test_the_registry_parses_policy_and_tiers(tmp_path: Path) -> None:
    path = registry(
        tmp_path,
        '[agents.sql-ops]\nfactory = "agents.sql_ops:build_graph"\n'
        '[agents.sql-ops.policy]\nexecute_sql = "medium"\nread_data = "low"\n'
        'ask_user = ["respond"]\n'
        '[agents.sql-ops.tiers]\nmedium = ["approve"]\n',
    )
    specs = {spec.name: spec for spec in load_registry(path).all()}
    assert specs["plain"].policy is None
    policy = specs["sql-ops"].policy
    assert policy is not None
    assert policy.decisions_for("execute_sql") == ["approve"]
    assert policy.decisions_for("read_data") is None
    assert policy.decisions_for("ask_user") == ["respond"]
    assert policy.decisions_for("other") == HIGH


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '[agents.x]\nfactory = "m:f"\n[agents.x.policy]\nsend = "hihg"\n',
            "invalid review policy: agent 'x': tool 'send': unknown tier 'hihg'",
        ),
        (
            '[agents.x]\nfactory = "m:f"\npolicy = "high"\n',
            "invalid review policy: agent 'x': [policy] must be a table",
        ),
        (
            '[agents.x]\nfactory = "m:f"\n[agents.x.tiers]\nmedium = ["approve"]\n',
            "invalid review policy: agent 'x': [tiers] is set but there is no [policy] table",
        ),
        ('[agents.x]\nfactory = "m:f"\nunknown = 1\n', "invalid agent entry"),
    ],
)
def test_a_bad_policy_fails_the_registry(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(RegistryError) as caught:
        load_registry(registry(tmp_path, body))
    assert expected in str(caught.value)


def test_the_policy_module_imports_only_pydantic_and_the_stdlib_at_runtime() -> None:
    source = Path(__file__).parents[2] / "shared" / "domain" / "policy.py"
    roots = set()
    for node in ast.parse(source.read_text()).body:  # top level only: TYPE_CHECKING is nested
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots <= {"__future__", "collections", "typing", "pydantic", "shared"}
