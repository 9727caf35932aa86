"""Step keys: where a step runs, made into a key that is the same every time it runs there.

docs/durable-steps.md explains the key rules and what breaks them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from interlock.sdk._errors import NoStepRun
from interlock.sdk.runtime import StepRun

__all__ = ["derived_key", "explicit_key", "key_for", "node_position"]

KEY_HASH_CHARS = 24


def derived_key(execution_id: str, thread_id: str, position: str, name: str, ordinal: int) -> str:
    """Readable prefix + a hash of where the step runs. JSON, not a separator, joins the parts:
    positions of subgraphs contain ``|`` and names may contain anything."""
    identity = json.dumps([thread_id, position, name, ordinal])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:KEY_HASH_CHARS]
    return f"{execution_id}:{name}:{digest}"


def node_position(checkpoint_ns: str, step: Any, path: Any) -> str:
    """Where a node runs, the same every time the graph runs from the same checkpoint: its
    namespace without LangGraph's task ids, its superstep and its task path (which ``Send`` it
    is). Task ids derive from checkpoint ids, and a run that checkpoints only when it exits
    makes those afresh when it is run again after a crash; supersteps and paths do not change.
    Without them (LangGraph did not say), the namespace with its task ids stands in."""
    if step is None or path is None:
        return checkpoint_ns
    nodes = "|".join(part.split(":", 1)[0] for part in checkpoint_ns.split("|"))
    return json.dumps([nodes, step, path], default=str, separators=(",", ":"))


def explicit_key(execution_id: str, key: str) -> str:
    """The key of a step given ``key=``: namespaced by the execution."""
    return f"{execution_id}:{key}"


def key_for(run: StepRun, name: str, key: str | None) -> str:
    """The key of the step called now: ``key`` namespaced by the execution, else derived from
    the LangGraph node that calls it (raises ``NoStepRun`` outside a node)."""
    if key is not None:
        return explicit_key(run.execution_id, key)
    try:
        config: Mapping[str, Any] = get_config()
    except RuntimeError:  # not inside a runnable at all
        config = {}
    configurable: Mapping[str, Any] = config.get("configurable", {})
    checkpoint_ns = configurable.get("checkpoint_ns")
    if not checkpoint_ns:
        raise NoStepRun(
            f"step {name!r} ran outside a LangGraph node, so it has no deterministic key; "
            "call it from a node or give it an explicit key with run_step(..., key=...)"
        )
    thread_id = str(configurable.get("thread_id") or run.execution_id)
    # A node retried by its RetryPolicy keeps its position: counting per attempt gives the
    # retry the same keys, so steps the failed attempt completed are served from the cache.
    info = getattr(get_runtime(), "execution_info", None)
    node_attempt = int(getattr(info, "node_attempt", 1))
    metadata = config.get("metadata", {})
    position = node_position(
        str(checkpoint_ns), metadata.get("langgraph_step"), metadata.get("langgraph_path")
    )
    ordinal = run.next_ordinal((thread_id, position, node_attempt, name))
    step_key = derived_key(run.execution_id, thread_id, position, name, ordinal)
    if position != checkpoint_ns:
        # Steps stored before keys left task ids out were keyed by the full namespace: a run
        # resuming such an execution finds them under that key.
        legacy_ordinal = run.next_ordinal((thread_id, str(checkpoint_ns), node_attempt, name))
        legacy = derived_key(run.execution_id, thread_id, str(checkpoint_ns), name, legacy_ordinal)
        run.remember_legacy(step_key, legacy)
    return step_key
