"""Issue 17, finding 6, as the attack: after a run with a caller's custom header, a byte search
of the broker's log directory and of the store's data finds no header value, while the agent
received it. Four service processes, the local Kafka broker and FerretDB of ``infra/infra.sh``
(its SQLite files, or the PostgreSQL server behind it), and every stored document as read back.

The directories are found from the running servers themselves (``.infra/*.pid`` and their
command lines), and only when they serve the addresses the tests were given: a broker or a
store elsewhere (testcontainers, a remote one) has no directory here to search, and the test
is skipped saying so.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pymongo import AsyncMongoClient

from shared.store.mongo.compression import decompressed, loaded_typed
from tests.e2e.cluster import REPO, SERVICES, Cluster
from tests.e2e.conftest import Api, ledger_entries

pytestmark = pytest.mark.e2e

INFRA = REPO / ".infra"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def command_line(pid_file: Path) -> list[str] | None:
    """The command line of the live process named by ``pid_file``, or None."""
    try:
        pid = int(pid_file.read_text().split()[0])
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    return [part.decode() for part in raw.split(b"\0") if part]


def local_kafka_log_dirs(bootstrap: str) -> list[Path]:
    """The log directories of the broker ``infra/infra.sh`` runs, if it is the one at
    ``bootstrap``; skips the test otherwise."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    args = command_line(INFRA / "kafka.pid")
    if host not in LOOPBACK or args is None or not args[-1].endswith(".properties"):
        pytest.skip(f"Kafka at {bootstrap} is not the local broker of infra/infra.sh")
    properties = dict(
        line.split("=", 1)
        for line in Path(args[-1]).read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    if f":{port}" not in properties.get("listeners", ""):
        pytest.skip(f"the local broker does not listen on {bootstrap}")
    return [Path(d) for d in properties["log.dirs"].split(",")]


def local_ferretdb_data_dir(uri: str) -> Path:
    """Where the FerretDB ``infra/infra.sh`` runs keeps its data, if it serves ``uri``: its
    SQLite directory, or the data directory of the PostgreSQL server behind it."""
    where = urlsplit(uri)
    args = command_line(INFRA / "ferretdb.pid") or []
    flags = dict(a.removeprefix("--").split("=", 1) for a in args[1:] if "=" in a)
    listen = flags.get("listen-addr", "")
    if where.hostname not in LOOPBACK or not listen.endswith(f":{where.port}"):
        pytest.skip(f"MongoDB at {uri} is not the local FerretDB of infra/infra.sh")
    sqlite = flags.get("sqlite-url", "")
    if sqlite.startswith("file:"):
        return Path(sqlite.removeprefix("file:").split("?")[0])
    postgres = urlsplit(flags.get("postgresql-url", ""))
    server = command_line(INFRA / "postgres.pid") or []
    if "-D" not in server or f"port={postgres.port}" not in server:
        pytest.skip("the local FerretDB's PostgreSQL is not the server of infra/infra.sh")
    # Committed rows reach the write-ahead log (pg_wal) at once, the table files later.
    return Path(server[server.index("-D") + 1])


def files_holding(folders: list[Path], needle: str, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """Every file under ``folders`` whose bytes hold ``needle``.

    The other test workers share the broker and the store, and delete their topics (and the
    servers recycle their files) while this walks: a file or folder that vanishes mid-walk is
    not this test's (its own topics live until the test ends) and is passed over."""
    data = needle.encode()
    found = []
    for folder in folders:
        for parent, _, names in os.walk(folder):  # os.walk passes over folders that vanish
            for name in names:
                path = Path(parent, name)
                if name.endswith(skip):
                    continue
                try:
                    if data in path.read_bytes():
                        found.append(path)
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    continue
    return found


def readable(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with what the store compressed (shared/store/mongo/compression.py) read back,
    so that a search sees into it."""
    opened = dict(document)
    if isinstance(opened.get("body_zlib"), bytes):
        opened["body_zlib"] = decompressed(opened["body_zlib"]).decode()
    type_ = opened.get("type")
    if isinstance(type_, str):
        for field in ("checkpoint", "value"):
            if isinstance(opened.get(field), bytes):
                opened[field] = loaded_typed(type_, opened[field])[1]
    if isinstance(opened.get("writes"), list):  # a checkpoint's pending writes, each typed
        opened["writes"] = [readable(w) if isinstance(w, dict) else w for w in opened["writes"]]
    return opened


async def stored_documents(uri: str, database: str) -> list[str]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    try:
        db = client[database]
        return [
            json.dumps(readable(document), default=str)
            for name in await db.list_collection_names()
            async for document in db[name].find()
        ]
    finally:
        await client.close()


# Kafka's offset and time indexes hold positions only, never record bytes, and are preallocated
# (10 MiB each per partition): reading them would only read zeros.
KAFKA_INDEXES = (".index", ".timeindex")


async def test_a_custom_header_value_rests_nowhere_in_plain_text(
    api: Api, cluster: Cluster, kafka_bootstrap: str, mongodb_uri: str
) -> None:
    kafka_dirs = local_kafka_log_dirs(kafka_bootstrap)
    store_dir = local_ferretdb_data_dir(mongodb_uri)
    first, second = (f"end-user-token-{secrets.token_hex(16)}" for _ in range(2))

    invoked = await api.client.post(
        f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke",
        json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
        headers={"X-Interlock-Custom-Token": first},
    )
    assert invoked.status_code == 202, invoked.text
    execution_id = invoked.json()["execution_id"]
    await api.wait_for(execution_id, "suspended")
    resumed = await api.client.post(
        f"/api/v1/projects/{api.project}/executions/{execution_id}/resume",
        params={"workspace_id": api.workspace},
        json={"decision": "approve"},
        headers={"X-Interlock-Custom-Token": second},
    )
    assert resumed.status_code == 202, resumed.text
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed", done
    # The agent received the header sent with the resume (the segment it ran in).
    [refund] = ledger_entries(cluster, execution_id)
    assert refund["custom_headers"] == {"x-interlock-custom-token": second}
    assert not [
        a for a in (await api.audit(execution_id)).json()["items"] if "unreadable" in a["action"]
    ]

    # The searches read the right bytes: the execution's own messages and documents are there.
    assert files_holding(kafka_dirs, execution_id, skip=KAFKA_INDEXES), "no segment holds it"
    assert files_holding([store_dir], execution_id), "no store file holds the execution"
    # PostgreSQL compresses large values on disk, where a byte search cannot see into them:
    # every stored document is searched as the server returns it too.
    documents = await stored_documents(mongodb_uri, cluster.database)
    assert any(execution_id in d for d in documents), "no document holds the execution"
    for secret in (first, second):
        assert files_holding(kafka_dirs, secret, skip=KAFKA_INDEXES) == []
        assert files_holding([store_dir], secret) == []
        assert not [d for d in documents if secret in d]
        for service in SERVICES:
            assert secret not in cluster.log_tail(service, lines=100_000), service
