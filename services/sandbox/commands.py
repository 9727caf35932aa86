"""A reviewer's answer as the LangGraph ``Command`` the graph resumes with: the values its
interrupts return, and what the answer asks besides (``goto``, ``update``). Pure.

``end`` is not a ``Command``: it is LangGraph's ``update_state(None, as_node=END)``, which drops
the pending interrupts and keeps the state (services/sandbox/runner.py runs it)."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END
from langgraph.types import Command, Send

from shared.events import ResumeCommand, ResumeInstruction


def graph_command(resume: ResumeInstruction) -> Command[Any]:
    """What the graph resumes with. A command alone answers no interrupt (LangGraph's
    ``Command(goto=...)`` without ``resume``: the interrupted nodes run again)."""
    values = resume.resume_values()
    command = resume.command
    if command is None:
        return Command(resume=values)
    goto = [g if isinstance(g, str) else Send(g.node, g.input) for g in command.goto]
    # Pairs arrive as lists from JSON; LangGraph takes (key, value) tuples.
    update: Any = command.update
    if isinstance(update, list):
        update = [(key, value) for key, value in update]
    return Command(resume=values or None, goto=goto, update=update)


def unknown_targets(command: ResumeCommand | None, nodes: set[str]) -> list[str]:
    """The ``goto`` targets the graph does not have (LangGraph would drop them with a warning;
    Interlock refuses the answer instead, so a misspelt node is never taken for a no-op)."""
    if command is None:
        return []
    named = [g if isinstance(g, str) else g.node for g in command.goto]
    return [name for name in named if name != END and name not in nodes]
