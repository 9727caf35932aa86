"""A browser-based LangGraph client meeting ``interlock dev`` (one process, SQLite, the
in-process bus): the same as against the separate-process services
(tests/e2e/test_langgraph_connect.py), with development's own CORS default: a page served from
this machine, on any port, with nothing configured."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.langgraph_sdk import connect_flows
from tests.langgraph_sdk.flows import Target
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = pytest.mark.quickstart


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    folder = tmp_path_factory.mktemp("dev-langgraph-connect")
    dev = Dev(folder / "data", extra_env=FLOWS_RATE)
    try:
        dev.start()
        url = f"{dev.url}/langgraph/projects/demo/workspaces/default"
        # These flows act as one person: the development key owns project demo.
        yield Target(url=url, owner=KEY, second_owner=KEY, other_project=KEY)
    finally:
        dev.stop()


async def test_a_page_of_this_machine_connects_and_runs_a_review(target: Target) -> None:
    await connect_flows.connect_flow(target, "http://localhost:3000")


async def test_the_assistants_are_described_as_langgraph_describes_them(target: Target) -> None:
    await connect_flows.describe_flow(target)
