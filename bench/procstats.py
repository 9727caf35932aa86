"""What processes cost, read from /proc: resident memory and CPU time (Linux only)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
INFRA_PREFIX = "infra:"
"""Processes shared with the rest of the machine (Kafka, FerretDB): reported, never counted in
``measured_seconds``, the CPU charged to the system under test."""


def rss_bytes(pid: int) -> int | None:
    """VmRSS of a running process; None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time the process has used so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle, summed over cores, since boot."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in first]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / _TICKS


@dataclass
class CpuMeter:
    """CPU used by a set of processes and by the whole machine over one measured interval, so a
    result can say how much of the machine other work (other people's tests) took meanwhile."""

    pids: dict[str, int]
    _start: dict[str, float | None]
    _machine_start: float

    @classmethod
    def start(cls, pids: dict[str, int]) -> CpuMeter:
        return cls(pids, {n: cpu_seconds(p) for n, p in pids.items()}, machine_busy_seconds())

    def stop(self) -> dict[str, object]:
        per_process: dict[str, float] = {}
        for name, pid in self.pids.items():
            before, after = self._start.get(name), cpu_seconds(pid)
            if before is not None and after is not None:
                per_process[name] = round(after - before, 3)
        machine = round(machine_busy_seconds() - self._machine_start, 3)
        ours = [v for n, v in per_process.items() if not n.startswith(INFRA_PREFIX)]
        return {
            "per_process_seconds": per_process,
            "measured_seconds": round(sum(ours), 3),
            "machine_busy_seconds": machine,
        }


def infra_pids(infra_dir: Path) -> dict[str, int]:
    """Kafka's and FerretDB's pids from infra/infra.sh's pid files (shared with other users of
    the machine, so their CPU is reported, never charged to Interlock)."""
    pids = {}
    for name in ("kafka", "ferretdb"):
        path = infra_dir / f"{name}.pid"
        try:
            pids[INFRA_PREFIX + name] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return pids
