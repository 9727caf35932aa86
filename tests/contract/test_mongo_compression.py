"""State-sized values on a real MongoDB-compatible server (shared/store/mongo/compression.py):
an execution holding its final state and the sandbox's checkpoints are stored compressed once
big enough, read back whole, and a replica writing the plain form (``INTERLOCK_STORE_COMPRESSION
=false``, a rolling upgrade) and one writing the compressed form read each other's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from pymongo import AsyncMongoClient

from services.sandbox.checkpoint_run import current_run, known_to_be_new
from services.sandbox.mongo_checkpoints import AsyncMongoSaver, run_scope
from services.sandbox.thread_base import copy_base
from shared.domain.execution import ExecutionStatus
from shared.events import ThreadTurn
from shared.store.mongo import Document, MongoStore, compression
from tests import factories as f
from tests.conftest import unique_name
from tests.contract.test_mongo_checkpoints import graph_on

pytestmark = pytest.mark.integration

CONVERSATION = {
    "messages": [
        {"type": "human" if n % 2 else "ai", "content": f"turn {n}: the refund for claim {n * 7}"}
        for n in range(200)
    ]
}


@pytest.fixture
async def client(mongodb_uri: str) -> AsyncIterator[tuple[AsyncMongoClient[Document], str]]:
    connected: AsyncMongoClient[Document] = AsyncMongoClient(mongodb_uri, tz_aware=True)
    name = unique_name("compression")
    try:
        yield connected, name
    finally:
        await connected.drop_database(name)
        await connected.close()


async def ended_with_state(store: MongoStore, execution_id: str) -> Any:
    created, _ = await store.executions.create(f.pending(execution_id))
    ended = await store.executions.replace(
        created,
        created.model_copy(update={"status": ExecutionStatus.COMPLETED, "result": CONVERSATION}),
    )
    assert ended is not None
    return ended


async def test_an_execution_holding_its_state_is_stored_compressed_and_read_back_whole(
    client: tuple[AsyncMongoClient[Document], str],
) -> None:
    connected, name = client
    store = MongoStore(connected, name)
    ended = await ended_with_state(store, "big")
    head = await connected[name]["executions"].find_one({"_id": "big"})
    version = await connected[name]["execution_versions"].find_one({"_id": "big:000000000002"})
    assert head is not None and version is not None
    for document in (head, version):
        assert "body" not in document and isinstance(document["body_zlib"], bytes)
    assert len(head["body_zlib"]) < len(ended.model_dump_json()) / 3
    assert await store.executions.get(ended.project_id, "big") == ended
    page = await store.executions.list(ended.project_id, ended.workspace_id)
    assert page.items == [ended]
    small, _ = await store.executions.create(f.pending("small"))
    plain = await connected[name]["executions"].find_one({"_id": "small"})
    assert plain is not None and isinstance(plain["body"], str)  # readable as it was
    assert await store.executions.get(small.project_id, "small") == small


async def test_a_plain_writer_and_a_compressing_one_read_each_others_executions(
    client: tuple[AsyncMongoClient[Document], str],
) -> None:
    connected, name = client
    compressing = MongoStore(connected, name)
    plain = MongoStore(connected, name, compress_state=False)
    by_plain = await ended_with_state(plain, "by-plain")
    by_compressing = await ended_with_state(compressing, "by-compressing")
    stored = await connected[name]["executions"].find_one({"_id": "by-plain"})
    assert stored is not None and "body" in stored and "body_zlib" not in stored
    assert await compressing.executions.get(by_plain.project_id, "by-plain") == by_plain
    assert await plain.executions.get(by_plain.project_id, "by-compressing") == by_compressing


async def test_a_big_checkpoint_is_stored_compressed_and_either_writer_reads_the_other(
    client: tuple[AsyncMongoClient[Document], str],
) -> None:
    connected, name = client
    db = connected[name]
    long_log = [f"line {n} of what the agent said about claim {n * 7}" for n in range(300)]
    for writer, reader, thread in (
        (AsyncMongoSaver(db), AsyncMongoSaver(db, compress=False), "compressed"),
        (AsyncMongoSaver(db, compress=False), AsyncMongoSaver(db), "plain"),
    ):
        config = {"configurable": {"thread_id": thread}}
        async with run_scope():
            await graph_on(writer).ainvoke({"log": long_log}, config, durability="exit")
        head = await db["checkpoint_heads"].find_one({"thread_id": thread})
        assert head is not None
        assert head["type"].endswith(compression.SUFFIX) is (thread == "compressed")
        state = await graph_on(reader).aget_state(config)
        assert state.values["log"][:300] == long_log and state.next == ("review",)


async def test_a_turns_copy_of_its_base_keeps_the_stored_compressed_bytes(
    client: tuple[AsyncMongoClient[Document], str],
) -> None:
    connected, name = client
    db = connected[name]
    saver = AsyncMongoSaver(db)
    long_log = [f"line {n} of what the agent said about claim {n * 7}" for n in range(300)]
    base = {"configurable": {"thread_id": "base"}}
    async with run_scope():
        await graph_on(saver).ainvoke({"log": long_log}, base, durability="exit")
    turn = {"configurable": {"thread_id": "turn"}}
    async with run_scope():
        known_to_be_new("turn")
        assert await copy_base(saver, ThreadTurn(thread_id="t", turn=2, base="base"), turn)
        run = current_run()
        assert run is not None
        held = run.newest[("turn", "")].document
        copied = await saver.aget_tuple(turn)
    source = await db["checkpoint_heads"].find_one({"thread_id": "base"})
    assert source is not None and source["type"].endswith(compression.SUFFIX)
    assert (held["type"], held["checkpoint"]) == (source["type"], source["checkpoint"])
    assert copied is not None and copied.checkpoint["channel_values"]["log"][:300] == long_log


async def test_the_saver_passes_langgraphs_suite_with_every_value_compressed(
    client: tuple[AsyncMongoClient[Document], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every value compression shrinks is compressed, however small: LangGraph's own suite reads
    them all back."""
    connected, name = client
    monkeypatch.setattr(compression, "MIN_COMPRESSED_BYTES", 0)
    read_back: list[int] = []
    original = compression.decompressed

    def counted(data: bytes) -> bytes:
        read_back.append(len(data))
        return original(data)

    monkeypatch.setattr(compression, "decompressed", counted)

    @checkpointer_test(name="AsyncMongoSaver, compressed")
    async def saver() -> AsyncIterator[AsyncMongoSaver]:
        yield AsyncMongoSaver(connected[name])

    report = await validate(saver)
    report.print_report()
    assert report.passed_all_base()
    assert read_back  # compressed values were stored and read
