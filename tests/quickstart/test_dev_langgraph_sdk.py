"""langgraph-sdk, pointed at ``interlock dev`` (one process, SQLite, the in-process bus): the
same flows as against the separate-process services (tests/e2e/test_langgraph_sdk.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.langgraph_sdk import flows, webhook_receiver
from tests.quickstart.test_dev_keys import cli, wait_for_profile
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = pytest.mark.quickstart


def created_key(folder: Path, project: str, email: str) -> str:
    made = cli(
        folder,
        "keys",
        "create",
        "--project",
        project,
        "--role",
        "PROJECT_OWNER",
        "--email",
        email,
        "--quiet",
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[flows.Target]:
    folder = tmp_path_factory.mktemp("dev-langgraph")
    dev = Dev(folder / "data", extra_env={**FLOWS_RATE, **webhook_receiver.ENV})
    try:
        dev.start()
        wait_for_profile(folder / ".interlock" / "profile.toml")
        yield flows.Target(
            url=f"{dev.url}/langgraph/projects/demo/workspaces/default",
            owner=KEY,
            second_owner=created_key(folder, "demo", "approver@example.com"),
            other_project=created_key(folder, "elsewhere", "stranger@example.com"),
        )
    finally:
        dev.stop()


async def test_the_refund_flow(target: flows.Target) -> None:
    await flows.refund_flow(target)


async def test_a_fact_remembered_across_threads_through_the_store(target: flows.Target) -> None:
    await flows.memory_flow(target)


async def test_a_runs_webhook_arrives_once_signed_at_its_interrupt_and_its_end(
    target: flows.Target,
) -> None:
    await flows.webhook_flow(target)


async def test_a_cron_runs_each_tick_once_with_its_webhook(target: flows.Target) -> None:
    await flows.cron_flow(target)


async def test_a_cron_on_a_thread_runs_each_tick_as_its_next_turn(target: flows.Target) -> None:
    await flows.thread_cron_flow(target)


async def test_the_middleware_answered_approve_edit_reject(target: flows.Target) -> None:
    await flows.middleware_flow(target)


async def test_a_streamed_run_and_its_resumed_run(target: flows.Target) -> None:
    await flows.stream_flow(target)


async def test_a_run_created_joined_and_cancelled(target: flows.Target) -> None:
    await flows.cancel_flow(target)


async def test_other_projects_see_nothing_and_duties_stay_separate(target: flows.Target) -> None:
    await flows.isolation_flow(target)


async def test_a_thread_is_a_conversation_with_a_busy_thread_policy(target: flows.Target) -> None:
    await flows.conversation_flow(target)
