"""The tests' port allocator (tests/ports.py): each worker's ports in a slice of its own below
the kernel's ephemeral range, none handed out while it is in use."""

from __future__ import annotations

import socket

import pytest

from tests.ports import FIRST_PORT, PORTS_PER_WORKER, free_port


@pytest.mark.parametrize("worker", ["gw0", "gw2"])
def test_a_worker_gets_distinct_free_ports_of_its_own_slice(
    worker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    first = FIRST_PORT + int(worker[2:]) * PORTS_PER_WORKER
    held: list[socket.socket] = []
    try:
        ports = []
        for _ in range(50):
            port = free_port()
            sock = socket.socket()
            sock.bind(("127.0.0.1", port))  # free when handed out; held, so never again
            held.append(sock)
            ports.append(port)
    finally:
        for sock in held:
            sock.close()
    assert len(set(ports)) == 50
    assert all(first <= port < first + PORTS_PER_WORKER for port in ports)
    assert max(ports) < 32768  # below Linux's ephemeral range
