"""Spans for what runs inside an agent: one per graph node, one per durable step.

LangGraph reports each node's start and end to callback handlers; ``GraphSpans`` turns the
node-level runs into spans under the sandbox's run span. A durable step finds the node (or tool)
it runs in through the run config LangGraph hands to that code, so its span is the child of the
node's span, whichever thread or task the step runs on. Without tracing configured every span
here is the API's no-op span: the bookkeeping is a few dict operations per node.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langgraph.errors import GraphBubbleUp
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from shared.tracing import tracer


class GraphSpans(BaseCallbackHandler):
    """A callback handler for one agent run: a span per node, parented by the run's span."""

    # Called on the event loop's thread, not in an executor: it only starts and ends spans.
    run_inline = True

    def __init__(self, parent: otel_context.Context) -> None:
        self._parent = parent
        self._spans: dict[UUID, Span] = {}
        self._parents: dict[UUID, UUID | None] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        node = (metadata or {}).get("langgraph_node")
        if node is None or kwargs.get("name") != node:
            return  # the graph itself, or a runnable inside a node
        self._spans[run_id] = tracer().start_span(
            f"node {node}",
            context=self.context_for(parent_run_id),
            attributes={
                "langgraph.node": str(node),
                "langgraph.step": int((metadata or {}).get("langgraph_step", 0)),
            },
        )

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._parents.pop(run_id, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._parents.pop(run_id, None)

    def context_for(self, run_id: UUID | None) -> otel_context.Context:
        """The context of the nearest node span at or above ``run_id`` (the run's otherwise)."""
        seen = 0
        while run_id is not None and seen < 1000:
            span = self._spans.get(run_id)
            if span is not None:
                return trace.set_span_in_context(span, self._parent)
            run_id = self._parents.get(run_id)
            seen += 1
        return self._parent

    def _end(self, run_id: UUID, error: BaseException | None) -> None:
        self._parents.pop(run_id, None)
        span = self._spans.pop(run_id, None)
        if span is None:
            return
        if isinstance(error, GraphBubbleUp):
            # An interrupt is how a node asks for review: the run pauses, nothing failed.
            span.set_attribute("langgraph.interrupted", True)
        elif error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()


def _node_context() -> otel_context.Context | None:
    """The context of the node the calling code runs in, when it runs inside a traced graph."""
    from langgraph.config import get_config

    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # not inside a runnable: a step called from plain code
        return None
    if not isinstance(callbacks, BaseCallbackManager):
        return None
    for handler in callbacks.handlers:
        if isinstance(handler, GraphSpans):
            return handler.context_for(callbacks.parent_run_id)
    return None


@contextmanager
def step_span(name: str, key: str) -> Iterator[Span]:
    with tracer().start_as_current_span(
        f"step {name}",
        context=_node_context(),
        attributes={"interlock.step.name": name, "interlock.step.key": key},
    ) as span:
        yield span
