"""``type: plan_execute`` — the route block.

Layer: ``routers`` — imports ``protocol`` only.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from switchyard.routers.base import BuildContext, Router, RouterSpec, Tiers
from switchyard.routers.patterns import checked_pattern
from switchyard.routers.plan_execute.phase import DEFAULT_PLAN_PATTERNS, DEFAULT_PLAN_TOOLS, Rules
from switchyard.routers.plan_execute.router import PlanExecuteRouter


class ReplanSpec(BaseModel):
    """``replan`` — when sustained trouble sends a turn back to the planner.

    Attributes:
        after_failures: Consecutive failed tool results (since the last planning turn) that
            call for a re-plan; 0 turns re-planning on trouble off.
        severity: How bad a failure must be to count: 0.3 (soft: a non-zero exit, a failing
            test), 0.7 (hard: a traceback, a missing module, a timeout) or 1.0 (critical: out
            of memory, connection refused), as the stage router grades them.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    after_failures: int = Field(default=3, ge=0, le=100)
    severity: float = Field(default=0.7, gt=0.0, le=1.0)


class PlanExecuteSpec(RouterSpec):
    """``type: plan_execute`` — planning turns to ``capable``, execution turns to ``efficient``.

    Example:
        ``agent: {type: plan_execute, capable: capable, efficient: efficient}``

    Attributes:
        capable: The target that plans (and re-plans).
        efficient: The target that executes the plan's tool steps.
        plan_tools: The agent's planning tools (case-insensitive): a ``tool_choice`` that forces
            one is a planning turn, and so is the turn after one changed the plan's items.
        plan_mode_tools: Tools whose presence in the request's tool set marks the agent's plan
            mode (none by default).
        plan_patterns: Regular expressions that mark plan mode in the system prompt or the
            newest user message (default: Claude Code's "Plan mode is active" reminder).
        new_request: Whether the first turn of a new user request plans: ``always``
            (default), ``with_tools`` (only requests that carry tools, so an agent's tool-less
            side calls on the same route — titles, summaries — execute) or ``never``.
        replan: When trouble sends a turn back to the planner.
    """

    kind: ClassVar[str] = "plan_execute"
    stateful: ClassVar[bool] = True
    type: Literal["plan_execute"]
    capable: str
    efficient: str
    plan_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_PLAN_TOOLS))
    plan_mode_tools: list[str] = Field(default_factory=list)
    plan_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_PLAN_PATTERNS))
    new_request: Literal["always", "with_tools", "never"] = "always"
    replan: ReplanSpec = Field(default_factory=ReplanSpec)

    @field_validator("plan_patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for i, pattern in enumerate(value):
            checked_pattern(pattern, f"plan_patterns[{i}]")
        return value

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def tiers(self) -> Tiers:
        return Tiers(capable=self.capable, efficient=self.efficient)

    def rules(self) -> Rules:
        """The phase rules this block describes."""
        return Rules(
            plan_tools=frozenset(t.lower() for t in self.plan_tools),
            plan_mode_tools=frozenset(t.lower() for t in self.plan_mode_tools),
            plan_patterns=tuple(re.compile(p) for p in self.plan_patterns),
            new_request=self.new_request,
            replan_after=self.replan.after_failures,
            trouble_severity=self.replan.severity,
        )

    def build(self, ctx: BuildContext) -> Router:
        return PlanExecuteRouter(self.capable, self.efficient, self.rules())
