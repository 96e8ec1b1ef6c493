"""Sub-agent-aware routing: a route's ``subagents:`` policy serves delegated work.

Layer: ``routers`` — imports ``protocol`` only.

Whether a call is a sub-agent's delegated work is read from the caller's headers by the engine
(:func:`switchyard.engine.session.identify`, table in docs/subagents.md) and arrives as
``ctx.session.delegated``. Delegated calls go to the sub-agent policy — any router spec, a
cascade included — and everything else (the main agent, harness housekeeping such as Codex's
``compact``) to the route's own router. The sub-agent's session state is its own: the engine
keys it by session *and* agent (``SessionInfo.key``), so two sub-agents of one session, and the
parent, never share a slot.

The decision source is prefixed ``subagents/`` (e.g. ``subagents/passthrough``,
``subagents/cascade:1/stage_router``) so sub-agent traffic is visible in records and headers.
"""

from __future__ import annotations

import dataclasses

from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec

SOURCE_PREFIX = "subagents/"


class SubagentRouter:
    """The parent router for the main agent, the sub-agent policy for delegated calls.

    Args:
        parent: The route's own router.
        child: The ``subagents`` policy.
        child_kind: The policy's router type (recorded).
    """

    def __init__(self, parent: Router, child: Router, child_kind: str) -> None:
        self.parent = parent
        self.child = child
        self.child_kind = child_kind

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        session = ctx.session
        if not session.delegated:
            return await self.parent.route(request, ctx, call)
        decision = await self.child.route(request, ctx, call)
        details = dict(decision.details)
        details["subagent"] = {
            "agent_id": session.agent_id,
            "parent_agent_id": session.parent_agent_id,
            "kind": session.agent_kind,
            "detected_by": session.delegation,
            "policy": self.child_kind,
        }
        return dataclasses.replace(decision, source=SOURCE_PREFIX + decision.source, details=details)

    async def aclose(self) -> None:
        """Closes both routers when they hold connections."""
        for router in (self.parent, self.child):
            closer = getattr(router, "aclose", None)
            if closer is not None:
                await closer()


def build_router(spec: RouterSpec, ctx: BuildContext) -> Router:
    """Builds ``spec``'s router, wrapped for its ``subagents`` policy when it has one."""
    router = spec.build(ctx)
    sub = spec.subagent_spec()
    if sub is None:
        return router
    return SubagentRouter(router, sub.build(ctx), sub.type)
