"""Outreach by email: a LangChain ``create_agent`` agent whose sends a reviewer gates.

Tools: ``send_email`` (high tier: approve, edit - e.g. change the recipient - or reject) and
``ask_user`` (respond only: the reviewer's message is the answer, and the tool never runs).
Sent emails are written to the ledger (agents/ledger.py), with the arguments that actually ran.

Two registered agents share this module: ``outreach-email`` pauses once per model turn for all
gated calls (``build_graph``, batched), ``outreach-email-per-call`` once per gated call
(``build_graph_per_call``). The review policy comes from the registry when the sandbox passes it;
the defaults below equal the agents.toml entries.

The scripted model (agents/fake_model.py) reads the user's message: "send 3 emails" asks for
three sends in one turn; "ask the user" first asks a question, then sends the emails the message
mentions (none if it mentions none) with the answer in their body.
"""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import InterruptMode
from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agents import ledger
from agents.fake_model import Call, Conversation, chat_model
from interlock.sdk import AgentPolicy, Description, parse_policy

MAX_EMAILS = 10
QUESTION = "Which product should the outreach pitch?"
POLICY_TABLE = {"send_email": "high", "ask_user": ["respond"]}
DEFAULT_POLICY = parse_policy("outreach-email", POLICY_TABLE)
DEFAULT_POLICY_PER_CALL = parse_policy("outreach-email-per-call", POLICY_TABLE)


class AskUserRan(RuntimeError):
    """``ask_user`` was executed: its only legitimate answer is a reviewer's ``respond``."""


def _execution_id(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id", "unknown"))


@tool
def send_email(to: str, subject: str, body: str, config: RunnableConfig) -> str:
    """Send one email."""
    ledger.record(
        {
            "kind": "email",
            "execution_id": _execution_id(config),
            "to": to,
            "subject": subject,
            "body": body,
        }
    )
    return f"Sent {subject!r} to {to}."


@tool
def ask_user(question: str) -> str:
    """Ask the user a question and wait for the answer."""
    raise AskUserRan(f"ask_user must be answered by a reviewer (respond), not run: {question!r}")


TOOLS = [send_email, ask_user]


def describe_email(tool_call: ToolCall, state: Any, runtime: Any) -> str:
    args = tool_call["args"]
    return (
        f"Send an email to {args.get('to')}\nSubject: {args.get('subject')}\n\n{args.get('body')}"
    )


def describe_question(tool_call: ToolCall, state: Any, runtime: Any) -> str:
    return (
        f"The agent asks: {tool_call['args'].get('question')}\n"
        "Answer with a respond decision; the tool itself does not run."
    )


DESCRIPTIONS: dict[str, Description] = {"send_email": describe_email, "ask_user": describe_question}


def _email_count(text: str) -> int:
    match = re.search(r"(\d+)\s+e-?mails?", text)
    if match:
        return min(int(match.group(1)), MAX_EMAILS)
    return 1 if re.search(r"\be-?mail", text) else 0


def _emails(count: int, answer: str | None) -> list[Call]:
    pitch = f" about {answer.rstrip('.')}" if answer else ""
    return [
        Call(
            "send_email",
            {
                "to": f"prospect{i}@example.com",
                "subject": f"Interlock intro ({i}/{count})",
                "body": f"Hello, may we tell you more{pitch}?",
            },
        )
        for i in range(1, count + 1)
    ]


def script(conversation: Conversation) -> list[Call]:
    text = conversation.request.lower()
    if "ask the user" in text:
        if conversation.turn == 0:
            return [Call("ask_user", {"question": QUESTION})]
        if conversation.turn == 1:
            return _emails(_email_count(text), conversation.results[0])
        return []
    if conversation.turn == 0:
        return _emails(_email_count(text) or 1, None)
    return []


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None, *, policy: AgentPolicy | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``outreach-email``: one interrupt per model turn, listing every gated call."""
    return _build(checkpointer, policy if policy is not None else DEFAULT_POLICY, "batched")


def build_graph_per_call(
    checkpointer: BaseCheckpointSaver[Any] | None = None, *, policy: AgentPolicy | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``outreach-email-per-call``: one interrupt per gated call, each with its own id."""
    chosen = policy if policy is not None else DEFAULT_POLICY_PER_CALL
    return _build(checkpointer, chosen, "per_call")


def _build(
    checkpointer: BaseCheckpointSaver[Any] | None, policy: AgentPolicy, mode: InterruptMode
) -> CompiledStateGraph[Any, Any, Any, Any]:
    review = HumanInTheLoopMiddleware(
        interrupt_on=policy.interrupt_on([t.name for t in TOOLS], descriptions=DESCRIPTIONS),
        description_prefix="Outreach action pending review",
        interrupt_mode=mode,
    )
    return create_agent(
        chat_model(script),
        TOOLS,
        system_prompt="You write short outreach emails. Ask the user when unsure.",
        middleware=[review],
        checkpointer=checkpointer,
    )
