"""Running a route's decision offline: an engine that never makes answer calls.

Layer: ``eval``.

The engine is wired like the proxy's (same routers, same targets, same session store) with one
difference: a client that cannot be used here — its API key variable is unset, or its wire
format is not available in this version — gets a backend that fails every call with the reason.
Routers that need no model call (most) never notice; a router that calls a judge on such a client
fails on that item, and the item is reported as skipped with the reason, instead of the whole
run refusing to start.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, TypeVar

from switchyard._dataclass import dataclass
from switchyard.config.build import build_routes, build_store, format_problem, http_backend, target_infos
from switchyard.config.load import LoadedConfig
from switchyard.engine.core import Engine, Target
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.call import CallOptions, ModelBackend
from switchyard.protocol.errors import SwitchyardError, UpstreamError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import RouterSpec
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat

T = TypeVar("T")
R = TypeVar("R")

SESSION_HEADER = "x-switchyard-session-id"


class UnavailableBackend:
    """A backend that refuses every call, saying why (used for clients unusable offline)."""

    def __init__(self, client: str, reason: str) -> None:
        self.client = client
        self.reason = reason

    def _error(self, target: TargetInfo) -> UpstreamError:
        return UpstreamError(
            f"client {self.client!r} (target {target.name!r}) is not usable here: {self.reason}", target=target.name
        )

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        raise self._error(target)

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        raise self._error(target)

    async def aclose(self) -> None:
        return None


@dataclass(slots=True)
class OfflineEngine:
    """An engine for decide-only runs, plus what was unusable.

    Attributes:
        engine: The engine (``engine.decide`` only; never ``complete``).
        unavailable: Client name → why its model calls fail here.
    """

    engine: Engine
    unavailable: dict[str, str] = field(default_factory=dict)

    async def aclose(self) -> None:
        """Closes the backends that were really built."""
        await self.engine.aclose()


def build_offline_engine(loaded: LoadedConfig, *, env: Mapping[str, str] | None = None) -> OfflineEngine:
    """An engine for ``loaded`` that starts even when some clients cannot be used.

    Args:
        loaded: A validated config.
        env: Environment for API keys (default ``os.environ``).
    """
    env = os.environ if env is None else env
    cfg = loaded.config
    backends: dict[str, ModelBackend] = {}
    unavailable: dict[str, str] = {}
    for name, client in cfg.llm_clients.items():
        key: str | None = None
        if (problem := format_problem(client)) is not None:
            unavailable[name] = problem
        elif client.api_key_env and not env.get(client.api_key_env):
            unavailable[name] = f"environment variable {client.api_key_env} is not set"
        else:
            key = env.get(client.api_key_env) if client.api_key_env else None
        if name in unavailable:
            backends[name] = UnavailableBackend(name, unavailable[name])
        else:
            backends[name] = http_backend(name, client, key)
    infos = target_infos(loaded)
    targets = {name: Target(info, backends[info.client]) for name, info in infos.items()}
    engine = Engine(
        build_routes(loaded, infos),
        targets,
        store=build_store(loaded),
        default_route=cfg.default_route,
        hash_session_fallback=cfg.session.hash_first_message,
    )
    return OfflineEngine(engine, unavailable)


def route_spec(loaded: LoadedConfig, route: str) -> RouterSpec:
    """The spec of route ``route``.

    Raises:
        KeyError: No such route (the message lists the routes).
    """
    return loaded.route_spec(route)


def chat_request(route: str, messages: list[dict[str, Any]], **extra: Any) -> ChatRequest:
    """An IR request for ``route`` from OpenAI Chat messages.

    Raises:
        SwitchyardError: The messages do not decode (the message says which field).
    """
    body: dict[str, Any] = {"model": route, "messages": messages}
    body.update({k: v for k, v in extra.items() if v is not None})
    return get_codec(WireFormat.OPENAI_CHAT).decode_request(body)


@dataclass(slots=True)
class Decided:
    """The route's decision for one request, or why there is none.

    Attributes:
        selected: The chosen target (``None`` when skipped).
        score: ``Decision.score`` (probability the capable model is needed), when given.
        confidence: ``Decision.confidence``, when given.
        source: ``Decision.source``.
        reason: ``Decision.reason``.
        candidates: Full candidate order (choice first).
        router_cost_usd: Cost of the model calls the router made while deciding.
        router_calls: Number of those calls.
        router_input_tokens: Prompt tokens of those calls.
        router_output_tokens: Generated tokens of those calls.
        answered: Whether the router produced the answer itself (``selected`` answered it).
        skipped: Why no decision was made (an error message), else ``None``.
        p_success: The router's estimated probability of success per target (the record's
            ``details.p_success``: learned and decision-model routers), when given.
    """

    selected: str | None
    score: float | None = None
    confidence: float | None = None
    source: str = ""
    reason: str = ""
    candidates: list[str] = field(default_factory=list)
    router_cost_usd: float = 0.0
    router_calls: int = 0
    router_input_tokens: int = 0
    router_output_tokens: int = 0
    answered: bool = False
    skipped: str | None = None
    p_success: dict[str, float] | None = None

    @classmethod
    def from_record(cls, record: DecisionRecord) -> Decided:
        """From an engine decision record."""
        skipped = None if record.selected else "the router chose no target"
        rc = record.router_cost
        if rc.calls and rc.failures >= rc.calls:
            # The router fell back without the model it consults (judge unreachable): its choice
            # says nothing about the policy being evaluated.
            skipped = f"every model call of the router failed ({record.source}: {record.reason})"
        return cls(
            selected=record.selected,
            score=record.score,
            confidence=record.confidence,
            source=record.source,
            reason=record.reason,
            candidates=list(record.candidates),
            router_cost_usd=record.router_cost.cost_usd,
            router_calls=record.router_cost.calls,
            router_input_tokens=rc.input_tokens,
            router_output_tokens=rc.output_tokens,
            answered=bool(record.details.get("answered")),
            skipped=skipped,
            p_success=_probabilities(record.details.get("p_success")),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "selected": self.selected,
            "score": self.score,
            "confidence": self.confidence,
            "source": self.source,
            "reason": self.reason,
            "candidates": self.candidates,
            "router_cost_usd": self.router_cost_usd,
            "router_calls": self.router_calls,
            "router_input_tokens": self.router_input_tokens,
            "router_output_tokens": self.router_output_tokens,
            "answered": self.answered,
            "skipped": self.skipped,
            "p_success": self.p_success,
        }


def _probabilities(value: Any) -> dict[str, float] | None:
    """``details.p_success`` when it is ``{target: probability in [0, 1]}``, else ``None``."""
    if not isinstance(value, dict) or not value:
        return None
    out: dict[str, float] = {}
    for key, p in value.items():
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= float(p) <= 1.0:
            return None
        out[str(key)] = float(p)
    return out


async def decide(engine: Engine, request: ChatRequest, session_id: str | None) -> Decided:
    """Runs the route's decision; a failure becomes a skipped result, never an exception."""
    headers = {SESSION_HEADER: session_id} if session_id else {}
    try:
        record = await engine.decide(request, headers)
    except SwitchyardError as exc:
        return Decided(selected=None, skipped=f"{type(exc).__name__}: {exc.message}")
    return Decided.from_record(record)


async def run_pool(
    items: Iterable[T],
    work: Callable[[T], Awaitable[R]],
    *,
    concurrency: int = 1,
    on_done: Callable[[T, R], None] | None = None,
) -> list[R]:
    """Runs ``work`` over ``items`` with at most ``concurrency`` in flight; results in input order.

    Items are drawn from the iterable only as workers free up, so a streamed dataset is never
    held in memory whole. With ``concurrency=1`` the order of work is the input order (routers
    with a seeded random draw stay reproducible).
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    iterator = iter(items)
    results: dict[int, R] = {}
    counter = 0

    async def worker() -> None:
        nonlocal counter
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return
            index = counter
            counter += 1
            result = await work(item)
            results[index] = result
            if on_done is not None:
                on_done(item, result)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [results[i] for i in range(counter)]
