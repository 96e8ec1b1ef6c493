"""The engine's shared types: a target with its backend and reliability settings, a route, an answer.

Layer: ``engine``. Its own module so that the fallback runner, the markup check and the backend
monitor can name :class:`Target` without importing the engine (no import cycle).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from switchyard._dataclass import dataclass
from switchyard.clients.retry import RetryPolicy
from switchyard.engine.experiment import Experiment
from switchyard.engine.health import BreakerPolicy, HealthCheckPolicy
from switchyard.engine.records import DecisionRecord
from switchyard.engine.reply_model import ReplyModel
from switchyard.protocol.access import may_use, no_such_model
from switchyard.protocol.call import CallOptions, ModelBackend
from switchyard.protocol.errors import RouteNotFoundError, RouterError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.session import StateStore
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Router
from switchyard.routers.restrict import RestrictPolicy

if TYPE_CHECKING:  # engine.verify names Target: imported for the annotation only
    from switchyard.engine.verify import Verifier


@dataclass(slots=True)
class Reliability:
    """Per-target reliability settings, from the target's ``llm_clients`` entry.

    Attributes:
        retry: Retries of the target.
        breaker: Its circuit breaker.
        discover_context_window: Ask the upstream's ``GET /models`` for ``max_model_len`` when
            the target has no ``context_window`` and a context-overflow fallback needs it.
        health_check: How the upstream's health endpoint is probed.
        markup_leak: What an answer with reasoning/tool-call markup in its text does: ``off``
            (not checked), ``flag`` (passed on; the target is flagged and counted) or
            ``fallback`` (also a failure: the next candidate is tried while nothing has reached
            the caller, and it counts towards the circuit breaker).
    """

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    discover_context_window: bool = True
    health_check: HealthCheckPolicy = field(default_factory=HealthCheckPolicy)
    markup_leak: str = "off"


@dataclass(slots=True)
class Target:
    """A target, the backend that reaches it, and its retry/breaker settings."""

    info: TargetInfo
    backend: ModelBackend
    reliability: Reliability = field(default_factory=Reliability)


@dataclass(slots=True)
class Route:
    """A configured route: its router and its candidate order.

    Attributes:
        name: Public model id of the route.
        kind: Router type (``random``, ``stage_router`` …).
        router: The routing policy.
        targets: The route's own targets, in config order.
        fallbacks: Extra targets tried after ``targets``.
        aliases: Other model ids that select this route.
        description: Shown by ``/v1/models``.
        context_window: Advertised context window.
        stateful: Whether the router keeps per-session state.
        hash_session_fallback: Key requests without a session id by a hash of their first user
            message (the route's ``message_hash_fallback``).
        fallback_on_auth_error: Fall back on 401/403 instead of returning the error.
        restrict: The route's ``restrict:`` rules (``None``: none).
        auxiliary: Targets the router calls but never routes to (judges, advisors), for the
            record of what a restriction removed.
        verify: The route's verification gate (``verify:``; ``None``: none).
        experiment: The route's shadow mode or control group (``experiment:``; ``None``: none).
    """

    name: str
    kind: str
    router: Router
    targets: tuple[str, ...]
    fallbacks: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    description: str | None = None
    context_window: int | None = None
    stateful: bool = False
    store: StateStore | None = None
    hash_session_fallback: bool = False
    fallback_on_auth_error: bool = False
    reply_model: ReplyModel | None = None  # None: the engine's setting
    restrict: RestrictPolicy | None = None
    auxiliary: tuple[str, ...] = ()
    verify: Verifier | None = None
    experiment: Experiment | None = None

    def order(self, first: Sequence[str]) -> list[str]:
        """The router's candidates, then the route's other targets, then its fallbacks."""
        seen: dict[str, None] = {}
        for name in (*first, *self.targets, *self.fallbacks):
            seen.setdefault(name, None)
        return list(seen)


@dataclass(slots=True)
class Completion:
    """A complete answer plus the record of how it was routed."""

    response: ChatResponse
    record: DecisionRecord
    target: str


class NoBackend:
    """The backend of a stand-in target (a router's own answer replayed as a stream): never called."""

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        """Always fails: a stand-in target makes no calls."""
        raise RouterError("no backend")

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        """Always fails: a stand-in target makes no calls."""
        raise RouterError("no backend")

    async def aclose(self) -> None:
        """Nothing to close."""
        return None


async def close_all(targets: Iterable[Target], routes: Iterable[Route]) -> None:
    """Closes every target's backend and every router that holds connections (``aclose``), once each."""
    closed: set[int] = set()
    for target in targets:
        if id(target.backend) not in closed:
            closed.add(id(target.backend))
            await target.backend.aclose()
    for route in routes:
        closer = getattr(route.router, "aclose", None)
        if closer is not None and id(route.router) not in closed:
            closed.add(id(route.router))
            await closer()


def find_route(routes: dict[str, Route], aliases: dict[str, str], default_route: str | None, model: str) -> Route:
    """The route a model id selects: its own name, an alias, else ``default_route``.

    Raises:
        RouteNotFoundError: Nothing matches, or the inbound API key may not use the match
            (switchyard.protocol.access): such a route is answered exactly as a missing one, so
            its name never leaks.
    """
    found = routes.get(model)
    if found is None and model in aliases:
        found = routes[aliases[model]]
    if found is None and default_route is not None:
        found = routes[default_route]
    if found is None or not may_use(found.name):
        raise RouteNotFoundError(no_such_model(model, routes), param="model")
    return found
