"""The gateway's early refusal of a decision under changed agent code reads the current version
through a short cache that may only ever let a decision through: a refusal is made on a fresh
read (shared/store/agent_versions.py)."""

from __future__ import annotations

import pytest

from shared.domain.decisions import AgentVersionChanged
from shared.domain.execution import Execution
from shared.domain.versions import AgentVersion
from shared.store.agent_versions import AgentVersionCheck
from shared.store.memory.agent_versions import InMemoryAgentVersions
from tests import factories as f


class CountingVersions(InMemoryAgentVersions):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get(self, agent: str) -> AgentVersion | None:
        self.reads += 1
        return await super().get(agent)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def suspended_under(fingerprint: str | None) -> Execution:
    execution = f.suspended("exec-v")
    assert execution.suspension is not None
    suspension = execution.suspension.model_copy(update={"agent_fingerprint": fingerprint})
    return execution.model_copy(update={"suspension": suspension})


def version(fingerprint: str) -> AgentVersion:
    return AgentVersion(agent="refund-approval", fingerprint=fingerprint)


async def test_a_version_that_lets_decisions_through_is_reused_for_its_ttl() -> None:
    versions, clock = CountingVersions(), Clock()
    await versions.publish(version("v1"))
    check = AgentVersionCheck(versions, ttl_seconds=5, clock=clock)
    for _ in range(3):
        await check.check(suspended_under("v1"))
    assert versions.reads == 1
    clock.now += 5
    await check.check(suspended_under("v1"))
    assert versions.reads == 2


async def test_a_refusal_is_made_on_a_fresh_read_only() -> None:
    versions, clock = CountingVersions(), Clock()
    await versions.publish(version("v1"))
    check = AgentVersionCheck(versions, ttl_seconds=60, clock=clock)
    await check.check(suspended_under("v1"))
    # New code is deployed: within the TTL the cached version still lets decisions through
    # (the sandbox refuses the resume itself); a suspension taken under the new code...
    await versions.publish(version("v2"))
    await check.check(suspended_under("v1"))
    # ...is not refused on the cached v1: it is read again, and it fits.
    await check.check(suspended_under("v2"))
    assert versions.reads == 2
    # Once read, v2 refuses v1's suspension, on a fresh read each time.
    with pytest.raises(AgentVersionChanged):
        await check.check(suspended_under("v1"))
    # Reverted: believed at once.
    await versions.publish(version("v1"))
    await check.check(suspended_under("v1"))


async def test_no_ttl_reads_every_time_and_a_suspension_without_fingerprint_reads_nothing() -> None:
    versions = CountingVersions()
    await versions.publish(version("v1"))
    check = AgentVersionCheck(versions)
    await check.check(suspended_under("v1"))
    await check.check(suspended_under("v1"))
    assert versions.reads == 2
    await check.check(suspended_under(None))
    assert versions.reads == 2
    with pytest.raises(AgentVersionChanged):
        await check.check(suspended_under("v0"))


def with_inputs(*keys: str) -> AgentVersion:
    return AgentVersion(agent="refund-approval", fingerprint="v1", input_keys=list(keys))


async def test_an_input_key_the_graph_does_not_take_is_refused_on_a_fresh_read() -> None:
    versions, clock = CountingVersions(), Clock()
    await versions.publish(with_inputs("messages", "topic"))
    check = AgentVersionCheck(versions, ttl_seconds=5, clock=clock)
    for _ in range(3):
        assert await check.refusing_input("refund-approval", {"topic": "cats"}) is None
    assert versions.reads == 1  # taken: the cache serves it
    # A key it does not take: refused, but only after reading again (the graph may have changed).
    refusing = await check.refusing_input("refund-approval", {"topicc": "cats"})
    assert refusing is not None and refusing.unknown_input_keys({"topicc": "cats"}) == ["topicc"]
    assert versions.reads == 2
    # The sandboxes now run a graph that takes it: the fresh read lets it through at once.
    await versions.publish(with_inputs("messages", "topic", "topicc"))
    assert await check.refusing_input("refund-approval", {"topicc": "cats"}) is None
    assert versions.reads == 3


async def test_no_published_version_or_no_input_schema_refuses_nothing() -> None:
    versions = CountingVersions()
    check = AgentVersionCheck(versions)
    assert await check.refusing_input("refund-approval", {"anything": 1}) is None
    await versions.publish(version("v1"))  # a graph with no builder to ask: input_keys None
    assert await check.refusing_input("refund-approval", {"anything": 1}) is None
