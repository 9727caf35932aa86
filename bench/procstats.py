"""What processes cost, read from /proc: resident memory and CPU time (Linux only), and which
processes are the store (FerretDB, and PostgreSQL under it), found from the address they listen
on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

_TICKS = os.sysconf("SC_CLK_TCK")
INFRA_PREFIX = "infra:"
"""Processes shared with the rest of the machine (Kafka, FerretDB, PostgreSQL): reported, never
counted in ``measured_seconds``, the CPU charged to the system under test. Each is measured with
its children (PostgreSQL forks a backend per connection)."""
FERRETDB = INFRA_PREFIX + "ferretdb"
POSTGRESQL = INFRA_PREFIX + "postgresql"
STORE = (FERRETDB, POSTGRESQL)
"""The store's processes: their CPU is the store CPU per execution."""


def rss_bytes(pid: int) -> int | None:
    """VmRSS of a running process; None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 of proc(5) is index 0)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time the process has used so far."""
    fields = _stat(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU time of a process and all its descendants, those that exited included: each live
    process's own time plus what its reaped children used (cutime, cstime), so the sum only
    grows while backends come and go."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)) is not None:
            parents[int(entry.name)] = int(fields[1])
    if pid not in parents:
        return None
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        fields = _stat(current)
        if fields is not None:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        todo.extend(children.get(current, []))
    return total / _TICKS


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
        return cls(pids, {n: _cpu_of(n, p) for n, p in pids.items()}, machine_busy_seconds())

    def stop(self) -> dict[str, object]:
        per_process: dict[str, float] = {}
        for name, pid in self.pids.items():
            before, after = self._start.get(name), _cpu_of(name, pid)
            if before is not None and after is not None:
                per_process[name] = round(after - before, 3)
        machine = round(machine_busy_seconds() - self._machine_start, 3)
        ours = [v for n, v in per_process.items() if not n.startswith(INFRA_PREFIX)]
        return {
            "per_process_seconds": per_process,
            "measured_seconds": round(sum(ours), 3),
            "machine_busy_seconds": machine,
        }


def _cpu_of(name: str, pid: int) -> float | None:
    return tree_cpu_seconds(pid) if name.startswith(INFRA_PREFIX) else cpu_seconds(pid)


def infra_pids(infra_dir: Path, mongodb_uri: str | None = None) -> dict[str, int]:
    """Kafka's and FerretDB's pids from infra/infra.sh's pid files, and PostgreSQL's postmaster
    when FerretDB runs on it (shared with other users of the machine, so their CPU is reported,
    never charged to Interlock). With ``mongodb_uri``, the store is the server listening there
    (see ``store_pids``), whatever the pid files say."""
    pids = {}
    for name in ("kafka", "ferretdb"):
        path = infra_dir / f"{name}.pid"
        try:
            pids[INFRA_PREFIX + name] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    found = store_pids(mongodb_uri) if mongodb_uri else {}
    if not found and FERRETDB in pids:
        found = {FERRETDB: pids[FERRETDB], **_postgresql_under(pids[FERRETDB])}
    pids.update(found)
    return pids


def store_pids(mongodb_uri: str) -> dict[str, int]:
    """The store behind ``mongodb_uri`` when it runs on this machine: the process listening on
    its port (FerretDB), and, when that FerretDB runs on PostgreSQL, the postmaster listening on
    the port of its ``--postgresql-url``. Empty for a remote store (or without permission)."""
    pid = listener_pid(_port_of(mongodb_uri, 27017))
    if pid is None:
        return {}
    return {FERRETDB: pid, **_postgresql_under(pid)}


def ferretdb_backend(pid: int) -> str | None:
    """``postgresql`` or ``sqlite``: the ``--handler`` the FerretDB process was started with."""
    flags = _flags(pid)
    return flags.get("handler") or ("postgresql" if "postgresql-url" in flags else None)


def postgresql_url(ferretdb_pid: int) -> str | None:
    """The PostgreSQL a FerretDB process runs on (its ``--postgresql-url``), if it does."""
    flags = _flags(ferretdb_pid)
    if ferretdb_backend(ferretdb_pid) != "postgresql":
        return None
    return flags.get("postgresql-url")


def _postgresql_under(ferretdb_pid: int) -> dict[str, int]:
    flags = _flags(ferretdb_pid)
    if ferretdb_backend(ferretdb_pid) != "postgresql" or "postgresql-url" not in flags:
        return {}
    pid = listener_pid(_port_of(flags["postgresql-url"], 5432))
    return {} if pid is None else {POSTGRESQL: pid}


def _flags(pid: int) -> dict[str, str]:
    """A process's ``--name=value`` (and ``--name value``) arguments, and FerretDB's
    ``FERRETDB_*`` environment variables (the same settings)."""
    flags: dict[str, str] = {}
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return flags
    for item in environ:
        name, _, value = item.decode(errors="replace").partition("=")
        if name.startswith("FERRETDB_"):
            flags[name.removeprefix("FERRETDB_").lower().replace("_", "-")] = value
    words = [a.decode(errors="replace") for a in args]
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, equals, value = word[2:].partition("=")
        if not equals and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value = words[i + 1]
        flags[name] = value
    return flags


def _port_of(uri: str, default: int) -> int:
    """The port of a URI's first host (``mongodb://h1:p1,h2:p2/`` -> p1)."""
    netloc = urlsplit(uri).netloc.rsplit("@", 1)[-1].split(",")[0]
    host, _, port = netloc.rpartition(":")
    return int(port) if host and port.isdigit() else default


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine (the parent, when children share
    the socket), from /proc/net/tcp{,6} and the processes' open sockets; None if not found."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    holders = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                holders.add(int(entry.name))
        except OSError:
            continue
    roots = [pid for pid in holders if (f := _stat(pid)) is None or int(f[1]) not in holders]
    return min(roots) if roots else None
