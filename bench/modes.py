"""How big each mode's runs are. Quick: ``make bench``, about 12 minutes on 2 cores. Full:
``make bench-full``, the figures as the issue states them (an hour or more on 2 cores). Smoke:
CI's check that the harness runs end to end, in seconds-to-a-minute, no figure meaningful."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str
    runs: int
    """Each figure is the median of this many runs."""
    saturation_count: int
    """Executions per saturation run (offered far above capacity)."""
    saturation_rate: float
    """Arrivals per second offered in a saturation run."""
    latency_seconds: float
    """Length of one latency run's arrivals, at half the measured saturation rate."""
    latency_min_count: int
    replay_steps: tuple[int, ...]
    idle_count: int
    """Suspended executions held for the idle-cost figure."""
    sandbox_replicas: tuple[int, ...]
    profile_seconds: float
    embedded: bool
    peers: bool
    peer_saturation_count: int
    timeout: float
    """Longest one run may take before it is reported as timed out."""
    sweep_seconds: float = 5.0
    """How long the periodic sweeps' store commands are counted with nothing running."""
    history_prefill: int = 20_000
    """Finished executions stored before the history-growth run (the issue asks 20,000)."""
    history_count: int = 10
    """Executions of each history-growth run (one on the empty store, one after the prefill)."""
    history_rate: float = 1.0
    """Their arrivals per second: low, so the latency is the store's and not a queue's."""
    concurrency_replicas: tuple[int, ...] = (1, 3)
    """Sandbox replicas of the concurrency figure (figure 9), measured one after the other."""
    concurrency_count: int = 150
    """Executions per concurrency run."""
    concurrency_model_ms: int = 1000
    """The model call of each of its executions (``bench-pipeline`` with ``model_ms=N``)."""
    concurrency_overload: float = 2.0
    """Arrivals offered, as a multiple of what the sandboxes' limits admit (replicas x runs in
    flight / model time): the limit can only bind if more than it admits arrives."""
    backlog_messages: int = 100_000
    """Messages waiting for one consumer in the backlog figure (figure 10; the issue asks
    100,000)."""
    backlog_handler_ms: float = 100.0
    """How long its handler takes per message: the consumer is at its limit for the whole
    figure, and a few thousand messages pass through its buffer while the backlog waits."""
    backlog_drain_seconds: float = 10.0
    """How long it is watched once the backlog is published (draining it in part)."""
    sdk_sequential: int = 8
    """Section 12 (one ``langgraph-sdk`` workload on Interlock and LangGraph's Agent Server):
    executions one after another, for each half's latency. The Agent Server's queue polls every
    0.5 s, so each of its executions takes about 2 s, whatever the sizes: 8 give each half's p50
    (and slowest) in ~16 s. Quick mode was at 525-570 s before this section; its sizes keep the
    section near 30 s a server (the mode took 669 s with it and the native API's concurrent run,
    bench/native_workload.py, at cf9d258)."""
    sdk_concurrent: int = 40
    """Executions of its concurrent run (4 rounds of 10: ~9 s on the Agent Server)..."""
    sdk_in_flight: int = 10
    """...with this many in flight at once (and the Agent Server given as many workers, so its
    worker count is not what binds)."""
    turns_conversations: int = 4
    """Figure 13 (a conversation's turn as the conversation grows): conversations driven in lock
    step, turn k of each at once, so each turn's figures are a median over them..."""
    turns_count: int = 50
    """...to this many turns each (the issue compares turn 50 with turn 1)."""
    turns_paired: int = 20
    """Then rounds of a long conversation's next turn and a new conversation's first, one request
    at a time: latency and CPU of both under the same conditions."""


SMOKE = Mode(
    name="smoke",
    runs=1,
    saturation_count=3,
    saturation_rate=10,
    latency_seconds=1,
    latency_min_count=2,
    replay_steps=(10,),
    idle_count=3,
    sandbox_replicas=(1,),
    profile_seconds=0,
    embedded=True,
    peers=True,
    peer_saturation_count=3,
    timeout=90,
    sweep_seconds=2,
    history_prefill=50,
    history_count=2,
    history_rate=2,
    concurrency_count=40,
    backlog_messages=2_000,
    backlog_drain_seconds=3,
    sdk_sequential=2,
    sdk_concurrent=4,
    sdk_in_flight=2,
    turns_conversations=2,
    turns_count=3,
    turns_paired=1,
)
QUICK = Mode(
    name="quick",
    runs=3,
    # As many as the peers' runs: with 10, a run was over in about a second (0.5 s of
    # arrivals), too short to be a saturated rate or a CPU cost per execution.
    saturation_count=40,
    saturation_rate=20,
    latency_seconds=8,
    latency_min_count=6,
    replay_steps=(10, 100, 1000),
    idle_count=30,
    sandbox_replicas=(1, 3),
    profile_seconds=8,
    embedded=True,
    peers=True,
    peer_saturation_count=40,
    timeout=180,
    sweep_seconds=5,
    history_prefill=2_000,
    history_count=10,
    history_rate=1,
    concurrency_count=150,
    backlog_messages=100_000,
    backlog_drain_seconds=10,
)
FULL = Mode(
    name="full",
    runs=5,
    saturation_count=300,
    saturation_rate=100,
    latency_seconds=120,
    latency_min_count=100,
    replay_steps=(10, 100, 1000),
    idle_count=10_000,
    sandbox_replicas=(1, 3),
    profile_seconds=60,
    embedded=True,
    peers=True,
    peer_saturation_count=1000,
    timeout=7200,
    sweep_seconds=60,
    history_prefill=20_000,
    history_count=100,
    history_rate=1,
    concurrency_count=1_000,
    backlog_messages=100_000,
    backlog_drain_seconds=60,
    sdk_sequential=100,
    sdk_concurrent=500,
    sdk_in_flight=20,
    turns_conversations=10,
    turns_count=100,
    turns_paired=40,
)
MODES = {m.name: m for m in (SMOKE, QUICK, FULL)}
