"""The short chaos subset, run by ``make test``: each quick scenario on a fresh cluster (four
service processes, real Kafka and FerretDB), then the invariant checker: nothing lost,
duplicated or stuck, no 5xx. ``make chaos`` runs every scenario (tests/chaos/__main__.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.runner import run_scenario, table
from tests.chaos.scenarios import SCENARIOS

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.quick], ids=lambda s: s.name)
@pytest.mark.timeout(420)
async def test_quick_scenario_keeps_every_invariant(
    scenario: object, kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> None:
    from tests.chaos.runner import Scenario

    assert isinstance(scenario, Scenario)
    row = await run_scenario(scenario, kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path)
    report = table([row])
    assert row.error is None, report
    assert (row.lost, row.duplicated, row.stuck, row.server_errors) == (0, 0, 0, 0), report
    assert row.ok, report
    assert row.executions > 0, report
