"""Poison messages on every topic Interlock consumes, and the check that each was dead-lettered
with a reason by every consumer group that reads it.

Kinds: not JSON; an unknown version; oversized (near the broker's 1 MB limit, made of quotes, so
its dead letter, which quotes the payload once more, is twice as big); a foreign tenant (a real
message of the run, addressed to another project). The workload's messages follow on the same
partitions, so a poison message that blocked its partition would leave executions stuck.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.e2e.cluster import Cluster

CONSUMERS: dict[str, tuple[str, ...]] = {
    "execution.requested": ("orchestrator",),
    "decision.submitted": ("orchestrator",),
    "execution.cancel_requested": ("orchestrator",),
    "execution.dispatched": ("sandbox",),
    "execution.suspended": ("orchestrator", "notifier"),
    "execution.reported": ("orchestrator",),
    "review.deadline": ("notifier",),
}
"""Topic -> the services whose consumer groups read it."""

MUST_REJECT_FOREIGN = ("orchestrator", "sandbox")
"""Services that look the execution up (and so must refuse another project's): the notifier
only relays what it is told and may handle a well-formed event of an unknown execution."""

FOREIGN_PROJECT = "proj-foreign"
OVERSIZED_QUOTES = 480_000


@dataclass(frozen=True)
class Poison:
    topic: str
    """The topic's base name (no run prefix)."""
    kind: str
    partition: int
    offset: int


async def _read_all(bootstrap: str, topics: list[str], idle: float = 3.0) -> list[Any]:
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=f"chaos-reader-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=4_000_000,
        fetch_max_bytes=8_000_000,
    )
    await consumer.start()
    records: list[Any] = []
    try:
        last = time.monotonic()
        while time.monotonic() - last < idle:
            batch = await consumer.getmany(timeout_ms=500)
            for items in batch.values():
                records.extend(items)
                last = time.monotonic()
    finally:
        await consumer.stop()
    return records


async def publish_all(cluster: Cluster) -> list[Poison]:
    bootstrap = cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    prefix = cluster.topic_prefix
    templates: dict[str, dict[str, Any]] = {}
    for record in await _read_all(bootstrap, [prefix + t for t in CONSUMERS]):
        base = record.topic.removeprefix(prefix)
        try:
            templates.setdefault(base, json.loads(record.value))
        except ValueError:
            continue
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=2_000_000)
    await producer.start()
    sent: list[Poison] = []
    try:
        for topic in CONSUMERS:
            partitions = sorted(await producer.partitions_for(prefix + topic))
            for partition in partitions:
                for kind, body in _poisons(topic, templates.get(topic), partition == 0):
                    meta = await producer.send_and_wait(
                        prefix + topic, body, key=uuid.uuid4().hex.encode(), partition=partition
                    )
                    sent.append(Poison(topic, kind, meta.partition, meta.offset))
    finally:
        await producer.stop()
    return sent


def _poisons(
    topic: str, template: dict[str, Any] | None, first_partition: bool
) -> list[tuple[str, bytes]]:
    envelope = {"type": topic, "event_id": uuid.uuid4().hex, "execution_id": str(uuid.uuid4())}
    out = [
        ("not-json", b'{"type": "' + topic.encode() + b'", broken'),
        ("unknown-version", json.dumps({**envelope, "version": 99}).encode()),
    ]
    if first_partition:
        padding = '"' * OVERSIZED_QUOTES
        out.append(
            ("oversized", json.dumps({**envelope, "version": 1, "padding": padding}).encode())
        )
    if first_partition and template is not None:
        foreign = {**template, "project_id": FOREIGN_PROJECT, "event_id": uuid.uuid4().hex}
        out.append(("foreign-tenant", json.dumps(foreign).encode()))
    return out


async def check_dead_letters(
    cluster: Cluster, sent: list[Poison], timeout: float = 60
) -> list[str]:
    """What is missing: each poison message needs a dead letter, with a reason, from every
    consumer group that reads its topic."""
    bootstrap = cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    prefix = cluster.topic_prefix
    deadline = time.monotonic() + timeout
    while True:
        letters: dict[tuple[str, int, int], dict[str, str]] = {}
        for record in await _read_all(bootstrap, [prefix + "execution.dead_lettered"], idle=2):
            letter = json.loads(record.value)
            where = (
                letter["source_topic"].removeprefix(prefix),
                letter["partition"],
                letter["offset"],
            )
            letters.setdefault(where, {})[letter["consumer"].split(":", 1)[0]] = letter["reason"]
        missing = []
        for poison in sent:
            got = letters.get((poison.topic, poison.partition, poison.offset), {})
            for service in CONSUMERS[poison.topic]:
                if poison.kind == "foreign-tenant" and service not in MUST_REJECT_FOREIGN:
                    continue
                if not got.get(service):
                    missing.append(
                        f"{poison.kind} on {poison.topic}[{poison.partition}]@{poison.offset}:"
                        f" no dead letter from the {service}"
                    )
        if not missing or time.monotonic() > deadline:
            return missing
        await asyncio.sleep(2)
