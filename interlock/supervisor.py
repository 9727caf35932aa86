"""``interlock up``: run the four services as separate processes, for development and ``make up``.

Production runs each service as its own Deployment (``deploy/``); this is the same four processes
on one machine, supervised together: started in order, stopped together, and any one of them
exiting stops the rest so a broken service is never hidden.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from interlock.announcement import announcement
from interlock.profile import RunningProfile, up_instance

SERVICES = ("orchestrator", "sandbox", "notifier", "gateway")
READY_TIMEOUT_SECONDS = 60


def _wait_ready(url: str, processes: dict[str, subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode} while starting")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"gateway not ready at {url} after {READY_TIMEOUT_SECONDS}s")


def _stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for process in processes.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 20
    for process in processes.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def shared_encryption_keys(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with an ``INTERLOCK_ENCRYPTION_KEYS`` for every service: the one given, or a
    key made for this run. Without one, each process would make its own in-memory key and the
    sandbox could not open the custom headers the gateway sealed. Like ``interlock dev``'s, the
    key lives only as long as this run: a restart forgets headers still in flight."""
    if environ.get("INTERLOCK_ENCRYPTION_KEYS"):
        return dict(environ)
    from shared.crypto import new_key_entry

    return {**environ, "INTERLOCK_ENCRYPTION_KEYS": new_key_entry("up")}


def run(log_dir: Path | None) -> int:
    """Start the services, print how to try them, and wait until interrupted or one exits."""
    host = os.environ.get("INTERLOCK_HOST", "127.0.0.1")
    port = os.environ.get("INTERLOCK_PORT", "8000")
    base_url = f"http://{host}:{port}"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    env = shared_encryption_keys(os.environ)
    running = RunningProfile(up_instance(host, port, os.environ))
    try:
        for name in SERVICES:
            output = None
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                output = (log_dir / f"{name}.log").open("ab")
            processes[name] = subprocess.Popen(
                [sys.executable, "-m", "interlock.cli", "service", name],
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
                env=env,
            )
        _wait_ready(f"{base_url}/readyz", processes)
        print(announcement(base_url, os.environ.get("INTERLOCK_DEV_API_KEY")), flush=True)
        running.write()
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(
                        f"{name} exited with code {process.returncode}; stopping", file=sys.stderr
                    )
                    return 1
            time.sleep(0.5)
        return 0
    except RuntimeError as exc:
        print(f"interlock up: {exc}", file=sys.stderr)
        return 1
    finally:
        _stop(processes)
        running.remove()
