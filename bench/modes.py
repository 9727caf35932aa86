"""How big each mode's runs are. Quick: ``make bench``, under 10 minutes on 2 cores. Full:
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
)
QUICK = Mode(
    name="quick",
    runs=3,
    saturation_count=10,
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
)
MODES = {m.name: m for m in (SMOKE, QUICK, FULL)}
