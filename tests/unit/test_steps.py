"""Durable steps on real LangGraph graphs: in-memory step store and checkpointer, no I/O.

Each graph run is wrapped as the sandbox wraps it: a new StepRun (one store load) bound with
``step_run`` around one ``ainvoke``; a resume is a new run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import threading
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt
from pydantic import BaseModel
from structlog.testing import capture_logs

from interlock.sdk import (
    NoStepRun,
    StepError,
    StepResultTooLarge,
    current_idempotency_key,
    durable_step,
    run_step,
    run_step_sync,
)
from interlock.sdk.runtime import StepRun, step_run
from shared.store.memory import InMemoryStepStore
from shared.store.ports import StepRecord

EXEC = "exec-steps"
Graph = Any  # a compiled StateGraph; its generic parameters add nothing here


class State(TypedDict, total=False):
    to: str
    sent: str
    decision: str
    loops: int
    seen: Annotated[list[str], operator.add]


class CountingStepStore(InMemoryStepStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0
        self.puts = 0

    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        self.loads += 1
        return await super().load(execution_id)

    async def put(self, record: StepRecord) -> StepRecord:
        self.puts += 1
        return await super().put(record)


def config(execution_id: str = EXEC) -> Any:
    return {"configurable": {"thread_id": execution_id}}


async def invoke(
    graph: Graph,
    store: InMemoryStepStore,
    payload: Any,
    *,
    epoch: int = 1,
    attempt: int = 1,
    **options: Any,
) -> dict[str, Any]:
    run = await StepRun.open(
        execution_id=EXEC, epoch=epoch, attempt=attempt, store=store, **options
    )
    with step_run(run):
        result: dict[str, Any] = await graph.ainvoke(payload, config())
    return result


def one_node(node: Any, *, retry: RetryPolicy | None = None) -> Graph:
    graph = StateGraph(State)
    graph.add_node("work", node, retry_policy=retry)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile(checkpointer=InMemorySaver())


def sent_before_interrupt(result: dict[str, Any]) -> str:
    (pending,) = result["__interrupt__"]
    return str(pending.value["sent"])


# --- a side effect before interrupt() runs once ---------------------------------------------


def email_graph(kind: Literal["sync", "async"], outbox: list[str], threads: set[str]) -> Graph:
    if kind == "sync":

        @durable_step(name="send_email")
        def send_sync(to: str) -> str:
            threads.add(threading.current_thread().name)
            outbox.append(to)
            return f"msg-{uuid.uuid4().hex[:8]}"

        def sync_node(state: State) -> State:
            sent = send_sync(state["to"])
            decision = interrupt({"sent": sent})
            return {"sent": sent, "decision": decision}

        return one_node(sync_node)

    @durable_step(name="send_email")
    async def send_async(to: str) -> str:
        threads.add(threading.current_thread().name)
        outbox.append(to)
        return f"msg-{uuid.uuid4().hex[:8]}"

    async def async_node(state: State) -> State:
        sent = await send_async(state["to"])
        decision = interrupt({"sent": sent})
        return {"sent": sent, "decision": decision}

    return one_node(async_node)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_step_before_interrupt_runs_once_and_the_resumed_node_gets_its_result(
    kind: Literal["sync", "async"],
) -> None:
    store, outbox, threads = InMemoryStepStore(), list[str](), set[str]()
    graph = email_graph(kind, outbox, threads)

    first = await invoke(graph, store, {"to": "ana@example.com"})
    sent = sent_before_interrupt(first)
    with capture_logs() as logs:
        done = await invoke(graph, store, Command(resume="approve"), epoch=2)

    assert outbox == ["ana@example.com"]
    assert done["sent"] == sent and done["decision"] == "approve"
    # One line for the run lists what it served from the cache.
    [replayed] = [e for e in logs if e["event"] == "steps.replayed"]
    assert replayed["count"] == 1
    assert [(s["step"], s["stored_epoch"]) for s in replayed["steps"]] == [("send_email", 1)]
    stored = list((await store.load(EXEC)).values())
    assert [(r.name, r.epoch, r.result) for r in stored] == [("send_email", 1, f'"{sent}"')]
    # Sync nodes run in LangGraph's worker threads, async ones on the loop: both paths taken.
    on_loop = threading.current_thread().name in threads
    assert on_loop is (kind == "async")


async def test_call_wrappers_in_sync_and_async_nodes() -> None:
    store, outbox = InMemoryStepStore(), list[str]()

    def send(to: str) -> str:
        outbox.append(to)
        return f"to:{to}"

    async def send_later(to: str) -> str:
        outbox.append(to)
        return f"later:{to}"

    def sync_node(state: State) -> State:
        sent = run_step_sync("send", send, state["to"])
        interrupt({"sent": sent})
        return {"sent": sent}

    async def async_node(state: State) -> State:
        sent = await run_step("send", send_later, state["to"])
        also = await run_step("send", send, state["to"])  # a sync function, awaited form
        interrupt({"sent": sent})
        return {"sent": f"{sent}+{also}"}

    graph = StateGraph(State)
    graph.add_node("a", sync_node)
    graph.add_node("b", async_node)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    compiled = graph.compile(checkpointer=InMemorySaver())

    await invoke(compiled, store, {"to": "x"})
    await invoke(compiled, store, Command(resume="ok"), epoch=2)
    done = await invoke(compiled, store, Command(resume="ok"), epoch=3)
    assert done["sent"] == "later:x+to:x"
    assert outbox == ["x", "x", "x"]
    assert len(await store.load(EXEC)) == 3


# --- keys ------------------------------------------------------------------------------------


async def test_steps_of_one_name_get_distinct_keys_that_are_stable_across_resume() -> None:
    store, keys_seen = InMemoryStepStore(), []

    @durable_step
    def stamp(label: str, idempotency_key: str = "") -> str:
        keys_seen.append(idempotency_key)
        return label

    def node(state: State) -> State:
        labels = [stamp("a"), stamp("b"), stamp("c")]
        interrupt({"sent": ",".join(labels)})
        return {"sent": ",".join(labels)}

    graph = one_node(node)
    await invoke(graph, store, {})
    with capture_logs() as logs:
        done = await invoke(graph, store, Command(resume="ok"), epoch=2)

    assert done["sent"] == "a,b,c"
    assert len(set(keys_seen)) == 3
    assert all(k.startswith(f"{EXEC}:{stamp.__qualname__}:") for k in keys_seen)
    assert set(await store.load(EXEC)) == set(keys_seen)
    [replayed] = [e for e in logs if e["event"] == "steps.replayed"]
    assert [s["key"] for s in replayed["steps"]] == keys_seen


async def test_gathered_steps_keep_their_keys_whatever_order_they_finish_in() -> None:
    store, calls = InMemoryStepStore(), list[int]()
    # The last started finishes first: each waits for the one started after it (events, not
    # sleeps, so a busy machine cannot reorder them).
    finished = [asyncio.Event() for _ in range(3)]

    @durable_step
    async def fetch(i: int) -> int:
        if i + 1 < len(finished):
            await finished[i + 1].wait()
        calls.append(i)
        finished[i].set()
        return i * 10

    async def node(state: State) -> State:
        values = await asyncio.gather(*(fetch(i) for i in range(3)))
        interrupt({"sent": repr(values)})
        return {"seen": [repr(values)]}

    graph = one_node(node)
    await invoke(graph, store, {})
    done = await invoke(graph, store, Command(resume="ok"), epoch=2)
    assert done["seen"] == ["[0, 10, 20]"] and calls == [2, 1, 0]


async def test_a_node_that_runs_again_in_a_later_superstep_runs_its_steps_again() -> None:
    """A loop back to a node is a new task (new task id): new keys, by design."""
    store, calls = InMemoryStepStore(), []

    @durable_step
    def tick(n: int) -> int:
        calls.append(n)
        return n

    def node(state: State) -> State:
        return {"loops": tick(state.get("loops", 0)) + 1}

    graph = StateGraph(State)
    graph.add_node("work", node)
    graph.add_edge(START, "work")
    graph.add_conditional_edges("work", lambda s: "work" if s["loops"] < 3 else END)
    done = await invoke(graph.compile(checkpointer=InMemorySaver()), store, {})
    assert done["loops"] == 3 and calls == [0, 1, 2]
    assert len(await store.load(EXEC)) == 3


async def test_parallel_sync_nodes_get_their_own_keys() -> None:
    store, calls = InMemoryStepStore(), []

    @durable_step(name="effect")
    def effect(who: str, n: int) -> str:
        calls.append(f"{who}{n}")
        return f"{who}{n}"

    def make(who: str) -> Any:
        def node(state: State) -> State:
            seen = [effect(who, n) for n in range(3)]
            interrupt({"sent": who})
            return {"seen": seen}

        return node

    graph = StateGraph(State)
    for who in ("left", "right"):
        graph.add_node(who, make(who))
        graph.add_edge(START, who)
    compiled = graph.compile(checkpointer=InMemorySaver())

    await invoke(compiled, store, {})
    pending = (await compiled.aget_state(config())).interrupts
    resume: Command[Any] = Command(resume={i.id: "ok" for i in pending})
    done = await invoke(compiled, store, resume, epoch=2)
    assert sorted(done["seen"]) == sorted(calls) and len(calls) == 6
    assert len(await store.load(EXEC)) == 6


async def test_a_step_inside_a_subgraph_is_stable_across_resume() -> None:
    store, calls = InMemoryStepStore(), []

    @durable_step
    def effect() -> str:
        calls.append("x")
        return "done"

    def inner(state: State) -> State:
        sent = effect()
        return {"sent": sent, "decision": interrupt({"sent": sent})}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    outer = StateGraph(State)
    outer.add_node("sub", sub.compile())
    outer.add_edge(START, "sub")
    graph = outer.compile(checkpointer=InMemorySaver())

    await invoke(graph, store, {})
    done = await invoke(graph, store, Command(resume="ok"), epoch=2)
    assert done["decision"] == "ok" and calls == ["x"]


async def test_explicit_key_is_namespaced_by_the_execution_and_works_outside_nodes() -> None:
    store, charges = InMemoryStepStore(), []

    async def charge(amount: int, idempotency_key: str = "") -> str:
        charges.append(idempotency_key)
        return f"ch-{amount}"

    run = await StepRun.open(execution_id=EXEC, epoch=1, attempt=1, store=store)
    with step_run(run):
        assert await run_step("charge", charge, 10, key="order-1") == "ch-10"
        assert await run_step("charge", charge, 99, key="order-1") == "ch-10"
        with pytest.raises(NoStepRun, match="outside a LangGraph node"):
            await run_step("charge", charge, 5)
    assert charges == [f"{EXEC}:order-1"]
    assert list(await store.load(EXEC)) == [f"{EXEC}:order-1"]


async def test_the_key_is_injected_and_readable_inside_the_step_only() -> None:
    store, seen = InMemoryStepStore(), []

    @durable_step
    async def call_api(idempotency_key: str = "") -> str:
        seen.append((idempotency_key, current_idempotency_key()))
        return "ok"

    async def node(state: State) -> State:
        await call_api()
        with pytest.raises(NoStepRun):
            current_idempotency_key()
        with pytest.raises(StepError, match="supplied by the step"):
            await call_api(idempotency_key="mine")
        return {"sent": "ok"}

    await invoke(one_node(node), store, {})
    ((injected, current),) = seen
    assert injected == current and injected in await store.load(EXEC)


# --- results ---------------------------------------------------------------------------------


class Receipt(BaseModel):
    id: str
    amount: int
    at: datetime


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


async def test_results_come_back_as_the_same_types_on_a_hit_as_on_a_miss() -> None:
    store = InMemoryStepStore()
    seen: dict[str, list[list[Any]]] = {"sync": [], "async": []}
    when = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

    @durable_step
    def receipt() -> Receipt:
        return Receipt(id=uuid.uuid4().hex, amount=2**70, at=when)

    @durable_step
    def pair() -> tuple[int, str]:
        return (1, "ünï")

    @durable_step
    def point() -> Point:
        return Point(0.1, 0.2)

    @durable_step
    async def moment() -> datetime:
        return datetime.now(UTC)

    def sync_node(state: State) -> State:
        seen["sync"].append(
            [
                receipt(),
                pair(),
                point(),
                run_step_sync("untyped", lambda: {"a": [1, 2.5, None, "x", 2**70], "at": when}),
            ]
        )
        interrupt({"sent": "sync"})
        return {}

    async def async_node(state: State) -> State:
        seen["async"].append([await moment()])
        interrupt({"sent": "async"})
        return {}

    graph = StateGraph(State)
    graph.add_node("sync_node", sync_node)
    graph.add_node("async_node", async_node)
    graph.add_edge(START, "sync_node")
    graph.add_edge(START, "async_node")
    compiled = graph.compile(checkpointer=InMemorySaver())
    await invoke(compiled, store, {})
    pending = (await compiled.aget_state(config())).interrupts
    await invoke(compiled, store, Command(resume={i.id: "ok" for i in pending}), epoch=2)

    (miss, hit), ((moment_miss,), (moment_hit,)) = seen["sync"], seen["async"]
    assert miss == hit and moment_miss == moment_hit
    assert hit[1:] == [
        (1, "ünï"),
        Point(0.1, 0.2),
        {"a": [1, 2.5, None, "x", 2**70], "at": "2025-01-02T03:04:05.678901Z"},
    ]
    assert [type(v) for v in [*hit, moment_hit]] == [Receipt, tuple, Point, dict, datetime]
    assert hit[0].at == when and hit[0].amount == 2**70


async def test_a_step_that_raises_is_not_cached_and_runs_again() -> None:
    store, calls = InMemoryStepStore(), []

    @durable_step
    def flaky() -> str:
        calls.append("try")
        if len(calls) == 1:
            raise ConnectionError("smtp down")
        return "sent"

    graph = one_node(lambda state: {"sent": flaky()})
    with pytest.raises(ConnectionError):
        await invoke(graph, store, {})
    assert await store.load(EXEC) == {}
    done = await invoke(graph, store, None, attempt=2)
    assert done["sent"] == "sent" and calls == ["try", "try"]


async def test_a_too_large_result_fails_before_any_write() -> None:
    store, fenced = CountingStepStore(), []

    async def fence() -> None:
        fenced.append(1)

    @durable_step(name="report")
    def report() -> str:
        return "x" * 200

    graph = one_node(lambda state: {"sent": report()})
    with pytest.raises(StepResultTooLarge) as raised:
        await invoke(graph, store, {}, max_result_bytes=100, fence=fence)
    assert "'report'" in str(raised.value) and "202 bytes" in str(raised.value)
    assert "100 bytes" in str(raised.value)
    assert (fenced, store.puts) == ([], 0)


async def test_a_value_the_return_type_cannot_hold_is_not_stored() -> None:
    store = InMemoryStepStore()

    @durable_step
    def wrong() -> int:
        return "not a number"  # type: ignore[return-value]

    with pytest.raises(StepError, match="wrong' returned a value"):
        await invoke(one_node(lambda state: {"sent": str(wrong())}), store, {})
    assert await store.load(EXEC) == {}


# --- crashes, retries, fencing, races ---------------------------------------------------------


async def test_after_a_crash_the_continued_run_serves_the_cached_step() -> None:
    store, outbox, crash = InMemoryStepStore(), [], [True]

    @durable_step
    def send_email(to: str) -> str:
        outbox.append(to)
        return f"sent:{to}"

    def node(state: State) -> State:
        sent = send_email(state["to"])
        if crash.pop() if crash else False:
            raise RuntimeError("worker died after the email")
        return {"sent": sent}

    graph = one_node(node)
    with pytest.raises(RuntimeError):
        await invoke(graph, store, {"to": "bo@example.com"})
    assert (await graph.aget_state(config())).next == ("work",)
    done = await invoke(graph, store, None, attempt=2)
    assert done["sent"] == "sent:bo@example.com" and outbox == ["bo@example.com"]


async def test_a_node_retried_by_its_retry_policy_reuses_its_steps() -> None:
    store, outbox, failures = InMemoryStepStore(), [], [1, 1]

    @durable_step
    def send_email() -> str:
        outbox.append("mail")
        return "sent"

    def node(state: State) -> State:
        sent = send_email()
        if failures:
            failures.pop()
            raise TimeoutError("flaky after the email")
        return {"sent": sent}

    retry = RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False, retry_on=TimeoutError)
    done = await invoke(one_node(node, retry=retry), store, {})
    assert done["sent"] == "sent" and outbox == ["mail"]


class Superseded(Exception):
    pass


async def test_a_fence_that_raises_stops_the_write() -> None:
    store, calls = CountingStepStore(), []

    async def fence() -> None:
        raise Superseded("epoch 2 owns this execution now")

    @durable_step
    def effect() -> str:
        calls.append(1)
        return "done"

    with pytest.raises(Superseded):
        await invoke(one_node(lambda state: {"sent": effect()}), store, {}, fence=fence)
    assert calls == [1] and store.puts == 0 and await store.load(EXEC) == {}


async def test_when_another_attempt_stored_first_its_result_wins() -> None:
    class RacingStore(InMemoryStepStore):
        async def put(self, record: StepRecord) -> StepRecord:
            rival = record.model_copy(update={"result": '"rival"', "attempt": 7})
            await super().put(rival)
            return await super().put(record)

    store = RacingStore()

    @durable_step
    async def effect() -> str:
        return "mine"

    async def node(state: State) -> State:
        return {"sent": await effect()}

    with capture_logs() as logs:
        done = await invoke(one_node(node), store, {})
    assert done["sent"] == "rival"
    assert [(e["event"], e["stored_attempt"]) for e in logs if e["event"].startswith("step.")] == [
        ("step.superseded", 7)
    ]


# --- wiring ------------------------------------------------------------------------------------


async def test_open_loads_the_cache_with_one_query() -> None:
    store = CountingStepStore()

    @durable_step
    def effect(n: int) -> int:
        return n

    def node(state: State) -> State:
        total = sum(effect(n) for n in range(5))
        interrupt({"sent": str(total)})
        return {}

    graph = one_node(node)
    await invoke(graph, store, {})
    assert (store.loads, store.puts) == (1, 5)
    await invoke(graph, store, Command(resume="ok"), epoch=2)
    assert (store.loads, store.puts) == (2, 5)


async def test_without_a_step_run_steps_are_plain_calls() -> None:
    calls = []

    @durable_step
    def effect() -> str:
        calls.append(1)
        return "x"

    @durable_step
    async def async_effect() -> str:
        calls.append(2)
        return "y"

    def node(state: State) -> State:
        sent = effect()
        return {"sent": sent, "decision": interrupt({"sent": sent})}

    graph = one_node(node)
    await graph.ainvoke({}, config())
    await graph.ainvoke(Command(resume="ok"), config())
    assert effect() == "x" and await async_effect() == "y"
    assert await run_step("n", async_effect, key="k") == "y" and run_step_sync("n", effect) == "x"
    assert calls == [1, 1, 1, 2, 2, 1]


async def test_a_sync_step_on_the_event_loop_is_refused_not_deadlocked() -> None:
    @durable_step
    def blocking() -> str:
        return "never"

    async def node(state: State) -> State:
        return {"sent": blocking()}

    with pytest.raises(StepError, match="make the step async"):
        await invoke(one_node(node), InMemoryStepStore(), {})


async def test_a_step_outside_a_node_without_a_key_is_refused() -> None:
    @durable_step
    def effect() -> str:
        return "x"

    run = await StepRun.open(execution_id=EXEC, epoch=1, attempt=1, store=InMemoryStepStore())
    with step_run(run), pytest.raises(NoStepRun, match="explicit key"):
        await asyncio.to_thread(effect)


async def test_fault_points_bracket_the_fenced_write(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []

    class RecordingStore(InMemoryStepStore):
        async def put(self, record: StepRecord) -> StepRecord:
            order.append("put")
            return await super().put(record)

    async def fence() -> None:
        order.append("fence")

    @durable_step
    def effect() -> str:
        order.append("effect")
        return "done"

    monkeypatch.setattr("interlock.sdk._execute.fault_point", order.append)
    await invoke(one_node(lambda state: {"sent": effect()}), RecordingStore(), {}, fence=fence)
    assert order == ["effect", "step.after_effect", "fence", "put", "step.after_cache"]
