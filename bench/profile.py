"""Sampling profiles of the services from outside (py-spy ``--pid``, no change to product code),
reduced to the top costs the results page names."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^():]*)(?::\d+)?\)$")
TOP = 10
WAITING = frozenset({"select", "wait", "_worker", "_wait_for_tstate_lock", "recv_into"})
"""Leaf frames that are a thread waiting (the event loop's epoll, idle pool workers, a blocking
socket read): py-spy samples them as running, but they cost no CPU, so they are set apart."""


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


async def record(
    pids: dict[str, int], seconds: float, outdir: Path, *, flamegraph: bool = False
) -> dict[str, Path]:
    """Sample every process at 100 Hz for ``seconds`` (non-blocking: the process is not paused
    while it is read); returns the collapsed-stack file of each that worked (with
    ``flamegraph``, an SVG flame graph instead)."""
    binary = py_spy()
    if binary is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    await asyncio.to_thread(outdir.mkdir, parents=True, exist_ok=True)
    procs = {}
    for name, pid in pids.items():
        out = outdir / (f"{name}.svg" if flamegraph else f"{name}.collapsed.txt")
        procs[name] = (
            out,
            await asyncio.create_subprocess_exec(
                binary, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                "--rate", "100", "--format", "flamegraph" if flamegraph else "raw",
                "--nonblocking", "--full-filenames",
                "--output", str(out),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            ),
        )  # fmt: skip
    files = {}
    for name, (out, proc) in procs.items():
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"py-spy failed on {name}: {err.decode(errors='replace')[-300:]}")
        files[name] = out
    return files


def _where(file: str) -> str:
    """A frame's package: the top folder under site-packages, else the repository folder."""
    parts = Path(file).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0]
    if "lib" in parts and any(p.startswith("python3") for p in parts):
        return "stdlib"
    for root in ("services", "shared", "agents", "interlock", "bench"):
        if root in parts:
            return root
    if len(parts) > 1 and not Path(file).is_absolute():  # py-spy's short names: pkg/module.py
        return parts[0]
    return "stdlib"  # a bare module name or <frozen ...>: the standard library


def summarise(path: Path) -> dict[str, Any]:
    """Self time per function and per package, and inclusive time per package (the share of
    samples in which that package is anywhere on the stack)."""
    own: Counter[str] = Counter()
    own_package: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = waiting = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        match = _FRAME.match(frames[-1])
        function, file = (match["function"], match["file"]) if match else (frames[-1], "?")
        if function.rsplit(".", 1)[-1] in WAITING:
            waiting += count
            continue
        total += count
        own[f"{function} ({_where(file)}: {Path(file).name})"] += count
        own_package[_where(file)] += count
        packages = set()
        for frame in frames:
            m = _FRAME.match(frame)
            if m:
                packages.add(_where(m["file"]))
        for package in packages:
            inclusive[package] += count

    def share(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"name": name, "samples": n, "percent": round(100 * n / max(total, 1), 1)}
            for name, n in counter.most_common(TOP)
        ]

    return {
        "samples": total,
        "waiting_samples": waiting,
        "self_functions": share(own),
        "self_packages": share(own_package),
        "inclusive_packages": share(inclusive),
    }
