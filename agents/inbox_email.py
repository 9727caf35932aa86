"""An email assistant reviewed through Agent Inbox: a LangChain ``create_agent`` agent whose
``send_email`` tool asks a person first with LangGraph's ``HumanInterrupt``, as LangGraph's
human-in-the-loop guide writes it for Agent Inbox (``interrupt([request])[0]``).

The reviewer's ``HumanResponse`` decides: ``accept`` sends the email as drafted, ``edit`` sends
the edited one, ``response`` sends nothing and hands the reviewer's text back to the model, and
``ignore`` sends nothing. Sent emails are written to the ledger (agents/ledger.py).

The scripted model (agents/fake_model.py) drafts one email to the address the message names
(``to someone@example.com``; a default one otherwise), then answers with the tool's result. A
message saying "no edits" asks for a review that does not allow editing.
"""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from agents import ledger
from agents.fake_model import Call, Conversation, chat_model

DEFAULT_TO = "prospect@example.com"
SUBJECT = "Following up"


def _execution_id(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id", "unknown"))


def _send(args: dict[str, Any], config: RunnableConfig) -> str:
    ledger.record({"kind": "email", "execution_id": _execution_id(config), **args})
    return f"Sent {args.get('subject')!r} to {args.get('to')}."


@tool
def send_email(to: str, subject: str, body: str, config: RunnableConfig) -> str:
    """Send one email, once a person has reviewed it."""
    args = {"to": to, "subject": subject, "body": body}
    request = {
        "action_request": {"action": "send_email", "args": args},
        "config": {
            "allow_accept": True,
            "allow_edit": not _no_edits(body),
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": f"Send this email to {to}?\n\nSubject: {subject}\n\n{body}",
    }
    response = interrupt([request])[0]
    kind = response["type"]
    if kind == "accept":
        return _send(args, config)
    if kind == "edit":
        return _send(dict(response["args"]["args"]), config)
    if kind == "response":
        return f"Not sent. The reviewer said: {response['args']}"
    return "Not sent: the reviewer ignored it."


def _no_edits(text: str) -> bool:
    return "no edits" in text.lower()


def script(conversation: Conversation) -> list[Call]:
    if conversation.turn > 0:
        return []
    found = re.search(r"\bto (\S+@\S+?)[.,;]?(?:\s|$)", conversation.request)
    return [
        Call(
            "send_email",
            {
                "to": found.group(1) if found else DEFAULT_TO,
                "subject": SUBJECT,
                "body": f"Hello, about your message: {conversation.request}",
            },
        )
    ]


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(
        chat_model(script),
        [send_email],
        system_prompt="You answer emails. Every email you send is reviewed first.",
        checkpointer=checkpointer,
    )
