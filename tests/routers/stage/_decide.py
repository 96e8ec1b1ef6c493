"""The stage router and one decision of it, as the decode-reuse tests compare them
(``test_decode_reuse.py`` for Chat bodies, ``test_anthropic_decode_reuse.py`` for Anthropic)."""

from __future__ import annotations

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.stage import StageConfig, StageRouter
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall


def stage_router(compat: str | None) -> StageRouter:
    """A two-tier stage router, in NVIDIA's ``compat`` mode when asked."""
    extra = {"compat": compat} if compat else {}
    return StageRouter(StageConfig(capable="frontier", efficient="lightning", **extra))


async def decide(router: StageRouter, request: ChatRequest, turn: int, store: MemoryStore) -> Decision:
    """``router``'s decision on ``request`` as turn ``turn`` of session ``s1``."""
    context = RouteContext(
        route="agent", session=SessionInfo(session_id="s1", turn_index=turn), targets={}, store=store
    )
    return await router.route(request, context, ScriptedCall({}))
