"""The one request path, composed: decode → identify → restrict → decide → attempt/verify →
answer/stream → book and record.

Layer: ``engine`` — imports ``protocol``, ``wire``, ``routers`` and ``state``; never ``httpx``.
Backends arrive as :class:`~switchyard.protocol.call.ModelBackend` objects built by ``config``.

The proxy (``switchyard.server``), the in-process transport behind the drop-in SDK clients and
the library API all call this module, so their behaviour cannot drift apart. Each stage is a
module of its own that says what it reads and what it may change (docs/architecture.md draws
them):

==========  ==============================  ==============================================
stage       module                          hands on
==========  ==============================  ==============================================
decode      :mod:`~switchyard.engine.intake`    the parsed body, the request (or a plain stand-in)
identify    :mod:`~switchyard.engine.identify`  the session, a thread's labels, the open record
restrict    :mod:`~switchyard.engine.restrict`  the restriction (or none)
decide      :mod:`~switchyard.engine.decide`    the decision and its ordered candidates
attempt     :mod:`~switchyard.engine.attempt`   the serving target and its answer (verified)
answer      :mod:`~switchyard.engine.answer`    a completion, a plain answer or an event stream
book        :mod:`~switchyard.engine.book`      the finished record, to the sinks
==========  ==============================  ==============================================

The engine holds what the stages share (targets, health, the state store, the sinks: the
:class:`~switchyard.engine.handoff.Serving` they read) and the per-route tables built once at
start-up; the stages hand each other :class:`~switchyard.engine.handoff.Prepared`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from switchyard.engine import answer as answer_stage
from switchyard.engine import book, caller_view, plain_chat
from switchyard.engine.counting import count_tokens
from switchyard.engine.decide import decided
from switchyard.engine.event_stream import EventStream
from switchyard.engine.handoff import Prepared
from switchyard.engine.health import Health
from switchyard.engine.identify import identified
from switchyard.engine.intake import decode
from switchyard.engine.mirror import Mirrors
from switchyard.engine.monitor import BackendMonitor
from switchyard.engine.records import DecisionRecord, DecisionSink
from switchyard.engine.replies import (
    HEADER_OVERHEAD,
    HEADER_REQUEST_ID,
    HEADER_ROUTE,
    HEADER_SELECTED,
    HEADER_SOURCE,
    answer_reply,
    error_reply,
    forwarded,
    lower,
)
from switchyard.engine.reply import Reply
from switchyard.engine.reply_model import DEFAULT as REPLY_MODEL_DEFAULT
from switchyard.engine.reply_model import ReplyModel, reply_model
from switchyard.engine.restrict import restricted
from switchyard.engine.restriction import RestrictedError
from switchyard.engine.stream_out import TAKES_RUNS, stream_reply
from switchyard.engine.target import Completion, Route, Target, close_all, find_route
from switchyard.engine.timeouts import budget
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    InvalidRequestError,
    PreviousResponseNotFoundError,
    SwitchyardError,
    ThreadNotFoundError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore, SessionInfo, StateStore
from switchyard.protocol.targets import TargetInfo
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat

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
        # Not ``store or …``: a configured store that is still empty is falsy (it has a length).
        self.store: StateStore = store if store is not None else MemoryStore()
        self.sinks: list[DecisionSink] = list(sinks)
        self.default_route = default_route
        self.hash_session_fallback = hash_session_fallback
        self._aliases: dict[str, str] = {}
        # RouteContext.targets per route: fixed after start-up, so built once, not per request.
        self._route_targets: dict[str, Mapping[str, TargetInfo]] = {}
        self._infos: Mapping[str, TargetInfo] = MappingProxyType({n: t.info for n, t in self.targets.items()})
        # Per route, what a restriction may remove (its targets, fallbacks and judges): the record's list.
        self._relevant: dict[str, tuple[str, ...]] = {}
        self._answerers: dict[str, tuple[str, ...]] = {}
        for route in self.routes.values():
            if route.store is None:
                route.store = NamespacedStore(self.store, f"{route.name}:")
            for alias in route.aliases:
                self._aliases[alias] = route.name
            infos = {t: self.targets[t].info for t in (*route.targets, *route.fallbacks) if t in self.targets}
            self._route_targets[route.name] = MappingProxyType(infos)
            self._relevant[route.name] = tuple(dict.fromkeys((*route.targets, *route.fallbacks, *route.auxiliary)))
            self._answerers[route.name] = (*route.targets, *route.fallbacks)  # threads.check_route's
        # Routes whose plain Chat requests skip the IR decode (engine/plain_chat.py): their
        # candidate targets, each checked per request (a context window may be discovered later).
        self._plain = plain_chat.relay_routes(self.routes.values(), self.targets)
        self._warned_no_session: set[str] = set()
        self.keepalive_s: float | None = KEEPALIVE_S
        self.monitor = BackendMonitor(self.targets, self.health)
        self.reply_model: ReplyModel = REPLY_MODEL_DEFAULT
        self.derive_session = True  # see switchyard.engine.session.derived_session_key
        self.preview_chars = 0  # server.dashboard.prompt_preview_chars (DecisionRecord.preview)
        self.mirrors = Mirrors()  # shadow mode's mirror calls (engine/mirror.py)

    # -- lookup -----------------------------------------------------------------------------

    def route(self, model: str) -> Route:
        """The route a model id selects (``RouteNotFoundError`` if none; see :func:`find_route`)."""
        return find_route(self.routes, self._aliases, self.default_route, model)

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

    # -- the deciding stages ----------------------------------------------------------------

    async def prepare(
        self,
        request: ChatRequest,
        headers: Mapping[str, str],
        inbound: WireFormat | None,
        raw: dict[str, Any] | None,
        t0: float,
        session: SessionInfo | None = None,
    ) -> Prepared:
        """``request`` identified, restricted and decided: what the answering stages read.

        Args:
            request: The decoded request (or a plain Chat stand-in, with ``session``).
            headers: Its headers, lower-cased.
            inbound: Its wire format (``None`` for library calls).
            raw: The caller's body, when it may be replayed verbatim.
            t0: ``time.perf_counter()`` when it arrived.
            session: The session a plain Chat stand-in named (the intake stage's).

        Raises:
            SwitchyardError: The request names no route, its thread or stored response is not
                the caller's to continue, no target may see it, or its router failed (recorded).
        """
        if not request.model:
            raise InvalidRequestError("'model' is required: name a route (see GET /v1/models)", param="model")
        route = self.route(request.model)
        limits = budget(headers, time.perf_counter() - t0)
        plain = session is not None  # read off a plain Chat body (plain_chat.view): no thread, no restriction
        fmt = inbound._value_ if inbound else None
        session, inherited, record = await identified(
            self.store,
            route,
            request,
            headers,
            fmt,
            session,
            hash_fallback=self.hash_session_fallback,
            derive=self.derive_session,
        )
        relevant = self._relevant[route.name]
        restriction = restricted(
            request,
            headers,
            route,
            self._infos,
            relevant,
            raw,
            inherited,
            record,
            plain=plain,
            preview_chars=self.preview_chars,
        )
        fwd = forwarded(headers)
        try:
            decision, candidates = await decided(
                self,
                route,
                request,
                session,
                headers,
                record,
                limits,
                restriction,
                fwd,
                self._route_targets[route.name],
                inherited=inherited,
                answerers=self._answerers.get(route.name),
                plain=plain,
                warned=self._warned_no_session,
            )
        except (ThreadNotFoundError, RestrictedError, PreviousResponseNotFoundError) as exc:
            raise book.exhausted(self, record, exc, t0) from None
        record.candidates = candidates
        options = CallOptions(raw_body=raw if decision.request is None else None, raw_format=fmt, headers=fwd)
        prep = Prepared(route, decision.request or request, decision, record, candidates, options, t0, headers, limits)
        prep.restriction = restriction
        return prep

    async def decide(
        self, request: ChatRequest, headers: Mapping[str, str] | None = None, *, emit: bool = True
    ) -> DecisionRecord:
        """Routes without making the answer call, and books the decision as ``POST /v1/decision``
        does (:func:`switchyard.engine.book.decision_only`; ``emit=False``: not to the sinks).

        Judge calls a router needs are made (and booked in ``record.router_cost``). When the
        router produced the answer itself, ``record.details["answered"]`` is ``True``.
        """
        prep = await self.prepare(request, lower(headers), None, None, time.perf_counter())
        return book.decision_only(self, prep, emit=emit)

    # -- serving ----------------------------------------------------------------------------

    async def complete(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> Completion:
        """Routes and answers ``request`` (non-streaming)."""
        t0 = time.perf_counter()
        prep = await self.prepare(request, lower(headers), None, None, t0)
        self.mirrors.plan(prep, self.targets)
        return await answer_stage.completion(self, prep)

    async def stream(self, request: ChatRequest, headers: Mapping[str, str] | None = None) -> EventStream:
        """Routes and opens a streamed answer."""
        t0 = time.perf_counter()
        prep = await self.prepare(request, lower(headers), None, None, t0)
        self.mirrors.plan(prep, self.targets)
        return await answer_stage.stream(self, prep)

    def emit(self, record: DecisionRecord) -> None:
        """Masks ``record`` (what a ``restrict:`` rule matched) and hands it to every sink; a
        failing sink is logged and the rest still run. A shadow request with a planned mirror
        goes to the sinks when its mirror ends (engine/mirror.py)."""
        if not self.mirrors.start(record, self._emit_now):
            book.emit_to(self.sinks, record)

    def _emit_now(self, record: DecisionRecord) -> None:
        book.emit_to(self.sinks, record)

    # -- wire-level entry point ---------------------------------------------------------------

    async def handle(
        self,
        fmt: WireFormat | str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        path: str | None = None,
        hold_record: bool = False,
    ) -> Reply:
        """Serves one HTTP request body in wire format ``fmt``.

        Returns a JSON reply or an SSE stream in the caller's format, with the
        ``x-switchyard-*`` headers. Never raises for caller or upstream errors: they become
        error replies in the caller's envelope. With ``hold_record``, an answer's decision
        record waits for :attr:`Reply.release <switchyard.engine.reply.Reply.release>`.
        """
        t0 = time.perf_counter()
        fmt = fmt if type(fmt) is WireFormat else WireFormat(fmt)
        codec = get_codec(fmt)
        hdrs = lower(headers)
        prep: Prepared | None = None
        try:
            lane = None if self.preview_chars or self.hash_session_fallback else self._plain  # both read the IR
            raw, request, read = await decode(codec, fmt, body, hdrs, lane, self.route, derive=self.derive_session)
            prep = await self.prepare(request, hdrs, fmt, raw, t0, read)
            if read is not None:  # the stand-in's full decode, should the prompt's size be needed
                prep.decode = lambda: codec.decode_request(raw)
            self.mirrors.plan(prep, self.targets)
            prep.record.path = path
            if prep.decision.request is None:
                prep.body_bytes = len(body)
            if request.stream:
                runs = fmt in TAKES_RUNS and prep.route.verify is None  # a verifier reads every event
                events = await answer_stage.stream(self, prep, runs=runs, relay=read is not None)
                encoder = codec.stream_encoder(
                    model=self._reply_model(prep, request.model, events.record), include_usage=request.include_usage
                )
                if caller_view.hides_reasoning(request):
                    encoder = caller_view.NoReasoning(encoder)
                return stream_reply(encoder, events, codec.keepalive(), self.keepalive_s, hold=hold_record)
            held = hold_record and prep.decision.response is None  # the router's own answer: emitted at once
            if read is not None and prep.decision.response is None:
                answer = await answer_stage.relayed(self, prep, emit=not held)  # the walk when it must
            else:
                answer = (await answer_stage.completion(self, prep, emit=not held)).response
        except SwitchyardError as exc:
            return error_reply(self.targets, fmt, exc, prep.record if prep is not None else None)
        model = self._reply_model(prep, request.model, prep.record)
        release = partial(self.emit, prep.record) if held else None
        return answer_reply(codec, request, answer, model, prep.record, release)

    def _reply_model(self, prep: Prepared, requested: str, record: DecisionRecord) -> str:
        """The ``model`` a reply names (see :mod:`switchyard.engine.reply_model`)."""
        return reply_model(prep.route.reply_model or self.reply_model, requested, record.selected_model)

    async def count_tokens(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Serves ``POST /v1/messages/count_tokens`` (see :func:`switchyard.engine.counting.count_tokens`)."""
        return await count_tokens(self.route, self.targets, body, headers)

    async def aclose(self) -> None:
        """Closes every backend, and every router that holds connections (``aclose``)."""
        await self.mirrors.aclose()  # before the backends close: their records still go out
        await self.monitor.aclose()
        await close_all(self.targets.values(), self.routes.values())
