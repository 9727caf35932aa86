"""Risk-tier review policy: which tool calls of an agent pause for a reviewer, and how the
reviewer may answer them.

Configured per agent in ``agents/agents.toml``::

    [agents.sql-ops.policy]
    execute_sql = "medium"          # a tier name
    read_data = "low"
    ask_user = ["respond"]          # or an explicit list of decision types
    [agents.sql-ops.tiers]          # optional: override or add tiers
    medium = ["approve", "reject"]
    trusted = false                 # a tier may also run without review

Default tiers: ``high`` = approve / edit / reject, ``medium`` = approve / reject, ``low`` = runs
without review. Decision types are those of LangChain's ``HumanInTheLoopMiddleware``: approve,
edit, reject, respond.

**Default deny.** A tool that an agent with a policy has but the policy does not list is
reviewed at the agent's ``high`` tier: forgetting a tool must never let it run unreviewed. That
is why ``high`` may be overridden but never made review-free. An agent with no policy section at
all has no ``AgentPolicy``: its factory decides alone.

This module is pure (pydantic + stdlib): LangChain types are imported for type checking only;
``interrupt_on`` builds plain dicts, which is what its ``InterruptOnConfig`` is at runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict

from shared.errors import InterlockError

if TYPE_CHECKING:
    from langchain.agents.middleware import InterruptOnConfig

__all__ = [
    "DECISION_TYPES",
    "DEFAULT_TIERS",
    "DENY_TIER",
    "AgentPolicy",
    "DecisionType",
    "Decisions",
    "Description",
    "PolicyError",
    "ToolPolicy",
    "parse_policy",
    "stricter",
]

DecisionType = Literal["approve", "edit", "reject", "respond"]
DECISION_TYPES: Final[tuple[DecisionType, ...]] = get_args(DecisionType)

Decisions = tuple[DecisionType, ...]
"""Allowed decisions, in the canonical order of ``DECISION_TYPES``."""

DEFAULT_TIERS: Final[Mapping[str, Decisions | None]] = {
    "high": ("approve", "edit", "reject"),
    "medium": ("approve", "reject"),
    "low": None,
}
DENY_TIER: Final = "high"
"""The tier of tools the policy does not list (default deny)."""

Description = str | Callable[..., str]
"""What ``InterruptOnConfig.description`` takes: text, or ``(tool_call, state, runtime) -> str``."""


class PolicyError(InterlockError):
    """A review policy that does not parse, or that does not fit the agent's tools."""


class ToolPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    tier: str | None
    """The tier the decisions come from; None when the policy lists decisions explicitly."""
    decisions: Decisions | None
    """Allowed decisions; None: the call runs without review."""


class AgentPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    tools: dict[str, ToolPolicy]
    tiers: dict[str, Decisions | None]
    """Effective tiers: the defaults with this agent's overrides and additions."""

    def decisions_for(self, tool: str) -> list[DecisionType] | None:
        """The decisions a reviewer may give for a call of ``tool``; None: it runs unreviewed.
        A tool the policy does not list gets the ``high`` tier (default deny)."""
        listed = self.tools.get(tool)
        decisions = listed.decisions if listed is not None else self.tiers[DENY_TIER]
        return None if decisions is None else list(decisions)

    def check_tools(self, known_tool_names: Iterable[str]) -> None:
        """Raise if the policy names a tool the agent does not have: a typo there would leave
        the real tool at the default tier and the policy silently unused."""
        known = set(known_tool_names)
        unknown = sorted(set(self.tools) - known)
        if unknown:
            raise PolicyError(
                f"agent {self.agent!r}: the policy names {_names(unknown)}, which the agent does"
                f" not have; its tools are {', '.join(sorted(known)) or '(none)'}"
            )

    def interrupt_on(
        self,
        tool_names: Iterable[str],
        *,
        descriptions: Mapping[str, Description] | None = None,
    ) -> dict[str, bool | InterruptOnConfig]:
        """``interrupt_on`` for ``HumanInTheLoopMiddleware``, over all of the agent's tools.

        The tool names are required because the middleware runs any tool missing from the
        mapping without review: listing every tool here is what makes default deny hold.
        Checks the policy against them first (``check_tools``).
        """
        names = list(tool_names)
        self.check_tools(names)
        described = dict(descriptions or {})
        strays = sorted(set(described) - set(names))
        if strays:
            raise PolicyError(
                f"agent {self.agent!r}: descriptions given for unknown {_names(strays)}"
            )
        result: dict[str, bool | InterruptOnConfig] = {}
        for name in names:
            decisions = self.decisions_for(name)
            if decisions is None:
                result[name] = False
                continue
            config: InterruptOnConfig = {"allowed_decisions": decisions}
            if name in described:
                config["description"] = described[name]
            result[name] = config
        return result

    def allows_rename(self, from_tool: str, to_tool: str) -> bool:
        """May a reviewer's edit of a ``from_tool`` call turn it into a ``to_tool`` call?
        Keeping the tool is not a rename (the edit itself is checked against ``from_tool``'s
        decisions elsewhere); otherwise ``to_tool`` must not be stricter (see ``stricter``)."""
        if from_tool == to_tool:
            return True
        return not stricter(self.decisions_for(from_tool), self.decisions_for(to_tool))

    def check_rename(self, from_tool: str, to_tool: str) -> None:
        """``allows_rename``, raising ``PolicyError`` with the reason when it does not."""
        if self.allows_rename(from_tool, to_tool):
            return
        source, target = self.decisions_for(from_tool), self.decisions_for(to_tool)
        reason = (
            f"{from_tool!r} ({_describe(source)}) does not allow edits"
            if source is None or "edit" not in source
            else f"{to_tool!r} is reviewed ({_describe(target)}) but does not allow edits"
        )
        raise PolicyError(
            f"agent {self.agent!r}: an edit may not turn a {from_tool!r} call into a {to_tool!r}"
            f" call: {reason}"
        )


def stricter(a: Sequence[str] | None, b: Sequence[str] | None) -> bool:
    """Is tool B's policy stricter than tool A's, for a reviewer's edit that renames an A call
    into a B call? (Arguments: allowed decisions; None: the tool runs without review.) If so,
    the gateway refuses the edit.

    The edited call runs at once, reviewed only under A's policy. The rule: the rename is
    allowed exactly when

    - A allows ``edit`` (otherwise there is no edit; refused, whatever B is), and
    - B runs without review, or B allows ``edit`` too.

    That is: the call that results is one a reviewer could have produced under B's own policy
    (by editing a B call into it), or one the model may make unreviewed. A B that is reviewed
    but not editable - approve/reject-only ``execute_sql``, respond-only ``ask_user`` (whose
    code must never run) - is stricter, and so is every B when A is not editable (including A
    running unreviewed: such a call is never paused, so never edited). Decisions other than
    ``edit`` do not matter: the reviewer did not approve, reject or respond to the B call.
    """
    if a is None or "edit" not in a:
        return True
    return b is not None and "edit" not in b


def parse_policy(agent: str, policy: Any, tiers: Any = None) -> AgentPolicy:
    """Build an agent's policy from its TOML tables (``policy``: tool -> tier name or decision
    list; ``tiers``: tier name -> decision list or ``false``). Raises ``PolicyError`` naming the
    agent, the tool (or tier) and what is allowed."""
    effective = dict(DEFAULT_TIERS)
    for tier, value in _table(agent, "tiers", {} if tiers is None else tiers).items():
        effective[tier] = _tier_decisions(agent, tier, value)
    if effective[DENY_TIER] is None:
        raise PolicyError(
            f"agent {agent!r}: tier {DENY_TIER!r} must require review (a list of decisions):"
            " tools the policy does not list fall back to it (default deny)"
        )
    tools = {
        tool: _tool_policy(agent, tool, value, effective)
        for tool, value in _table(agent, "policy", policy).items()
    }
    return AgentPolicy(agent=agent, tools=tools, tiers=effective)


# --- parsing helpers --------------------------------------------------------------------------

_DECISIONS_TEXT: Final = ", ".join(DECISION_TYPES)


def _table(agent: str, section: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise PolicyError(
            f"agent {agent!r}: [{section}] must be a table keyed by name,"
            f" got {type(value).__name__}"
        )
    return dict(value)


def _tool_policy(
    agent: str, tool: str, value: Any, tiers: Mapping[str, Decisions | None]
) -> ToolPolicy:
    where = f"agent {agent!r}: tool {tool!r}"
    if isinstance(value, str):
        if value not in tiers:
            raise PolicyError(
                f"{where}: unknown tier {value!r}; use a tier ({', '.join(sorted(tiers))})"
                f" or a list of decisions ({_DECISIONS_TEXT})"
            )
        return ToolPolicy(tool=tool, tier=value, decisions=tiers[value])
    if isinstance(value, list):
        return ToolPolicy(tool=tool, tier=None, decisions=_decision_list(where, value))
    raise PolicyError(
        f"{where}: must be a tier name ({', '.join(sorted(tiers))}) or a list of decisions"
        f" ({_DECISIONS_TEXT}), got {type(value).__name__} {value!r}"
    )


def _tier_decisions(agent: str, tier: str, value: Any) -> Decisions | None:
    where = f"agent {agent!r}: tier {tier!r}"
    if value is False:
        return None
    if isinstance(value, list):
        return _decision_list(where, value)
    raise PolicyError(
        f"{where}: must be a list of decisions ({_DECISIONS_TEXT}) or false (no review),"
        f" got {type(value).__name__} {value!r}"
    )


def _decision_list(where: str, values: list[Any]) -> Decisions:
    if not values:
        raise PolicyError(
            f"{where}: an empty list of decisions would leave the reviewer no answer; list at"
            f" least one of {_DECISIONS_TEXT} (or use tier 'low' to run without review)"
        )
    for value in values:
        if value not in DECISION_TYPES:
            raise PolicyError(
                f"{where}: unknown decision {value!r}; decisions are {_DECISIONS_TEXT}"
            )
    if len(set(values)) != len(values):
        raise PolicyError(f"{where}: a decision is listed twice in {values!r}")
    # Canonical order, so equal policies compare and display the same however they were written.
    return tuple(d for d in DECISION_TYPES if d in values)


def _names(tools: list[str]) -> str:
    return ("tool " if len(tools) == 1 else "tools ") + ", ".join(repr(t) for t in tools)


def _describe(decisions: list[DecisionType] | None) -> str:
    return "no review" if decisions is None else "/".join(decisions)
