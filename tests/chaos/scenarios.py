"""The chaos scenarios. Each injects its faults while the workload runs; the runner then lets the
run settle and checks the invariants (tests/chaos/invariants.py) over everything that happened.
``quick`` ones form the short subset that ``make test`` runs (tests/chaos/test_chaos.py)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

from tests.chaos import poison
from tests.chaos.conversations import Conversation
from tests.chaos.harness import kill
from tests.chaos.runner import Context, Scenario
from tests.chaos.workload import TERMINAL
from tests.e2e.cluster import REPO, SERVICES
from tests.e2e.test_replay import wait_caught_up
from tests.eventually import eventually

SANDBOX_POINTS = ("step.after_effect", "step.after_cache", "sandbox.before_report")
ORCHESTRATOR_POINT = "orchestrator.after_write"


async def wait_started(ctx: Context, count: int, timeout: float = 120) -> None:
    """Wait until ``count`` executions exist (the load is under way)."""
    await eventually(
        lambda: _async(len(ctx.workload.created)),
        lambda n: n >= count,
        timeout=timeout,
        what=f"{count} executions to start",
    )


async def _async(value: int) -> int:
    return value


async def wait_fired(ctx: Context, points: list[str], timeout: float = 120) -> None:
    folder = ctx.workdir / "faults"

    async def fired() -> list[str]:
        return [p for p in points if not (folder / f"{p}.fired").exists()]

    missing = await eventually(fired, lambda m: not m, timeout=timeout, what="faults to fire")
    assert not missing


# --- service kills -----------------------------------------------------------------------------


async def kill_at_fault_points(ctx: Context) -> None:
    ctx.workload.start(8, spacing=0.5)
    await wait_fired(ctx, [*SANDBOX_POINTS, ORCHESTRATOR_POINT], timeout=150)
    ctx.notes.append("fired: " + ", ".join([*SANDBOX_POINTS, ORCHESTRATOR_POINT]))


def at_point(point: str) -> Scenario:
    service = "orchestrator" if point == ORCHESTRATOR_POINT else "sandbox"

    async def run(ctx: Context) -> None:
        ctx.workload.start(6, spacing=0.5)
        await wait_fired(ctx, [point], timeout=150)

    return Scenario(
        name=f"sigkill-at-{point}",
        run=run,
        faults=f"{point}=crash",
        description=f"the {service} SIGKILLs itself at {point}, once",
    )


async def kill_all_four(ctx: Context) -> None:
    ctx.workload.start(10, spacing=0.3)
    await wait_started(ctx, 6)
    await asyncio.sleep(4)  # some running, some suspended, some deciding
    with ctx.supervisor.hold():
        for service in SERVICES:
            for index in range(len(ctx.cluster.processes[service])):
                ctx.faults += kill(ctx.cluster, service, index)
    ctx.notes.append("all four services SIGKILLed at once, restarted together")


async def kill_each_service(ctx: Context) -> None:
    ctx.workload.start(16, spacing=0.8)
    rotation = [
        ("gateway", 0),
        ("orchestrator", 0),
        ("sandbox", 0),
        ("notifier", 0),
        ("sandbox", 1),
    ]
    for service, index in rotation:
        await asyncio.sleep(5)
        ctx.faults += kill(ctx.cluster, service, index)
    ctx.notes.append("SIGKILL in turn: " + ", ".join(f"{s}-{i}" for s, i in rotation))


async def zombie_sandbox(ctx: Context) -> None:
    ctx.workload.start(4, spacing=0.5)
    await wait_fired(ctx, ["step.after_effect"], timeout=120)
    frozen = [i for i, p in enumerate(ctx.cluster.processes["sandbox"]) if _stopped(p.pid)]
    if len(frozen) != 1:
        ctx.violation("fenced", f"expected one frozen sandbox, found {frozen}")
        return
    # Past its lease: Kafka gives its partitions to the other replica, which takes over.
    await asyncio.sleep(15)
    ctx.cluster.send_signal("sandbox", signal.SIGCONT, frozen[0])
    log = ctx.workdir / f"sandbox-{frozen[0]}.log"
    try:
        await eventually(
            lambda: asyncio.to_thread(log.read_text, errors="replace"),
            lambda text: "dispatch.fenced" in text,
            timeout=60,
            what="the zombie to be fenced",
        )
        ctx.notes.append(f"sandbox-{frozen[0]} stopped past its lease, resumed, fenced")
    except AssertionError as exc:
        ctx.violation("fenced", str(exc)[:300])


SANDBOX_LIMIT = 8
"""The scenario's sandbox runs this many executions at once (INTERLOCK_CONSUMER_CONCURRENCY)."""
SLOW_EFFECT_MS = 1500
"""Each email takes this long to be answered (applied at once): runs stay in flight."""


async def sandbox_in_flight(ctx: Context) -> float:
    """Runs the sandbox has in flight now, from its /metrics (0 while it is down)."""
    port = ctx.cluster.health_ports[("sandbox", 0)]
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    except httpx.HTTPError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("interlock_consumer_in_flight{") and "dispatched" in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def kill_sandbox_at_its_limit(ctx: Context) -> None:
    ctx.workload.start(4 * SANDBOX_LIMIT, spacing=0.1)
    for round_ in (1, 2):
        await eventually(
            lambda: sandbox_in_flight(ctx),
            lambda n: n >= SANDBOX_LIMIT,
            timeout=120,
            interval=0.1,
            what=f"the sandbox to have {SANDBOX_LIMIT} runs in flight",
        )
        ctx.faults += kill(ctx.cluster, "sandbox", 0)
        ctx.notes.append(f"sandbox SIGKILLed with {SANDBOX_LIMIT} runs in flight ({round_})")
        await asyncio.sleep(3)  # restarted by the supervisor; its runs come back


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1].startswith("T")
    except OSError:
        return False


# --- conversations -----------------------------------------------------------------------------


CONVERSATIONS = 12
"""Five-turn conversations at once, half on Interlock's API, half on LangGraph's."""
CONVERSATION_SECONDS = 420.0
CONVERSATION_IDLE_SECONDS = 90.0


async def turn_statuses(ctx: Context, chats: list[Conversation]) -> Counter[str]:
    """Every turn's status now, counted (each thread's session, read at once; one not started
    yet is a 404): ``pending`` are turns queued behind their thread's busy turn, or about to be
    dispatched."""
    workload = ctx.workload

    async def listed(chat: Conversation) -> list[str]:
        response = await workload.call(
            "GET",
            f"{workload.scope}/sessions/{chat.thread_id}",
            params={"workspace_id": workload.workspace, "limit": 20},
        )
        if response is None or response.status_code != 200:
            return []
        return [str(t["status"]) for t in response.json()["turns"]]

    return Counter(s for statuses in await asyncio.gather(*map(listed, chats)) for s in statuses)


async def kill_mid_conversations(ctx: Context, chats: list[Conversation], label: str) -> None:
    """SIGKILL the orchestrator and every sandbox at once (the supervisor restarts them), noting
    where the turns stood just before."""
    statuses = await turn_statuses(ctx, chats)
    killed = []
    for service in ("orchestrator", "sandbox"):
        for index in range(len(ctx.cluster.processes[service])):
            if kill(ctx.cluster, service, index):
                ctx.faults += 1
                killed.append(f"{service}-{index}")
    ctx.notes.append(
        f"{label}: {', '.join(killed)} SIGKILLed with turns "
        + ", ".join(f"{status} {n}" for status, n in sorted(statuses.items()))
    )


async def kill_orchestrator_at_wake(ctx: Context, log_from: int, timeout: float = 60) -> None:
    """SIGKILL the orchestrator the moment its log says it wakes a queued turn (``turn.woken``,
    logged just before the turn's dispatch is written and sent) past ``log_from`` (a size of its
    log): a kill between a turn's end and the next turn's start, which the redelivered report
    of the ended turn must make good."""
    log = ctx.workdir / "orchestrator-0.log"
    position = log_from
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with log.open("rb") as handle:
            handle.seek(position)
            chunk = handle.read()
        lines = chunk.split(b"\n")
        woken = next((line for line in lines[:-1] if b'"event": "turn.woken"' in line), None)
        if woken is not None:
            if kill(ctx.cluster, "orchestrator", 0):
                ctx.faults += 1
                turn = json.loads(woken).get("execution_id")
                ctx.notes.append(f"3: orchestrator-0 SIGKILLed as it woke turn {turn}")
            return
        position += len(chunk) - len(lines[-1])
        await asyncio.sleep(0.01)
    ctx.notes.append(f"3: no turn woken within {timeout:.0f} s: the orchestrator not killed")


async def conversations_under_kills(ctx: Context) -> None:
    """Concurrent five-turn conversations; turn 3 of each waits for a review while turns 4 and 5
    are queued behind it (enqueue, the default). The orchestrator and the sandboxes are
    SIGKILLed once half the threads wait so, the others still running their first turns; the
    reviews are answered from then on (the first ones while the processes restart); they are
    SIGKILLed again once a third of the reviewed turns completed, the queued turns behind them
    waking and running; and the orchestrator alone once more, back from that, the moment it
    wakes a queued turn.
    Every thread must end with its five turns, once each, in order (invariant 8)."""
    reviews_open = asyncio.Event()
    chats = [
        Conversation(
            ctx.workload, i, api="native" if i % 2 == 0 else "langgraph", reviews_open=reviews_open
        )
        for i in range(CONVERSATIONS)
    ]
    deadline = time.monotonic() + CONVERSATION_SECONDS

    async def launch() -> None:
        for chat in chats:
            ctx.workload.spawn(chat.run(deadline))
            await asyncio.sleep(1.0)

    ctx.workload.spawn(launch())
    await eventually(
        lambda: _async(sum(c.parked for c in chats)),
        lambda n: n >= CONVERSATIONS // 2,
        timeout=240,
        what=f"{CONVERSATIONS // 2} threads waiting for a review with two turns queued",
    )
    await kill_mid_conversations(ctx, chats, "1")
    reviews_open.set()
    # Once a third of the reviewed turns completed, the processes are back and the turns
    # queued behind them are woken one after the other: some run, some are being woken.
    await eventually(
        lambda: _async(sum(c.resumed for c in chats)),
        lambda n: n >= CONVERSATIONS // 3,
        timeout=240,
        what=f"{CONVERSATIONS // 3} reviewed turns completed",
    )
    await kill_mid_conversations(ctx, chats, "2")
    # What its log holds from here on is the restarted orchestrator's.
    await kill_orchestrator_at_wake(ctx, (ctx.workdir / "orchestrator-0.log").stat().st_size)
    # A thread that stopped moving for a minute and a half is stuck (a turn runs in seconds).
    await ctx.workload.settle(CONVERSATION_SECONDS, idle=CONVERSATION_IDLE_SECONDS)
    await asyncio.gather(*(chat.read_back() for chat in chats))
    done = sum(c.record.finished for c in chats)
    turns = sum(1 for c in chats for _, _, status in c.record.listed if status == "completed")
    ctx.notes.append(
        f"{done} of {len(chats)} conversations finished ({len(chats) // 2} native,"
        f" {len(chats) - len(chats) // 2} LangGraph); {turns} turns completed"
    )


# --- messages ----------------------------------------------------------------------------------


async def poison_messages(ctx: Context) -> None:
    # Real messages of every type first: the poison is made from them (a foreign tenant's copy).
    ctx.workload.start(3, stages=(1,), spacing=0.3)
    await ctx.workload.settle(120)
    sent = await poison.publish_all(ctx.cluster)
    ctx.notes.append(f"{len(sent)} poison messages on {len({p.topic for p in sent})} topics")
    # Valid work behind the poison, on the same partitions: it must flow.
    ctx.workload.start(6, spacing=0.3)
    await ctx.workload.settle(180)
    for problem in await poison.check_dead_letters(ctx.cluster, sent):
        ctx.violation("dead-letters", problem)


async def offsets_reset(ctx: Context) -> None:
    ctx.workload.start(6, spacing=0.3)
    await ctx.workload.settle(180)
    before_effects = await ctx.effects.calls()
    before = await _audits(ctx)
    # New consumer groups read every topic from the earliest offset: everything is redelivered.
    with ctx.supervisor.hold():
        ctx.cluster.stop("orchestrator", "sandbox", "notifier")
        ctx.cluster.env["INTERLOCK_CONSUMER_GROUP_PREFIX"] += "-replay"
        ctx.cluster.start("orchestrator", "notifier")
        ctx.cluster.start("sandbox")
        ctx.cluster.start("sandbox")
    await wait_caught_up(ctx.cluster, timeout=180)
    after_effects = await ctx.effects.calls()
    if len(after_effects) != len(before_effects):
        ctx.violation(
            "2.no-duplicate-effect",
            f"replay from earliest made {len(after_effects) - len(before_effects)} new calls",
        )
    after = await _audits(ctx)
    changed = [i for i in before if before[i] != after.get(i)]
    if changed:
        ctx.violation("4.monotonic-history", f"replay changed the history of {changed}")
    ctx.notes.append("every group reset to earliest (new groups), caught up, nothing changed")


async def _audits(ctx: Context) -> dict[str, list[str]]:
    from tests.chaos.harness import read_store

    executions, _ = await read_store(
        ctx.cluster.env["INTERLOCK_MONGODB_URI"], ctx.cluster.database, ctx.workload.created
    )
    return {
        i: [f"{a.action}:{a.to_status}:{a.event_id}" for a in e.audit]
        for i, e in executions.items()
    }


async def decision_races(ctx: Context) -> None:
    """100 concurrent decisions on 10 suspensions, and decisions sent before the suspension
    they answer is recorded."""
    workload = ctx.workload
    deadline = time.monotonic() + 120
    ids = [
        i
        for i in await asyncio.gather(*(workload.invoke(1, deadline=deadline) for _ in range(10)))
        if i
    ]

    async def suspended(execution_id: str) -> int:
        async def probe() -> dict[str, object] | None:
            return await workload.status(execution_id)

        body = await eventually(
            probe, lambda b: b is not None and b["status"] == "suspended", timeout=120
        )
        assert body is not None
        return int(str(body["suspension_id"]))

    generations = await asyncio.gather(*(suspended(i) for i in ids))
    racers = [
        workload.decide(execution_id, generation, "approve" if n % 2 else "reject")
        for execution_id, generation in zip(ids, generations, strict=True)
        for n in range(10)
    ]
    answers = await asyncio.gather(*racers)
    ctx.notes.append(f"{len(racers)} racing decisions: {answers.count(202)} accepted")

    # Early deciders: resume from the moment of the invoke, before the suspension exists.
    early = [
        i
        for i in await asyncio.gather(*(workload.invoke(1, deadline=deadline) for _ in range(5)))
        if i
    ]

    async def hammer(execution_id: str) -> None:
        while time.monotonic() < deadline:
            if await workload.decide(execution_id, 1, "approve") == 202:
                return
            await asyncio.sleep(0.05)

    await asyncio.gather(*(hammer(i) for i in early))

    async def finished(execution_id: str) -> None:
        await eventually(
            lambda: workload.status(execution_id),
            lambda b: b is not None and b["status"] in TERMINAL,
            timeout=120,
            what=f"{execution_id} to finish",
        )

    await asyncio.gather(*(finished(i) for i in [*ids, *early]))


# --- the broker and the database ---------------------------------------------------------------


async def kafka_sigkill(ctx: Context) -> None:
    assert ctx.infra is not None
    ctx.workload.start(10, spacing=0.5, deadline_seconds=400)
    await wait_started(ctx, 5)
    ctx.infra.kill_kafka()
    await asyncio.sleep(3)
    await ctx.infra.start_kafka()
    ctx.notes.append("broker SIGKILLed under load, restarted after 3 s")


async def kafka_down(ctx: Context, seconds: float = 60) -> None:
    assert ctx.infra is not None
    ctx.workload.start(6, spacing=0.3, deadline_seconds=500)
    await wait_started(ctx, 6)
    await asyncio.sleep(5)
    ctx.infra.kill_kafka()
    # Reviewers keep deciding while the broker is away (the workload loops keep going).
    ctx.workload.start(4, spacing=2, deadline_seconds=500)
    await asyncio.sleep(seconds)
    await ctx.infra.start_kafka()
    ctx.notes.append(f"broker down {seconds:.0f} s while reviewers kept deciding")


async def ferretdb_restart(ctx: Context) -> None:
    assert ctx.infra is not None
    ctx.workload.start(10, spacing=0.5, deadline_seconds=400)
    await wait_started(ctx, 5)
    ctx.infra.kill_ferretdb()
    await asyncio.sleep(2)
    await ctx.infra.start_ferretdb()
    ctx.notes.append("FerretDB SIGKILLed under load, restarted after 2 s")


async def ferretdb_down(ctx: Context, seconds: float = 30) -> None:
    assert ctx.infra is not None
    ctx.workload.start(6, spacing=0.3, deadline_seconds=500)
    await wait_started(ctx, 6)
    await asyncio.sleep(5)
    ctx.infra.kill_ferretdb()
    ctx.workload.start(4, spacing=2, deadline_seconds=500)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    await ctx.infra.start_ferretdb()
    slow = [r for r in ctx.workload.http if r.status is None and r.path.endswith("/invoke")]
    ctx.notes.append(
        f"FerretDB down {time.monotonic() - started:.0f} s; {len(slow)} unanswered invokes"
    )


# --- soak --------------------------------------------------------------------------------------


SOAK_DEFAULT_RATE = 0.5
"""Executions a second when no benchmark result says what saturation is on this machine."""


SOAK_SANDBOXES = 3
"""The replicas the soak runs: a topology the benchmark measures (1 and 3 sandboxes), so its
rate is half of the saturation measured for what it runs, with replicas to fail over to."""


def soak_rate(sandboxes: int = SOAK_SANDBOXES) -> tuple[float, str]:
    """Half of the saturation the latest benchmark measured with ``sandboxes`` replicas (else
    the lowest it measured with any), else the default."""
    for mode in ("full", "quick"):
        path = REPO / "bench" / "results" / mode / "summary.json"
        try:
            throughput = json.loads(path.read_text())["figures"]["distributed"]["throughput"]
            measured = {int(k): float(v["per_second"]) for k, v in throughput.items()}
        except (OSError, KeyError, TypeError, ValueError):
            continue
        replicas = sandboxes if sandboxes in measured else min(measured, key=measured.get)
        saturation = measured.get(replicas, 0.0)
        if saturation > 0:
            return min(max(saturation / 2, 0.1), 5.0), (
                f"half of {saturation:.2f}/s measured with {replicas} sandbox(es)"
                f" ({path.parent.name} benchmark)"
            )
    return SOAK_DEFAULT_RATE, "no benchmark result: default rate"


@dataclass(frozen=True)
class Settle:
    seconds: float
    idle_seconds: float


SOAK_SETTLE = Settle(seconds=1500, idle_seconds=180)
"""After the soak's faults stop, the backlog they built drains: the checker waits while
executions still move, and counts as stuck what did not move for three minutes (a restarted
broker and its consumers' rejoin take well under one)."""


SEED_SETTING = "INTERLOCK_CHAOS_SEED"


def start_soak_load(ctx: Context, rate: float, *, minutes: float) -> None:
    """``rate`` executions a second for ``minutes``, each driven until the soak's settling ends."""
    ctx.workload.start(
        int(minutes * 60 * rate),
        spacing=1 / rate,
        deadline_seconds=minutes * 60 + SOAK_SETTLE.seconds,
    )


async def gateway_restarts_then_broker_down(ctx: Context, every: float = 20) -> None:
    """The sequence of faults after which a soak's gateway stopped answering (seed 1250780383,
    docs/reliability.md): under load, the gateway SIGKILLed three times 20 s apart, the broker
    SIGKILLed and restarted, then the orchestrator and the notifier SIGKILLed; the load goes on
    a minute after, and every request must still get an answer."""
    rate, why = soak_rate()
    ctx.notes.append(f"{rate:.2f} executions/s ({why})")
    start_soak_load(ctx, rate, minutes=3.5)
    for _ in range(3):
        await asyncio.sleep(every)
        ctx.faults += kill(ctx.cluster, "gateway", 0)
    await asyncio.sleep(every)
    if ctx.infra is not None:
        ctx.infra.kill_kafka()
        await asyncio.sleep(3)
        await ctx.infra.start_kafka()
    for service in ("orchestrator", "notifier"):
        await asyncio.sleep(every)
        ctx.faults += kill(ctx.cluster, service, 0)


async def soak(ctx: Context, minutes: float = 10, every: float = 20) -> None:
    """Load at half of the measured saturation with a random fault every ``every`` seconds: a
    service process SIGKILLed, or the (private) broker or database SIGKILLed and restarted."""
    rng = random.Random()
    # A failed soak is replayed with the seed it printed (the same faults in the same order;
    # their timing against the load differs).
    seed = int(os.environ.get(SEED_SETTING) or rng.randrange(2**32))
    rng.seed(seed)
    rate, why = soak_rate()
    ctx.notes.append(f"seed {seed}; {rate:.2f} executions/s ({why})")
    end = time.monotonic() + minutes * 60
    start_soak_load(ctx, rate, minutes=minutes)
    faults = [*SERVICES, *(("kafka", "ferretdb") if ctx.infra is not None else ())]
    while time.monotonic() < end:
        await asyncio.sleep(every)
        target = rng.choice(faults)
        if target == "kafka" and ctx.infra is not None:
            ctx.infra.kill_kafka()
            await asyncio.sleep(3)
            await ctx.infra.start_kafka()
        elif target == "ferretdb" and ctx.infra is not None:
            ctx.infra.kill_ferretdb()
            await asyncio.sleep(2)
            await ctx.infra.start_ferretdb()
        else:
            index = rng.randrange(len(ctx.cluster.processes[target]))
            ctx.faults += kill(ctx.cluster, target, index)
            target = f"{target}-{index}"
        ctx.notes.append(target)


ALL_POINTS = f"{SANDBOX_POINTS[0]}=crash,{SANDBOX_POINTS[1]}=crash,{SANDBOX_POINTS[2]}=crash"

SOAK_LIKE: dict[str, Any] = {
    "sandboxes": SOAK_SANDBOXES,
    "private_infra": True,
    "settle_seconds": SOAK_SETTLE.seconds,
    "settle_idle_seconds": SOAK_SETTLE.idle_seconds,
}
"""The soak's settings, shared by the scenarios that run under its load."""

SCENARIOS: list[Scenario] = [
    Scenario(
        "sigkill-at-every-fault-point",
        kill_at_fault_points,
        quick=True,
        faults=f"{ALL_POINTS},{ORCHESTRATOR_POINT}=crash",
        description="each fault point crashes its process once, under light load",
    ),
    Scenario("sigkill-all-four", kill_all_four, quick=True),
    Scenario("poison-messages", poison_messages, quick=True, settle_seconds=60),
    Scenario("decision-races", decision_races, quick=True, settle_seconds=30),
    Scenario("offsets-reset-to-earliest", offsets_reset, quick=True, settle_seconds=30),
    *(at_point(p) for p in (*SANDBOX_POINTS, ORCHESTRATOR_POINT)),
    Scenario("sigkill-each-service-in-turn", kill_each_service),
    Scenario(
        "sigkill-sandbox-with-its-limit-in-flight",
        kill_sandbox_at_its_limit,
        sandboxes=1,
        env={"INTERLOCK_CONSUMER_CONCURRENCY": str(SANDBOX_LIMIT)},
        effects_delay_ms=SLOW_EFFECT_MS,
        description=f"a sandbox with {SANDBOX_LIMIT} runs in flight (slow emails) is SIGKILLed,"
        " twice: each run is taken up again, each email sent once",
    ),
    Scenario(
        "sigkill-during-conversations",
        conversations_under_kills,
        settle_seconds=60,
        description=f"{CONVERSATIONS} five-turn conversations, turn 3 waiting for a review with"
        " turns 4-5 queued: the orchestrator and the sandboxes SIGKILLed twice, the"
        " orchestrator once more as it wakes a queued turn; every turn once, in order",
    ),
    Scenario(
        "zombie-sandbox-fenced",
        zombie_sandbox,
        faults="step.after_effect=stall",
    ),
    Scenario("kafka-sigkill-restart", kafka_sigkill, private_infra=True, settle_seconds=300),
    Scenario("kafka-down-60s", kafka_down, private_infra=True, settle_seconds=400),
    Scenario("ferretdb-sigkill-restart", ferretdb_restart, private_infra=True, settle_seconds=300),
    Scenario("ferretdb-down-30s", ferretdb_down, private_infra=True, settle_seconds=400),
    Scenario("gateway-restarts-then-broker-down", gateway_restarts_then_broker_down, **SOAK_LIKE),
    Scenario("soak-10min", soak, **SOAK_LIKE),
]


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    raise KeyError(f"no scenario {name!r}; known: {', '.join(s.name for s in SCENARIOS)}")
