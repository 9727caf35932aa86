"""The machine and the versions a result was measured with, as the results page states them."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import procstats

PACKAGES = (
    "langgraph",
    "langgraph-checkpoint-mongodb",
    "langgraph-checkpoint-sqlite",
    "faststream",
    "aiokafka",
    "pymongo",
    "fastapi",
    "uvicorn",
    "dbos",
    "hdrhistogram",
    "py-spy",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def kafka_version(infra: Path) -> str | None:
    for jar in sorted((infra / "kafka" / "libs").glob("kafka_2.13-*.jar")):
        name = jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
        if name[:1].isdigit() and "-" not in name:
            return name
    return None


def ferretdb_version(infra: Path) -> str | None:
    binary = infra / "bin" / "ferretdb"
    if not binary.exists():
        return None
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    return None


def _version_line(binary: Path, prefix: str) -> str | None:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip()
    return None


def store_of(uri: str, label: str | None = None) -> dict[str, Any]:
    """What serves ``uri`` when it runs here: FerretDB's version and backend, and PostgreSQL's
    version under it; ``label`` names it on the page (default: from those)."""
    pids = procstats.store_pids(uri)
    ferretdb = pids.get(procstats.FERRETDB)
    found: dict[str, Any] = {"processes": sorted(pids)}
    if ferretdb is not None:
        exe = Path(f"/proc/{ferretdb}/exe")
        found["ferretdb"] = _version_line(exe, "version:")
        found["package"] = _version_line(exe, "package:")
        found["backend"] = procstats.ferretdb_backend(ferretdb)
    postgres = pids.get(procstats.POSTGRESQL)
    if postgres is not None:
        found["postgresql"] = _version_line(Path(f"/proc/{postgres}/exe"), "postgres (PostgreSQL)")
    if label is None:
        if ferretdb is None:
            label = "a store not on this machine"
        else:
            backend = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}.get(
                found.get("backend") or "", found.get("backend") or "?"
            )
            label = f"FerretDB {found.get('ferretdb') or ''} on {backend}".replace("  ", " ")
    found["label"] = label
    return found


def describe(infra: Path) -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kafka": kafka_version(infra),
        "ferretdb": ferretdb_version(infra),
        "packages": {p: _version(p) for p in PACKAGES},
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
