"""The plan/execute router: the capable target plans, the efficient target executes.

Layer: ``routers`` — imports ``protocol`` only (and the pure phase rules).
"""

from __future__ import annotations

import logging

from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.plan_execute.phase import Rules, classify

logger = logging.getLogger("switchyard.routers")

STATE_KEY = "plan_execute"
"""Session-state slot: ``{"planned_at": <messages in the last planning turn's request>}``."""


_WORDS = {"plan": "planning", "replan": "re-planning"}


class PlanExecuteRouter:
    """Sends planning turns to ``capable`` and execution turns to ``efficient``.

    Decision sources: ``plan`` (a planning turn), ``execute`` (a tool-execution turn) and
    ``replan`` (a re-plan after sustained trouble or a context compaction). The plan the capable
    model writes stays in the conversation the agent sends back, so the efficient model executes
    it with the plan in view; nothing is rewritten.

    Args:
        capable: The planning target.
        efficient: The executing target.
        rules: What marks planning (see :mod:`switchyard.routers.plan_execute.phase`).
    """

    def __init__(self, capable: str, efficient: str, rules: Rules) -> None:
        self.capable = capable
        self.efficient = efficient
        self.rules = rules

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        state = await ctx.store.get(STATE_KEY)
        planned_at = state.get("planned_at") if isinstance(state, dict) else None
        # A stored count larger than the conversation belongs to another one (a new session
        # under a reused id, or a rewritten history): start over.
        if not isinstance(planned_at, int) or isinstance(planned_at, bool) or planned_at > len(request.messages):
            planned_at = 0
        phase = classify(request, self.rules, planned_at)
        details = {"plan_execute": {"phase": phase.kind, "why": phase.why, "planned_at": planned_at}}
        if phase.detail:
            details["plan_execute"]["detail"] = phase.detail
        if phase.kind == "execute":
            return Decision(
                candidates=(self.efficient, self.capable),
                source="execute",
                score=0.0,
                reason=f"execution turn ({phase.why}); {self.efficient!r} executes",
                details=details,
            )
        await ctx.store.set(STATE_KEY, {"planned_at": len(request.messages)})
        return Decision(
            candidates=(self.capable, self.efficient),
            source=phase.kind,
            score=1.0,
            reason=f"{_WORDS[phase.kind]} turn ({phase.why}); {self.capable!r} plans",
            details=details,
        )
