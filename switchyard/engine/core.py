"""The one request path: decode → identify → route → answer with fallback → encode → record.

Layer: ``engine`` — imports ``protocol``, ``wire``, ``routers`` and ``state``; never ``httpx``.
Backends arrive as :class:`~switchyard.protocol.call.ModelBackend` objects built by ``config``.

The proxy (``switchyard.server``), the in-process transport behind the drop-in SDK clients and
the library API all call this module, so their behaviour cannot drift apart.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from switchyard.engine.counting import count_tokens
from switchyard.engine.event_stream import EventStream, aclose_events, first_content
from switchyard.engine.fallback import Fallback
from switchyard.engine.health import Health
from switchyard.engine.markup import first_marker, flag_leak, response_marker
from switchyard.engine.monitor import BackendMonitor
from switchyard.engine.offload import decode_off_loop, release_off_loop
from switchyard.engine.records import DecisionRecord, DecisionSink
from switchyard.engine.replies import (
    HEADER_OVERHEAD,
    HEADER_REQUEST_ID,
    HEADER_ROUTE,
    HEADER_SELECTED,
    HEADER_SOURCE,
    error_reply,
    forwarded,
    lower,
    reply_headers,
)
from switchyard.engine.reply import SHUTDOWN_CANCEL, Reply
from switchyard.engine.reply_model import DEFAULT as REPLY_MODEL_DEFAULT
from switchyard.engine.reply_model import ReplyModel, reply_model
from switchyard.engine.router_call import RouterCall
from switchyard.engine.session import identify
from switchyard.engine.stream_out import encode_stream, stream_aborter
from switchyard.engine.target import Completion, Route, Target
from switchyard.engine.timeouts import Budget, budget
from switchyard.engine.windows import PromptSize
from switchyard.protocol.access import check_route, known_routes
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    InvalidRequestError,
    RouteNotFoundError,
    RouterError,
    SwitchyardError,
    UpstreamError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.session import NamespacedStore, SessionInfo, StateStore
from switchyard.protocol.stream import (
    StreamEvent,
    response_to_events,
)
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps, load_object

__all__ = [
    "HEADER_OVERHEAD",
    "HEADER_REQUEST_ID",
    "HEADER_ROUTE",
    "HEADER_SELECTED",
    "HEADER_SOURCE",
    "KEEPALIVE_S",
    "Completion",
    "Engine",
    "EventStream",
    "Route",
    "Target",
]

logger = logging.getLogger("switchyard.engine")

KEEPALIVE_S = 15.0
"""Longest upstream silence on an open stream before the caller gets a keep-alive."""

LARGE_BODY_BYTES = 256 * 1024
"""A request body this large is decoded on a worker thread, off the event loop."""


@dataclass(slots=True)
class _Prepared:
    route: Route
    request: ChatRequest
    decision: Decision
    record: DecisionRecord
    candidates: list[str]
    options: CallOptions
    t0: float
    headers: Mapping[str, str] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    body_bytes: int | None = None  # the caller's body size, when the request is that body unchanged


class Engine:
    """Routes and serves requests.

    Args:
        routes: Routes by public model id.
        targets: Targets by name.
        store: Session state store shared by all routes (each gets its own namespace).
        sinks: Receivers of decision records.
        default_route: Route used when the requested model names no route.
        hash_session_fallback: Derive a session id from the first user message when the caller
            sent none.
        health: Circuit breakers and reliability counters (shared by the engines of one
            :class:`~switchyard.api.Switchyard`; a new one by default).
    """

    def __init__(
        self,
        routes: Mapping[str, Route],
        targets: Mapping[str, Target],
        *,
        store: StateStore | None = None,
        sinks: Iterable[DecisionSink] = (),
        default_route: str | None = None,
        hash_session_fallback: bool = False,
        health: Health | None = None,
    ) -> None:
        self.health = health or Health()
        self.routes = dict(routes)
        self.targets = dict(targets)
        self.store: StateStore = store or MemoryStore()
        self.sinks: list[DecisionSink] = list(sinks)
        self.default_route = default_route
        self.hash_session_fallback = hash_session_fallback
        self._aliases: dict[str, str] = {}
        # RouteContext.targets per route: fixed after start-up, so built once, not per request.
        self._route_targets: dict[str, Mapping[str, TargetInfo]] = {}
        for route in self.routes.values():
            if route.store is None:
                route.store = NamespacedStore(self.store, f"{route.name}:")
            for alias in route.aliases:
                self._aliases[alias] = route.name
            infos = {t: self.targets[t].info for t in (*route.targets, *route.fallbacks) if t in self.targets}
            self._route_targets[route.name] = MappingProxyType(infos)
        self._warned_no_session: set[str] = set()
        self.keepalive_s: float | None = KEEPALIVE_S
        self.monitor = BackendMonitor(self.targets, self.health)
        self.reply_model: ReplyModel = REPLY_MODEL_DEFAULT
        self.derive_session = True  # see switchyard.engine.session.derived_session_key

    # -- lookup -----------------------------------------------------------------------------

    def route(self, model: str) -> Route:
        """The route a model id selects.

        Raises:
            RouteNotFoundError: No route, alias or default route matches.
        """
        found = self.routes.get(model)
        if found is None and model in self._aliases:
            found = self.routes[self._aliases[model]]
        if found is None and self.default_route is not None:
            found = self.routes[self.default_route]
        if found is None:
            known = known_routes(self.routes)
            raise RouteNotFoundError(f"model {model!r} names no route; available routes: {known}", param="model")
        check_route(found.name)  # the inbound API key's allowlist (switchyard.protocol.access)
        return found

    def target(self, name: str) -> Target:
        """A target by name (``KeyError`` if unknown)."""
        return self.targets[name]

    def stats(self) -> dict[str, Any]:
        """Reliability counters and circuit-breaker states (see :meth:`Health.stats`)."""
        return self.health.stats()

    async def health_report(self, *, deep: bool = False) -> dict[str, Any]:
        """Backend and target health for ``GET /health`` (see :mod:`switchyard.engine.monitor`).

        Args:
            deep: Probe every backend's health endpoint now (bounded by each client's
                ``health_check.timeout_s``, all at once) instead of reporting cached states.
        """
        if deep:
            await self.monitor.probe()
        return self.monitor.report(self.targets)

    # -- routing ----------------------------------------------------------------------------

    async def _prepare(
        self,
        request: ChatRequest,
        headers: Mapping[str, str],
        inbound: WireFormat | None,
        raw: dict[str, Any] | None,
        t0: float,
    ) -> _Prepared:
        if not request.model:
            raise InvalidRequestError("'model' is required: name a route (see GET /v1/models)", param="model")
        route = self.route(request.model)
        limits = budget(headers, time.perf_counter() - t0)
        session = identify(
            headers,
            request,
            hash_fallback=self.hash_session_fallback or route.hash_session_fallback,
            derive=self.derive_session,
        )
        record = DecisionRecord(
            request_id=headers.get(HEADER_REQUEST_ID) or uuid.uuid4().hex[:16],
            route=route.name,
            router=route.kind,
            inbound_format=inbound.value if inbound else None,
            stream=request.stream,
            session_id=session.session_id,
            session_source=session.source,
            agent_id=session.agent_id,
            turn_index=session.turn_index,
        )
        if traceparent := headers.get("traceparent"):  # W3C trace context: spans join the caller's trace
            record.details["traceparent"] = traceparent
        decision = await self._decide(route, request, session, headers, record, limits)
        candidates = route.order(decision.candidates)
        record.candidates = candidates
        options = CallOptions(
            raw_body=raw if decision.request is None else None,
            raw_format=inbound.value if inbound else None,
            headers=forwarded(headers),
        )
        return _Prepared(route, decision.request or request, decision, record, candidates, options, t0, headers, limits)

    async def _decide(
        self,
        route: Route,
        request: ChatRequest,
        session: SessionInfo,
        headers: Mapping[str, str],
        record: DecisionRecord,
        limits: Budget | None = None,
    ) -> Decision:
        if route.stateful and session.key is None and route.name not in self._warned_no_session:
            self._warned_no_session.add(route.name)
            logger.warning(
                "route %r keeps per-session state but requests carry no session id "
                "(send x-switchyard-session-id); each request is routed on its own",
                route.name,
            )
        store: StateStore
        if session.key is None:
            store = MemoryStore(max_entries=64)
        else:
            assert route.store is not None
            store = NamespacedStore(route.store, f"{session.key}:")  # the session's slot of the route
        ctx = RouteContext(
            route=route.name,
            session=session,
            targets=self._route_targets[route.name],
            store=store,
            headers=headers,
            shared=route.store,
        )
        router_call = RouterCall(self.targets, self.health, record, limits)
        try:
            decision = await route.router.route(request, ctx, router_call)
        except SwitchyardError:
            raise
        except Exception as exc:
            logger.exception("router of route %r failed", route.name)
            raise RouterError(f"router of route {route.name!r} failed: {type(exc).__name__}: {exc}") from exc
        unknown = [c for c in decision.candidates if c not in self.targets]
        if unknown:
            raise RouterError(f"router of route {route.name!r} chose unknown target(s) {unknown}")
        if decision.response is not None:
            answer_ms = router_call.unbook(decision.response)
            if answer_ms is not None:
                record.details["answer_elapsed_ms"] = answer_ms
        record.source = decision.source
        record.reason = decision.reason
        record.score = decision.score
        record.confidence = decision.confidence
        if decision.details:
            record.details.update(decision.details)
        return decision

    async def decide(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> DecisionRecord:
        """Routes without making the answer call.

        Judge calls a router needs are made (and booked in ``record.router_cost``). When the
        router produced the answer itself, ``record.details["answered"]`` is ``True``.
        """
        t0 = time.perf_counter()
        prep = await self._prepare(request, lower(headers), None, None, t0)
        record = prep.record
        record.selected = prep.decision.answered_by or (prep.candidates[0] if prep.candidates else None)
        if record.selected in self.targets:
            record.selected_model = self.targets[record.selected].info.model
        if prep.decision.response is not None:
            record.details["answered"] = True
        record.overhead_ms = (time.perf_counter() - t0) * 1000
        return record

    # -- serving ----------------------------------------------------------------------------

    async def complete(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> Completion:
        """Routes and answers ``request`` (non-streaming)."""
        t0 = time.perf_counter()
        prep = await self._prepare(request, lower(headers), None, None, t0)
        return await self._answer(prep)

    async def stream(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> EventStream:
        """Routes and opens a streamed answer."""
        t0 = time.perf_counter()
        prep = await self._prepare(request, lower(headers), None, None, t0)
        return await self._answer_stream(prep)

    def _fallback(self, prep: _Prepared, *, stream: bool = False) -> Fallback:
        return Fallback(
            self.targets,
            self.health,
            budget=prep.budget,
            auth_fallback=prep.route.fallback_on_auth_error,
            attempts=prep.record.attempts,
            skipped=prep.record.skipped,
            prompt=PromptSize(prep.request, prep.body_bytes),
            defer_success=stream,
        )

    async def _complete(self, target: Target, prep: _Prepared, options: CallOptions) -> ChatResponse:
        """One answer call, with the markup check for Chat upstreams that ask for it."""
        response = await target.backend.complete(prep.request, target.info, options)
        if target.reliability.markup_leak != "off":
            marker = response_marker(response)
            if marker is not None:
                self._markup_leak(target, marker, prep.record)
        return response

    def _markup_leak(self, target: Target, marker: str, record: DecisionRecord, *, streamed: bool = False) -> None:
        flag_leak(self.health, target, marker, record, replaceable=not streamed)

    async def _answer(self, prep: _Prepared) -> Completion:
        record = prep.record
        if prep.decision.response is not None:
            return self._answered(prep)
        record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
        if not prep.candidates:
            raise self._exhausted(record, None, prep.t0)
        runner = self._fallback(prep)
        try:
            target, response = await runner.run(prep.candidates, lambda t, o: self._complete(t, prep, o), prep.options)
        except UpstreamError as exc:
            raise self._exhausted(record, exc, prep.t0, runner) from None
        except asyncio.CancelledError as exc:
            self._cancelled(record, prep.t0, runner, exc)
            raise
        record.fallbacks_tried = len(runner.tried) - 1
        self._served(record, target)
        record.set_usage(response.usage)
        record.cost_usd = target.info.price.cost(response.usage)
        record.duration_ms = (time.perf_counter() - prep.t0) * 1000
        self._emit(record)
        return Completion(response, record, target.info.name)

    def _answered(self, prep: _Prepared) -> Completion:
        completion = self._answered_unemitted(prep)
        record, response = completion.record, completion.response
        target = self.targets.get(completion.target)
        if target is not None:
            record.cost_usd = target.info.price.cost(response.usage)
        record.set_usage(response.usage)
        record.duration_ms = (time.perf_counter() - prep.t0) * 1000
        self._emit(record)
        return completion

    async def _answer_stream(self, prep: _Prepared) -> EventStream:
        record = prep.record
        if prep.decision.response is not None:
            return self._answered_stream(prep)
        record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
        if not prep.candidates:
            raise self._exhausted(record, None, prep.t0)

        async def opened(target: Target, options: CallOptions) -> tuple[AsyncIterator[StreamEvent], list[StreamEvent]]:
            events = await target.backend.open_stream(prep.request, target.info, options)
            try:
                # Fallback stays possible until the first event is in hand: nothing has reached
                # the caller yet.
                first = await first_content(events)
                if not first:
                    raise UpstreamError(f"{target.info.name}: upstream stream was empty", target=target.info.name)
                if target.reliability.markup_leak == "fallback":
                    marker = first_marker(first)
                    if marker is not None:
                        self._markup_leak(target, marker, record)
            except BaseException:
                await aclose_events(events)
                raise
            return events, first

        runner = self._fallback(prep, stream=True)
        try:
            target, (events, first) = await runner.run(prep.candidates, opened, prep.options)
        except UpstreamError as exc:
            raise self._exhausted(record, exc, prep.t0, runner) from None
        except asyncio.CancelledError as exc:
            self._cancelled(record, prep.t0, runner, exc)
            raise
        record.fallbacks_tried = len(runner.tried) - 1
        self._served(record, target)

        name = target.info.name
        leak_failed: list[bool] = []

        def failed_mid_stream() -> None:
            self.health.count("mid_stream_failures")
            self.health.failed(name, target.reliability.breaker)

        def leaked(marker: str) -> None:
            self._markup_leak(target, marker, record, streamed=True)
            if target.reliability.markup_leak == "fallback":
                leak_failed.append(True)  # counted as a failure: the clean end is no success

        def ended(complete: bool) -> None:
            if complete and not leak_failed:
                self.health.succeeded(name)
            elif not complete:
                self.health.released(name)  # the caller left: says nothing about the upstream
                if record.status == 499:
                    self.health.count("cancelled")

        return EventStream(
            first,
            events,
            record,
            target,
            self._emit,
            prep.t0,
            on_failure=failed_mid_stream,
            on_markup=leaked if target.reliability.markup_leak != "off" else None,
            on_end=ended,
        )

    def _answered_stream(self, prep: _Prepared) -> EventStream:
        completion = self._answered_unemitted(prep)
        events = response_to_events(completion.response)
        fake_target = self.targets.get(completion.target) or Target(
            TargetInfo(name=completion.target, model=completion.response.model), _NoBackend()
        )
        return EventStream(events, None, prep.record, fake_target, self._emit, prep.t0)

    def _answered_unemitted(self, prep: _Prepared) -> Completion:
        response = prep.decision.response
        assert response is not None
        name = prep.decision.answered_by or (prep.candidates[0] if prep.candidates else "")
        target = self.targets.get(name)
        if target is not None:
            self._served(prep.record, target)
            if target.reliability.markup_leak != "off":
                # The router made this call itself: too late to fall back, but worth flagging.
                marker = response_marker(response)
                if marker is not None:
                    self._markup_leak(target, marker, prep.record, streamed=True)
        # The answer call a router made itself is not routing overhead.
        answer_ms = float(prep.record.details.get("answer_elapsed_ms", 0.0))
        prep.record.overhead_ms = (time.perf_counter() - prep.t0) * 1000 - answer_ms
        return Completion(response, prep.record, name)

    @staticmethod
    def _served(record: DecisionRecord, target: Target) -> None:
        record.selected = target.info.name
        record.selected_model = target.info.model

    def _exhausted(
        self, record: DecisionRecord, error: UpstreamError | None, t0: float, runner: Fallback | None = None
    ) -> SwitchyardError:
        record.fallbacks_tried = max(0, len(runner.tried) - 1) if runner else 0
        failure: SwitchyardError = error or RouterError("route has no candidate targets")
        record.status = failure.status
        record.error = failure.message
        record.duration_ms = (time.perf_counter() - t0) * 1000
        self._emit(record)
        return failure

    def _cancelled(self, record: DecisionRecord, t0: float, runner: Fallback, exc: asyncio.CancelledError) -> None:
        """The request was cancelled (the caller went away, or the server is shutting down:
        ``task.cancel(SHUTDOWN_CANCEL)``): record it, then let it unwind."""
        record.fallbacks_tried = max(0, len(runner.tried) - 1)
        if exc.args and exc.args[0] == SHUTDOWN_CANCEL:
            record.status = 503
            record.error = "ended by the server's shutdown before the answer"
            record.details["interrupted"] = SHUTDOWN_CANCEL
        else:
            self.health.count("cancelled")
            record.status = 499
            record.error = "cancelled: the caller went away before the answer"
        record.duration_ms = (time.perf_counter() - t0) * 1000
        self._emit(record)

    def _emit(self, record: DecisionRecord) -> None:
        for sink in self.sinks:
            try:
                sink(record)
            except Exception:  # a broken sink must not break serving
                logger.exception("decision sink failed")

    # -- wire-level entry point ---------------------------------------------------------------

    async def handle(
        self, fmt: WireFormat | str, body: bytes, headers: Mapping[str, str], *, path: str | None = None
    ) -> Reply:
        """Serves one HTTP request body in wire format ``fmt``.

        Returns a JSON reply or an SSE stream in the caller's format, with the
        ``x-switchyard-*`` headers. Never raises for caller or upstream errors: they become
        error replies in the caller's envelope.
        """
        t0 = time.perf_counter()
        fmt = WireFormat(fmt)
        codec = get_codec(fmt)
        hdrs = lower(headers)
        prep: _Prepared | None = None
        try:
            if len(body) >= LARGE_BODY_BYTES:
                # Decoding 5 MB (100,000 messages) takes seconds of CPU: on a worker thread the
                # event loop keeps serving everyone else meanwhile (docs/benchmarks.md); so is
                # freeing it, once this call has let go of it.
                raw, request = await decode_off_loop(codec, body)
                release_off_loop(raw, request)
            else:
                raw = load_object(body)
                request = codec.decode_request(raw)
            prep = await self._prepare(request, hdrs, fmt, raw, t0)
            prep.record.path = path
            if prep.decision.request is None:
                prep.body_bytes = len(body)
            if request.stream:
                events = await self._answer_stream(prep)
                encoder = codec.stream_encoder(
                    model=self._reply_model(prep, request.model, events.record), include_usage=request.include_usage
                )
                return Reply(
                    200,
                    reply_headers(events.record, stream=True),
                    stream=encode_stream(encoder, events),
                    keepalive=codec.keepalive(),
                    keepalive_s=self.keepalive_s,
                    abort=stream_aborter(encoder, events),
                )
            completion = await self._answer(prep)
        except SwitchyardError as exc:
            return error_reply(self.targets, fmt, exc, prep.record if prep is not None else None)
        payload = codec.encode_response(
            completion.response, model=self._reply_model(prep, request.model, completion.record)
        )
        return Reply(200, reply_headers(completion.record, stream=False), body=dumps(payload))

    def _reply_model(self, prep: _Prepared, requested: str, record: DecisionRecord) -> str:
        """The ``model`` a reply names (see :mod:`switchyard.engine.reply_model`)."""
        return reply_model(prep.route.reply_model or self.reply_model, requested, record.selected_model)

    async def count_tokens(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Serves ``POST /v1/messages/count_tokens`` (see :func:`switchyard.engine.counting.count_tokens`)."""
        return await count_tokens(self.route, self.targets, body, headers)

    async def aclose(self) -> None:
        """Closes every backend, and every router that holds connections (``aclose``)."""
        await self.monitor.aclose()
        closed: set[int] = set()
        for target in self.targets.values():
            if id(target.backend) not in closed:
                closed.add(id(target.backend))
                await target.backend.aclose()
        for route in self.routes.values():
            closer = getattr(route.router, "aclose", None)
            if closer is not None and id(route.router) not in closed:
                closed.add(id(route.router))
                await closer()


class _NoBackend:
    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        raise RouterError("no backend")

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        raise RouterError("no backend")

    async def aclose(self) -> None:
        return None
