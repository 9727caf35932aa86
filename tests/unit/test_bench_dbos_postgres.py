"""The DBOS-on-PostgreSQL peer of the benchmark: which server and database it runs on, how its
CPU is split from its server's, and how it is named, held as a target and shown on the page.
Nothing here needs the server (a refused connection is the only socket opened)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from bench import goals, procstats
from bench.peers import common, dbos_peer, postgres
from bench.peers.__main__ import KINDS
from bench.report import speed
from bench.report.page import peer_postgres_line
from bench.run import PEERS

SERVER = "postgresql://interlock@127.0.0.1:25432/postgres"


def test_the_run_database_replaces_the_servers_and_keeps_the_rest() -> None:
    url = postgres.database_url(SERVER, "bench_dbos_1")
    assert url == "postgresql://interlock@127.0.0.1:25432/bench_dbos_1"
    # FerretDB's spelling, a password and options: SQLAlchemy (DBOS) wants postgresql://.
    ferret = "postgres://u:s3cret@db.example:6543/ferretdb?sslmode=require"
    assert postgres.database_url(ferret, "x") == (
        "postgresql://u:s3cret@db.example:6543/x?sslmode=require"
    )
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        postgres.database_url("mongodb://u:s3cret@127.0.0.1:27117/", "x")


def test_a_password_never_reaches_a_message() -> None:
    assert postgres.redacted("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert postgres.redacted(SERVER) == SERVER
    # the page names the server, not the database the bench connected to
    ferret = "postgres://u:s3cret@127.0.0.1:25432/ferretdb?sslmode=disable"
    assert postgres.server_name(ferret) == "postgresql://u:***@127.0.0.1:25432"


def test_each_run_gets_a_fresh_database_name_that_needs_no_quoting() -> None:
    names = {postgres.fresh_database_name() for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"bench_dbos_[0-9a-f]{12}", n) for n in names)


def test_the_server_is_the_setting_else_the_one_ferretdb_runs_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(postgres.SERVER_URI, SERVER)
    assert postgres.server_url("mongodb://127.0.0.1:27117/") == SERVER
    monkeypatch.delenv(postgres.SERVER_URI)
    assert postgres.server_url(None) is None
    monkeypatch.setattr(procstats, "store_pids", lambda uri: {procstats.FERRETDB: 42})
    monkeypatch.setattr(
        procstats, "postgresql_url", lambda pid: "postgres://interlock@127.0.0.1:25432/ferretdb"
    )
    assert postgres.server_url("mongodb://127.0.0.1:27117/") == (
        "postgres://interlock@127.0.0.1:25432/ferretdb"
    )
    monkeypatch.setattr(procstats, "store_pids", lambda uri: {})  # a remote store
    assert postgres.server_url("mongodb://db.example:27017/") is None


def test_a_remote_servers_processes_are_not_looked_for_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procstats, "listener_pid", lambda port: 7 if port == 25432 else None)
    assert postgres.server_pids(SERVER) == {procstats.POSTGRESQL: 7}
    assert postgres.server_pids("postgresql://u@db.example:25432/postgres") == {}
    assert postgres.server_pids("postgresql://u@127.0.0.1:1/postgres") == {}


def test_no_server_known_says_how_to_get_one() -> None:
    with pytest.raises(postgres.Unavailable, match=postgres.SERVER_URI):
        postgres.require(None)


async def test_an_unreachable_server_fails_at_once_saying_why() -> None:
    began = time.monotonic()
    with pytest.raises(postgres.Unavailable) as raised:
        await postgres.check("postgresql://u:s3cret@127.0.0.1:1/postgres")
    message = str(raised.value)
    assert "cannot reach PostgreSQL at postgresql://u:***@127.0.0.1:1/postgres" in message
    assert "s3cret" not in message and "infra/infra.sh up" in message
    assert time.monotonic() - began < postgres.CONNECT_TIMEOUT_SECONDS


def test_the_peer_is_charged_its_own_cpu_and_its_server_is_reported_apart() -> None:
    cpu = common.cpu_split(
        1.2345,
        {procstats.POSTGRESQL: 10.0, "infra:gone": 3.0},
        {procstats.POSTGRESQL: 10.5, "infra:gone": None},  # a process that went away: left out
        4.0,
    )
    assert cpu == {
        "per_process_seconds": {"peer": 1.234, procstats.POSTGRESQL: 0.5},
        "measured_seconds": 1.234,
        "machine_busy_seconds": 4.0,
    }


def test_only_sqlite_turns_the_notification_polling() -> None:
    on_sqlite = dbos_peer.config(
        dbos_peer.SystemDatabase(
            url="sqlite:///dbos.sqlite",
            settings={"notification_listener_polling_interval_sec": 0.01},
        )
    )
    assert on_sqlite["notification_listener_polling_interval_sec"] == 0.01
    on_postgres = dbos_peer.config(
        dbos_peer.SystemDatabase(url=postgres.database_url(SERVER, "bench_dbos_1"))
    )
    assert str(on_postgres["system_database_url"]).endswith("/bench_dbos_1")
    assert "notification_listener_polling_interval_sec" not in on_postgres


async def test_sqlite_keeps_its_database_in_the_runs_directory(tmp_path: Path) -> None:
    async with dbos_peer.on_sqlite(tmp_path / "run") as database:
        assert database.url == f"sqlite:///{tmp_path / 'run' / 'dbos.sqlite'}"
        assert database.shared_pids == {}


def test_the_peer_is_run_and_named_beside_dbos_on_sqlite() -> None:
    assert goals.DBOS_POSTGRES == "dbos-postgres"
    assert PEERS.index("dbos-sqlite") + 1 == PEERS.index(goals.DBOS_POSTGRES)
    assert set(PEERS) <= set(KINDS)


def _figures(interlock: float | None, dbos: float | None) -> dict[str, Any]:
    peer = {"throughput": {"per_second": dbos, "cpu_ms_per_execution": 30.0}}
    return {
        "distributed": {"throughput": {"1": {"per_second": interlock}}},
        "peers": {"dbos-sqlite": peer, goals.DBOS_POSTGRES: peer},
    }


def _dbos_target(figures: dict[str, Any]) -> dict[str, Any]:
    found = [t for t in goals.evaluate(figures) if "DBOS on PostgreSQL" in t["name"]]
    assert len(found) == 1
    return found[0]


def test_interlock_is_held_to_dbos_on_postgres_throughput_from_the_same_run() -> None:
    missed = _dbos_target(_figures(18.0, 120.0))
    assert missed["goal"] == ">= 1.0x" and missed["measured"] == 0.15
    assert missed["met"] is False and missed["off_by"] == 6.67
    assert _dbos_target(_figures(130.0, 120.0))["met"] is True
    unmeasured = _dbos_target({"distributed": {"throughput": {"1": {"per_second": 18.0}}}})
    assert unmeasured["measured"] is None and unmeasured["met"] is None
    assert goals.ratios(_figures(18.0, 120.0))[goals.DBOS_POSTGRES]["throughput"] == 0.15


def test_the_page_shows_the_peers_cpu_and_its_servers_apart() -> None:
    alone = {"cpu_ms_per_execution": 30.04, "store_cpu_ms_per_execution": None}
    assert speed.peer_cpu(alone) == "30.0 (peer process)"
    split = {"cpu_ms_per_execution": 30.04, "store_cpu_ms_per_execution": 10.51}
    assert speed.peer_cpu(split) == "30.0 (peer process); 10.5 (its database server)"
    runs = [
        {
            "makespan_seconds": 1.2,
            "cpu": common.cpu_split(
                1.1, {procstats.POSTGRESQL: 0.0}, {procstats.POSTGRESQL: 0.4}, 2
            ),
        }
    ]
    on_sqlite = [{"cpu": common.cpu_split(1, {}, {}, 2)}]  # no server of its own: no line
    lines = speed.peer_database_cpu(
        {
            "dbos-sqlite": {"throughput": {"runs": on_sqlite}},
            goals.DBOS_POSTGRES: {"throughput": {"runs": runs}},
        }
    )
    assert len(lines) == 2 and goals.DBOS_POSTGRES in lines[1] and "0.4" in lines[1]


def test_the_ratio_table_lists_the_peer_and_says_how_it_ran() -> None:
    ratio = {
        "throughput": 0.15,
        "cpu_per_execution": 1.5,
        "invoke_to_suspended_p50": 1.0,
        "decision_to_next_step_p50": 2.0,
        "decision_to_completed_p50": 1.2,
    }
    both = {"ratios": {"dbos-sqlite": ratio, "dbos-postgres": ratio}}
    page = "\n".join(speed.ratios_section(both))
    assert "| dbos-postgres | 0.15x |" in page and "LISTEN/NOTIFY" in page
    older = "\n".join(speed.ratios_section({"ratios": {"dbos-sqlite": ratio}}))
    assert "DBOS on PostgreSQL was not run" in older
    summary = {"peer_postgresql": {"server": SERVER, "version": "15.18"}}
    assert "PostgreSQL 15.18" in peer_postgres_line(summary)[0]
    assert peer_postgres_line({}) == []
