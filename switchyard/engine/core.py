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
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from switchyard.clients.retry import classify
from switchyard.engine.fallback import Fallback, Reliability
from switchyard.engine.health import Health
from switchyard.engine.markup import MarkupScanner, first_marker, flag_leak, response_marker
from switchyard.engine.monitor import BackendMonitor
from switchyard.engine.records import Attempt, DecisionRecord, DecisionSink
from switchyard.engine.reply import SHUTDOWN_CANCEL, Reply
from switchyard.engine.reply_model import DEFAULT as REPLY_MODEL_DEFAULT
from switchyard.engine.reply_model import ReplyModel, reply_model
from switchyard.engine.session import identify
from switchyard.engine.stream_out import encode_stream, stream_aborter
from switchyard.engine.timeouts import Budget, budget
from switchyard.engine.windows import PromptSize
from switchyard.protocol.access import check_route
from switchyard.protocol.call import CallOptions, ModelBackend
from switchyard.protocol.errors import (
    ErrorInfo,
    InvalidRequestError,
    RouteNotFoundError,
    RouterError,
    SwitchyardError,
    UpstreamError,
    UpstreamStatusError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.session import SessionInfo, StateStore, Updater
from switchyard.protocol.stream import (
    MessageStart,
    StreamAccumulator,
    StreamError,
    StreamEvent,
    TextDelta,
    UsageDelta,
    merge_usage,
    response_to_events,
)
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext, Router
from switchyard.state.memory import MemoryStore, NamespacedStore
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps, load_object

logger = logging.getLogger("switchyard.engine")

HEADER_SELECTED = "x-switchyard-selected-model"
HEADER_ROUTE = "x-switchyard-route"
HEADER_SOURCE = "x-switchyard-decision-source"
HEADER_OVERHEAD = "x-switchyard-overhead-ms"
HEADER_REQUEST_ID = "x-switchyard-request-id"

# Caller headers worth forwarding upstream (everything else stays at the proxy).
_FORWARD_HEADERS = ("anthropic-beta", "anthropic-version")

KEEPALIVE_S = 15.0
"""Longest upstream silence on an open stream before the caller gets a keep-alive."""


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


class EventStream:
    """The answer as IR stream events, opened on the first candidate that accepted it.

    Iterate it for events; ``record`` is complete once the stream is exhausted or closed.
    An upstream failure after the first event ends the stream with a :class:`StreamError` —
    never a clean finish — marks the record (``details["mid_stream_failure"]``) and calls
    ``on_failure`` (the engine counts it and tells the target's circuit breaker); ``on_end`` is
    called once with ``True`` when the stream ended cleanly, ``False`` when the consumer stopped
    reading first (the breaker hears of a stream's success only at its end). With
    ``on_markup``, text deltas are checked for leaked reasoning/tool-call markup as they pass
    (:mod:`switchyard.engine.markup`) and the first find is reported.
    """

    def __init__(
        self,
        first: list[StreamEvent],
        rest: AsyncIterator[StreamEvent] | None,
        record: DecisionRecord,
        target: Target,
        finalize: Callable[[DecisionRecord], None],
        t0: float,
        on_failure: Callable[[], None] | None = None,
        on_markup: Callable[[str], None] | None = None,
        on_end: Callable[[bool], None] | None = None,
    ) -> None:
        self.record = record
        self.target = target.info.name
        self._price = target.info.price
        self._first = first
        self._rest = rest
        self._finalize = finalize
        self._t0 = t0
        self._on_failure = on_failure
        self._on_markup = on_markup
        self._on_end = on_end
        self._scanner = MarkupScanner() if on_markup is not None else None
        self._failed = False
        self._complete = False
        self._usage = Usage()
        self._closed = False
        self._interrupted = False
        self._gen = self._run()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._gen.__anext__()

    async def _run(self) -> AsyncGenerator[StreamEvent, None]:
        try:
            for event in self._first:
                self._observe(event)
                yield event
            if self._rest is not None:
                try:
                    async for event in self._rest:
                        self._observe(event)
                        yield event
                except UpstreamError as exc:
                    info = exc.info()
                    self.record.details["mid_stream_error_class"] = classify(exc).value
                    self._fail(info)
                    yield StreamError(error=info)
                except Exception as exc:  # a bug must not look like a clean finish either
                    logger.exception("stream of target %r failed", self.target)
                    info = ErrorInfo(status=500, type="api_error", message=f"stream failed: {type(exc).__name__}")
                    self._fail(info)
                    yield StreamError(error=info)
            self._complete = True
        finally:
            await self._close_rest()
            self._done()

    def _observe(self, event: StreamEvent) -> None:
        if isinstance(event, UsageDelta):
            self._usage = merge_usage(self._usage, event.usage)
        elif isinstance(event, StreamError):
            self._fail(event.error)
        elif self._scanner is not None and type(event) is TextDelta:
            marker = self._scanner.feed(event.text)
            if marker is not None:
                self._scanner = None  # one report per stream
                assert self._on_markup is not None
                self._on_markup(marker)

    def _fail(self, error: ErrorInfo) -> None:
        self.record.error = error.message
        self.record.status = error.status
        self.record.details["mid_stream_failure"] = True
        if not self._failed:
            self._failed = True
            if self._on_failure is not None:
                self._on_failure()

    async def _close_rest(self) -> None:
        rest, self._rest = self._rest, None
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()

    def _done(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._complete and not self._failed and not self._interrupted:
            # The consumer stopped reading (a caller that disconnected, or aclose()): recorded
            # as a cancelled request, like a caller leaving before the answer (499).
            self.record.details["closed_early"] = True
            self.record.status = 499
            self.record.error = "cancelled: the caller stopped reading the stream"
        if self._on_end is not None and not self._failed:
            self._on_end(self._complete)
        self.record.set_usage(self._usage)
        self.record.cost_usd = self._price.cost(self._usage)
        self.record.duration_ms = (time.perf_counter() - self._t0) * 1000
        self._finalize(self.record)

    def interrupt(self, error: ErrorInfo) -> None:
        """Marks the record for a stream the server ends itself (a shutdown past its drain
        time): not the upstream's failure, not the caller's cancellation. Call before closing."""
        self._interrupted = True
        self.record.status = error.status
        self.record.error = error.message
        self.record.details["interrupted"] = error.code or error.type

    async def aclose(self) -> None:
        """Stops the stream early (closes the upstream connection) and writes the record."""
        await self._gen.aclose()
        await self._close_rest()
        self._done()

    async def collect(self) -> ChatResponse:
        """Drains the stream into a complete response."""
        acc = StreamAccumulator()
        async for event in self:
            acc.add(event)
        return acc.response()


class _RouterCall:
    """The :class:`~switchyard.protocol.call.ModelCall` a router gets: the engine's fallback and
    retries (:mod:`switchyard.engine.fallback`), the request's deadline, and cost booking.

    Every call is booked in ``record.router_cost`` (calls, tokens, USD, elapsed), including
    calls a router's own deadline cancelled. When a router returns one of these answers as the
    request's answer (escalation serving its buffered efficient turn), :meth:`unbook` moves it
    out of the overhead so it is not counted twice.
    """

    def __init__(self, engine: Engine, record: DecisionRecord, budget: Budget | None = None) -> None:
        self._engine = engine
        self._record = record
        self._budget = budget
        self._booked: dict[int, tuple[ChatResponse, float, float]] = {}

    def unbook(self, response: ChatResponse) -> float | None:
        """Removes ``response``'s call from the router cost; returns its elapsed ms if it was one."""
        booked = self._booked.pop(id(response), None)
        if booked is None:
            return None
        _, usd, elapsed = booked
        cost = self._record.router_cost
        cost.calls -= 1
        cost.input_tokens -= response.usage.input_tokens
        cost.output_tokens -= response.usage.output_tokens
        cost.cost_usd -= usd
        cost.elapsed_ms -= elapsed
        return elapsed

    async def __call__(self, targets: str | Sequence[str], request: ChatRequest) -> ChatResponse:
        names = [targets] if isinstance(targets, str) else list(targets)
        if not names:
            raise RouterError("router asked for a model call with no targets")
        unknown = [n for n in names if n not in self._engine.targets]
        if unknown:
            raise RouterError(f"router asked for a model call on unknown target(s) {unknown}")
        cost = self._record.router_cost
        attempts: list[Attempt] = []
        runner = Fallback(
            self._engine.targets,
            self._engine.health,
            budget=self._budget,
            attempts=attempts,
            prompt=PromptSize(request),
        )
        started = time.perf_counter()
        try:
            target, response = await runner.run(
                names, lambda t, o: t.backend.complete(request, t.info, o), CallOptions()
            )
        finally:
            # Booked even when a router deadline (e.g. judge_timeout_s) cancelled the call; a call
            # refused outright (every breaker open, deadline spent) counts as one failed call.
            cost.calls += len(attempts) or 1
            cost.failures += sum(not a.ok for a in attempts) if attempts else 1
            cost.elapsed_ms += (time.perf_counter() - started) * 1000
            self._record.router_attempts.extend(attempts)  # per-call detail for traces
        elapsed = attempts[-1].elapsed_ms if attempts else (time.perf_counter() - started) * 1000
        usd = target.info.price.cost(response.usage)
        cost.input_tokens += response.usage.input_tokens
        cost.output_tokens += response.usage.output_tokens
        cost.cost_usd += usd
        self._booked[id(response)] = (response, usd, elapsed)
        return response


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
        for route in self.routes.values():
            if route.store is None:
                route.store = NamespacedStore(self.store, f"{route.name}:")
            for alias in route.aliases:
                self._aliases[alias] = route.name
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
            known = ", ".join(sorted(self.routes)) or "(none)"
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
        forwarded = {k: v for k in _FORWARD_HEADERS if (v := headers.get(k))}
        options = CallOptions(
            raw_body=raw if decision.request is None else None,
            raw_format=inbound.value if inbound else None,
            headers=forwarded,
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
            store = _KeyedStore(route.store, session.key)
        ctx = RouteContext(
            route=route.name,
            session=session,
            targets={t: self.targets[t].info for t in (*route.targets, *route.fallbacks) if t in self.targets},
            store=store,
            headers=headers,
        )
        router_call = _RouterCall(self, record, limits)
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
        prep = await self._prepare(request, _lower(headers), None, None, t0)
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
        prep = await self._prepare(request, _lower(headers), None, None, t0)
        return await self._answer(prep)

    async def stream(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> EventStream:
        """Routes and opens a streamed answer."""
        t0 = time.perf_counter()
        prep = await self._prepare(request, _lower(headers), None, None, t0)
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
                first = await _first_content(events)
                if not first:
                    raise UpstreamError(f"{target.info.name}: upstream stream was empty", target=target.info.name)
                if target.reliability.markup_leak == "fallback":
                    marker = first_marker(first)
                    if marker is not None:
                        self._markup_leak(target, marker, record)
            except BaseException:
                await _aclose(events)
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

    def _cancelled(
        self, record: DecisionRecord, t0: float, runner: Fallback, exc: asyncio.CancelledError | None = None
    ) -> None:
        """The request was cancelled (the caller went away, or the server is shutting down:
        ``task.cancel(SHUTDOWN_CANCEL)``): record it, then let it unwind."""
        record.fallbacks_tried = max(0, len(runner.tried) - 1)
        if exc is not None and exc.args and exc.args[0] == SHUTDOWN_CANCEL:
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
        hdrs = _lower(headers)
        prep: _Prepared | None = None
        try:
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
                    self._headers(events.record, stream=True),
                    stream=encode_stream(encoder, events),
                    keepalive=codec.keepalive(),
                    keepalive_s=self.keepalive_s,
                    abort=stream_aborter(encoder, events),
                )
            completion = await self._answer(prep)
        except SwitchyardError as exc:
            return self._error_reply(fmt, exc, prep)
        payload = codec.encode_response(
            completion.response, model=self._reply_model(prep, request.model, completion.record)
        )
        return Reply(200, self._headers(completion.record, stream=False), body=dumps(payload))

    def _reply_model(self, prep: _Prepared, requested: str, record: DecisionRecord) -> str:
        """The ``model`` a reply names (see :mod:`switchyard.engine.reply_model`)."""
        return reply_model(prep.route.reply_model or self.reply_model, requested, record.selected_model)

    async def count_tokens(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Serves ``POST /v1/messages/count_tokens`` (Anthropic shape, any route).

        The route is not run (a count must not move session state or pay for judges). The
        route's first Anthropic target counts with Anthropic's own endpoint; otherwise the
        first target's upstream is asked (OpenAI Responses ``input_tokens``, vLLM ``/tokenize``)
        and, when it cannot answer, the documented estimate of
        :func:`switchyard.wire.tokens.estimate_input_tokens` is returned. The header
        ``x-switchyard-token-count`` says which (``upstream`` or ``estimate``).
        """
        fmt = WireFormat.ANTHROPIC_MESSAGES
        codec = get_codec(fmt)
        hdrs = _lower(headers)
        try:
            raw = load_object(body)
            request = codec.decode_request(raw)
            if not request.model:
                raise InvalidRequestError("'model' is required: name a route (see GET /v1/models)", param="model")
            route = self.route(request.model)
            names = [n for n in route.order(()) if n in self.targets]
            if not names:
                raise RouterError(f"route {route.name!r} has no targets")
            name = next((n for n in names if self.targets[n].info.format == fmt.value), names[0])
            target = self.targets[name]
            count, source = await self._count(target, request, raw, hdrs)
        except SwitchyardError as exc:
            return self._error_reply(fmt, exc, None)
        reply_headers = {
            "content-type": "application/json",
            HEADER_ROUTE: route.name,
            HEADER_SELECTED: name,
            "x-switchyard-token-count": source,
        }
        return Reply(200, reply_headers, body=dumps({"input_tokens": count}))

    async def _count(
        self, target: Target, request: ChatRequest, raw: dict[str, Any], headers: Mapping[str, str]
    ) -> tuple[int, str]:
        from switchyard.wire.tokens import estimate_input_tokens

        counter = getattr(target.backend, "count_tokens", None)
        if counter is not None:
            forwarded = {k: v for k in _FORWARD_HEADERS if (v := headers.get(k))}
            options = CallOptions(raw_body=raw, raw_format=WireFormat.ANTHROPIC_MESSAGES.value, headers=forwarded)
            try:
                return int(await counter(request, target.info, options)), "upstream"
            except UpstreamStatusError as exc:
                if target.info.format == WireFormat.ANTHROPIC_MESSAGES.value and exc.upstream_status in (400, 413):
                    raise  # Anthropic judged the request itself: relay its answer.
                logger.info("token count by %r failed (%s); estimating", target.info.name, exc.message)
            except UpstreamError as exc:
                logger.info("token count by %r failed (%s); estimating", target.info.name, exc.message)
        return estimate_input_tokens(request), "estimate"

    @staticmethod
    def _headers(record: DecisionRecord, *, stream: bool) -> dict[str, str]:
        headers = {
            "content-type": "text/event-stream" if stream else "application/json",
            HEADER_SELECTED: record.selected or "",
            HEADER_ROUTE: record.route,
            HEADER_SOURCE: record.source,
            HEADER_OVERHEAD: f"{record.overhead_ms:.3f}",
            HEADER_REQUEST_ID: record.request_id,
        }
        if stream:
            headers["cache-control"] = "no-cache"
            headers["x-accel-buffering"] = "no"
        return headers

    def _error_reply(self, fmt: WireFormat, exc: SwitchyardError, prep: _Prepared | None) -> Reply:
        codec = get_codec(fmt)
        headers = {"content-type": "application/json", **exc.headers}
        if prep is not None:
            headers[HEADER_ROUTE] = prep.record.route
            headers[HEADER_SOURCE] = prep.record.source
            headers[HEADER_REQUEST_ID] = prep.record.request_id
            headers[HEADER_SELECTED] = prep.record.selected or ""
        if exc.status in (429, 503) and "retry-after" not in headers:
            headers["retry-after"] = "1"
        if isinstance(exc, UpstreamError):
            # The engine already retried and fell back as far as the policy allows; an SDK
            # retrying on top would multiply attempts (openai/anthropic SDKs obey this header).
            headers["x-should-retry"] = "false"
        if isinstance(exc, UpstreamStatusError) and exc.status < 500 and exc.status not in (408, 429):
            upstream_fmt = self.targets[exc.target].info.format if exc.target in self.targets else None
            if upstream_fmt == fmt.value and exc.body.lstrip().startswith(b"{"):
                # Same API family: relay the provider's own words (agents match on them) — but
                # never an HTML page from a proxy in front of it.
                return Reply(exc.status, headers, body=exc.body)
        return Reply(exc.status, headers, body=dumps(codec.encode_error(exc.info())))

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


class _KeyedStore:
    """A route's store seen through one session key: the router reads and writes its own slot."""

    def __init__(self, inner: StateStore, key: str) -> None:
        self._inner = inner
        self._key = key

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self._inner.get(f"{self._key}:{key}")

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        await self._inner.set(f"{self._key}:{key}", value, ttl_s=ttl_s)

    async def delete(self, key: str) -> None:
        await self._inner.delete(f"{self._key}:{key}")

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        return await self._inner.update(f"{self._key}:{key}", fn, ttl_s=ttl_s)


class _NoBackend:
    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        raise RouterError("no backend")

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        raise RouterError("no backend")

    async def aclose(self) -> None:
        return None


async def _first_content(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    """Reads events up to and including the first one that carries content or ends the turn."""
    got: list[StreamEvent] = []
    async for event in events:
        got.append(event)
        if isinstance(event, StreamError):
            # An in-band error before anything reached the caller is a failed attempt.
            raise UpstreamError(event.error.message or "upstream stream failed", status=event.error.status)
        if not isinstance(event, UsageDelta | MessageStart):
            return got
    return got


async def _aclose(events: AsyncIterator[StreamEvent] | None) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


def _lower(headers: Mapping[str, str] | None) -> dict[str, str]:
    if not headers:
        return {}
    return {k.lower(): v for k, v in headers.items()}


def error_info(exc: BaseException) -> ErrorInfo:
    """An :class:`ErrorInfo` for any exception (typed errors keep their fields)."""
    if isinstance(exc, SwitchyardError):
        return exc.info()
    return ErrorInfo(status=500, type="api_error", message=f"{type(exc).__name__}: {exc}")
