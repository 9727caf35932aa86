"""The in-memory adapter of every store port (shared/store/): for unit tests and fakes. It
imports only the ports; the contract suite (tests/contract) runs on it as on the real ones."""

from shared.store.memory.store import (
    InMemoryDecisionClaims,
    InMemoryExecutionStore,
    InMemoryStepStore,
    InMemoryStore,
)

__all__ = [
    "InMemoryDecisionClaims",
    "InMemoryExecutionStore",
    "InMemoryStepStore",
    "InMemoryStore",
]
