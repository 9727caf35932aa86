"""SQL operations: a LangChain ``create_agent`` agent whose writes a reviewer gates.

Tools: ``execute_sql`` (medium tier: approve or reject; no edit, so a reviewer cannot rewrite a
statement into one nobody reviewed) and ``read_data`` (low tier: runs without review). Both are
simulated and write what ran to the ledger (agents/ledger.py). The review policy comes from the
registry when the sandbox passes it; the default below equals the agents.toml entry.

The scripted model (agents/fake_model.py) reads the user's message: "read TABLE" reads a table,
"sql: STATEMENT" (to the end of the message) executes a statement; with neither, it reads
``orders`` and deletes old orders, in one turn.
"""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agents import ledger
from agents.fake_model import Call, Conversation, chat_model
from interlock.sdk import AgentPolicy, parse_policy

DEFAULT_POLICY = parse_policy("sql-ops", {"execute_sql": "medium", "read_data": "low"})
DEFAULT_QUERY = "DELETE FROM orders WHERE created_at < '2024-01-01'"


def _execution_id(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id", "unknown"))


@tool
def execute_sql(query: str, config: RunnableConfig) -> str:
    """Execute one SQL statement against the operations database."""
    ledger.record({"kind": "sql", "execution_id": _execution_id(config), "query": query})
    return f"Executed: {query}"


@tool
def read_data(table: str, config: RunnableConfig) -> str:
    """Read the rows of a table."""
    ledger.record({"kind": "read", "execution_id": _execution_id(config), "table": table})
    return f"{table}: 3 rows"


TOOLS = [execute_sql, read_data]


def script(conversation: Conversation) -> list[Call]:
    if conversation.turn > 0:
        return []
    text = conversation.request
    calls: list[Call] = []
    if read := re.search(r"\bread\s+(\w+)", text, re.IGNORECASE):
        calls.append(Call("read_data", {"table": read.group(1)}))
    if sql := re.search(r"\bsql:\s*(.+)", text, re.IGNORECASE | re.DOTALL):
        calls.append(Call("execute_sql", {"query": sql.group(1).strip()}))
    return calls or [
        Call("read_data", {"table": "orders"}),
        Call("execute_sql", {"query": DEFAULT_QUERY}),
    ]


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None, *, policy: AgentPolicy | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    chosen = policy if policy is not None else DEFAULT_POLICY
    review = HumanInTheLoopMiddleware(
        # No per-tool description: the prefix, tool name and arguments are what to review.
        interrupt_on=chosen.interrupt_on([t.name for t in TOOLS]),
        description_prefix="SQL statement pending approval",
    )
    return create_agent(
        chat_model(script),
        TOOLS,
        system_prompt="You run SQL for the operations team. Read before you write.",
        middleware=[review],
        checkpointer=checkpointer,
    )
