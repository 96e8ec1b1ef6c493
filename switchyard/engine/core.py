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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import field, replace
from functools import partial
from types import MappingProxyType
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine import caller_view, own_answer, plain_chat, relay, served_model, stored_responses, threads
from switchyard.engine.counting import count_tokens
from switchyard.engine.event_stream import EventStream, open_first
from switchyard.engine.fallback import Fallback, FirstAttempt
from switchyard.engine.health import Health
from switchyard.engine.markup import check_answer
from switchyard.engine.monitor import BackendMonitor
from switchyard.engine.offload import PARSE_OFF_LOOP_BYTES, decode, decode_off_loop, release_off_loop
from switchyard.engine.record_open import open_record
from switchyard.engine.records import DecisionRecord, DecisionSink, mark_cancelled, prompt_preview
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
from switchyard.engine.restriction import RestrictedError, Restriction, restriction_for
from switchyard.engine.router_call import RouterCall
from switchyard.engine.session import identify
from switchyard.engine.state_watch import watched
from switchyard.engine.stream_health import StreamHealth
from switchyard.engine.stream_out import TAKES_RUNS, stream_reply
from switchyard.engine.target import Completion, Route, Target, close_all, find_route
from switchyard.engine.timeouts import Budget, budget
from switchyard.engine.verify import gate, gated_stream
from switchyard.engine.windows import PromptSize
from switchyard.protocol.access import current_caller
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    InvalidRequestError,
    PreviousResponseNotFoundError,
    RouterError,
    SwitchyardError,
    ThreadNotFoundError,
    UpstreamError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.session import NamespacedStore, SessionInfo, StateStore
from switchyard.protocol.stream import MessageStart, response_to_events
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.static import PassthroughRouter
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import load_object
from switchyard.wire.openai_chat.plain_answer import PlainAnswer

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

Answer = ChatResponse | PlainAnswer
"""An answer call's result: the IR, or a plain Chat answer relayed without it (the plain lane)."""

KEEPALIVE_S = 15.0
"""Longest upstream silence on an open stream before the caller gets a keep-alive."""


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
    restriction: Restriction | None = None  # the labels the request requires (None: unrestricted)
    decode: Callable[[], ChatRequest] | None = None  # the full decode of a plain Chat stand-in
    first: FirstAttempt | None = None  # an attempt the relay lane made (engine/relay.py)


def _prompt(prep: _Prepared) -> PromptSize:
    """The size of ``prep``'s prompt, computed when first asked (a plain stand-in is decoded then)."""
    return PromptSize(prep.decode or prep.request, prep.body_bytes)


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

    # -- routing ----------------------------------------------------------------------------

    async def _prepare(
        self,
        request: ChatRequest,
        headers: Mapping[str, str],
        inbound: WireFormat | None,
        raw: dict[str, Any] | None,
        t0: float,
        session: SessionInfo | None = None,
    ) -> _Prepared:
        if not request.model:
            raise InvalidRequestError("'model' is required: name a route (see GET /v1/models)", param="model")
        route = self.route(request.model)
        limits = budget(headers, time.perf_counter() - t0)
        plain = session is not None  # read off a plain Chat body (plain_chat.view): no thread, no restriction
        inherited: list[str] | None = []  # the labels a continued thread required (None: unknown thread)
        if session is None:
            fallback = self.hash_session_fallback or route.hash_session_fallback
            session = identify(headers, request, hash_fallback=fallback, derive=self.derive_session)
        if (caller := current_caller.get()) is not None:  # its state is its tenant's (protocol/tenancy.py)
            session = replace(session, tenant=caller.tenant)
        if not plain:  # a thread's `continue` keeps its session and its restriction:
            session, inherited = await threads.resume(self.store, request, session)
        # Bound to its caller here, in the request's task: whoever hands the record out later.
        record = open_record(headers, route.name, route.kind, inbound._value_ if inbound else None, request, session)
        relevant, carried = self._relevant[route.name], threads.carried(request, inherited)
        restriction = (
            None if plain else restriction_for(request, headers, route.restrict, self._infos, relevant, raw, carried)
        )
        if restriction is not None:
            record.details["restriction"], record._redact = restriction.to_dict(), restriction.redact
        if self.preview_chars:  # server.dashboard's session timeline (memory only), without what a rule matched
            record._preview = prompt_preview(request, self.preview_chars, restriction.redact if restriction else None)
        fwd = forwarded(headers)
        try:
            if not plain:  # before routing
                answerers = self._answerers.get(route.name) or (*route.targets, *route.fallbacks)
                known = inherited is not None or (not route.restrict and session.tenant is None)
                threads.check_route(request, answerers, self.targets, known=known)
                await stored_responses.check(self.store, request, session.tenant)  # another tenant's response
            if route.experiment is None:
                decision = await self._decide(route, request, session, headers, record, limits, restriction, fwd)
            else:  # shadow mode or a control group (engine/experiment.py)
                decide = partial(self._decide, route, request, session, headers, record, limits, restriction, fwd)
                decision = await route.experiment.decide(session, record, decide)
            candidates = route.order(decision.candidates)
            if restriction is not None:
                candidates = restriction.narrow(route.name, decision, candidates, record)
            if decision.response is not None:  # a router's own answer can be continued as well
                await threads.remember_answer(self.store, request, decision, self.targets, session, restriction)
            elif not plain:  # a stand-in continues no thread
                candidates = threads.servable(decision.request or request, candidates, self.targets)
        except (ThreadNotFoundError, RestrictedError, PreviousResponseNotFoundError) as exc:
            raise self._exhausted(record, exc, t0) from None
        record.candidates = candidates
        options = CallOptions(
            raw_body=raw if decision.request is None else None,
            raw_format=inbound._value_ if inbound else None,
            headers=fwd,
        )
        prep = _Prepared(route, decision.request or request, decision, record, candidates, options, t0, headers, limits)
        prep.restriction = restriction
        return prep

    async def _decide(
        self,
        route: Route,
        request: ChatRequest,
        session: SessionInfo,
        headers: Mapping[str, str],
        record: DecisionRecord,
        limits: Budget | None = None,
        restriction: Restriction | None = None,
        fwd: Mapping[str, str] | None = None,
    ) -> Decision:
        if route.stateful and session.key is None and route.name not in self._warned_no_session:
            self._warned_no_session.add(route.name)
            logger.warning(
                "route %r keeps per-session state but requests carry no session id "
                "(send x-switchyard-session-id); each request is routed on its own",
                route.name,
            )
        # A passthrough reads nothing of the request or its context: no context is built for it.
        decision = route.router.fixed() if isinstance(route.router, PassthroughRouter) else None
        router_call: RouterCall | None = None
        if decision is None:  # the router's context, its session's state and its model calls
            store: StateStore
            if session.key is None:
                store = MemoryStore(max_entries=64)
            else:
                assert route.store is not None
                # The session's slot of the route (watched when POST /v1/decision reports changes).
                store = watched(NamespacedStore(route.store, f"{session.key}:"))
            ctx = RouteContext(route.name, session, self._route_targets[route.name], store, headers, route.store)
            fwd = forwarded(headers) if fwd is None else fwd
            router_call = RouterCall(self.targets, self.health, record, limits, restriction, route.name, fwd)
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
        if decision.response is not None and router_call is not None:
            answer_ms = router_call.unbook(decision.response)
            if answer_ms is not None:
                record.details["answer_elapsed_ms"] = answer_ms
        record.source = decision.source
        record.reason = decision.reason
        record.score, record.confidence = decision.score, decision.confidence
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
            prompt=_prompt(prep),
            defer_success=stream,
            allowed=prep.restriction.allowed if prep.restriction is not None else None,
            first=prep.first,
        )

    async def _complete(self, target: Target, prep: _Prepared, options: CallOptions) -> ChatResponse:
        """One answer call, with the markup check for Chat upstreams that ask for it."""
        response = await target.backend.complete(prep.request, target.info, options)
        check_answer(self.health, target, prep.record, response)
        return response

    async def _complete_plain(self, target: Target, prep: _Prepared, options: CallOptions) -> Answer:
        """The plain Chat lane's answer call: a plain answer comes back without the IR
        (``HttpBackend.complete_plain``, wire/openai_chat/plain_answer.py)."""
        call = getattr(target.backend, "complete_plain", None) or target.backend.complete
        answer: Answer = await call(prep.request, target.info, options)
        check_answer(self.health, target, prep.record, answer)
        return answer

    async def _answer(self, prep: _Prepared, *, emit: bool = True) -> Completion:
        if prep.decision.response is not None:
            return own_answer.answered(prep, self.targets, self.health, self._emit)
        target, response = await self._served(prep, self._complete, emit=emit)
        assert isinstance(response, ChatResponse)  # self._complete's
        return Completion(response, prep.record, target.info.name)

    async def _served(
        self, prep: _Prepared, call: Callable[[Target, _Prepared, CallOptions], Awaitable[Answer]], *, emit: bool = True
    ) -> tuple[Target, Answer]:
        """The answer from the first candidate that gives one (fallback, verification), booked."""
        record, verify = prep.record, prep.route.verify
        if prep.first is None:  # else measured before the relay lane's attempt
            record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
        if not prep.candidates:
            raise self._exhausted(record, None, prep.t0)
        runner = self._fallback(prep)
        try:
            target, response = await runner.run(prep.candidates, lambda t, o: call(t, prep, o), prep.options)
            if verify is not None and verify.gates(target.info.name, prep.request):  # docs/verify.md
                assert isinstance(response, ChatResponse)  # the plain lane takes no verified route
                again = lambda names: runner.run(names, lambda t, o: self._complete(t, prep, o), prep.options)  # noqa: E731
                target, response = await gate(verify, prep.request, record, target, response, again)
        except UpstreamError as exc:
            raise self._exhausted(record, exc, prep.t0, runner) from None
        except asyncio.CancelledError as exc:
            self._cancelled(record, prep.t0, runner, exc)
            raise
        await self._book(prep, target, response, len(runner.tried), emit=emit)
        return target, response

    async def _book(self, prep: _Prepared, target: Target, response: Answer, tried: int, *, emit: bool) -> None:
        """Books an answer on the record: who served it, its usage and cost (``tried``: the
        targets attempted), and hands the record to the sinks unless held (``emit``)."""
        record = prep.record
        record.fallbacks_tried = tried - 1
        record.served_by(target.info)
        await self._answered_by(prep, target, response.id, response.model)
        record.set_usage(response.usage)
        record.cost_usd = target.info.price.cost(response.usage)
        record.duration_ms = (time.perf_counter() - prep.t0) * 1000
        if emit:
            self._emit(record)

    async def _answer_stream(self, prep: _Prepared, *, runs: bool = False, relayed: bool = False) -> EventStream:
        """Opens the answer stream on the first candidate that accepts it; with ``runs`` (a Chat
        or Anthropic caller's reply: ``handle``), through ``open_stream_runs`` where it exists;
        ``relayed`` (a plain Chat relay), through the relay lane when it can."""
        record = prep.record
        if prep.decision.response is not None:
            return own_answer.answered_stream(prep, self.targets, self.health, self._emit)
        verify = prep.route.verify
        if verify is not None and verify.buffers(prep.candidates, prep.request):
            return await self._buffered(prep)
        record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
        if not prep.candidates:
            raise self._exhausted(record, None, prep.t0)

        opened = partial(open_first, self.health, prep.request, record, runs)
        found = await relay.first_attempt(self, prep, opened, stream=True) if relayed else None  # else the walk
        if found is not None:
            (target, (events, first)), tried, prompt = found, 1, _prompt(prep)
        else:
            runner = self._fallback(prep, stream=True)
            try:
                target, (events, first) = await runner.run(prep.candidates, opened, prep.options)
            except UpstreamError as exc:
                raise self._exhausted(record, exc, prep.t0, runner) from None
            except asyncio.CancelledError as exc:
                self._cancelled(record, prep.t0, runner, exc)
                raise
            tried, prompt = len(runner.tried), runner.prompt or _prompt(prep)
        record.fallbacks_tried = tried - 1
        record.served_by(target.info)
        start = next((e for e in first if isinstance(e, MessageStart)), MessageStart(id="", model=""))
        await self._answered_by(prep, target, start.id, start.model)
        events = gated_stream(verify, prep.request, record, target.info.name, first, events)  # docs/verify.md
        hooks = StreamHealth(self.health, target, record)
        return EventStream(
            first,
            events,
            record,
            target,
            self._emit,
            prep.t0,
            on_failure=hooks.failed_mid_stream,
            on_markup=hooks.leaked if target.reliability.markup_leak != "off" else None,
            on_end=hooks.ended,
            # Charged when no usage report came; the fallback's own size (counted at most once).
            prompt_tokens=prompt.tokens,
        )

    async def _buffered(self, prep: _Prepared) -> EventStream:
        """Active verification of a stream: the answer is checked whole before any is released."""
        prep.options = replace(prep.options, raw_body=None)  # fetched whole: no streamed body replay
        done = await self._answer(prep, emit=False)
        target = self.targets[done.target]
        return EventStream(response_to_events(done.response), None, prep.record, target, self._emit, prep.t0)

    async def _answered_by(self, prep: _Prepared, target: Target, message_id: str, model: str) -> None:
        """What the answer says of itself: the model that served it, the reply a thread continues."""
        record = prep.record
        served_model.note(record, model)
        turn, restriction = record.turn_index, prep.restriction
        args = (record.session_id, turn, restriction, record.tenant)
        await threads.remember(self.store, prep.request, target, message_id, *args)
        await stored_responses.remember(self.store, prep.request, target, message_id, record.tenant)

    def _exhausted(
        self, record: DecisionRecord, error: SwitchyardError | None, t0: float, runner: Fallback | None = None
    ) -> SwitchyardError:
        record.fallbacks_tried = max(0, len(runner.tried) - 1) if runner else 0
        failure: SwitchyardError = error or RouterError("route has no candidate targets")
        record.status = failure.status
        record.error = failure.message
        record.duration_ms = (time.perf_counter() - t0) * 1000
        self._emit(record)
        return failure

    def _cancelled(self, record: DecisionRecord, t0: float, runner: Fallback, exc: asyncio.CancelledError) -> None:
        """Records a cancelled request (caller gone, or shutdown: ``records.mark_cancelled``)."""
        if not mark_cancelled(record, t0, len(runner.tried), exc):
            self.health.count("cancelled")
        self._emit(record)

    def _emit(self, record: DecisionRecord) -> None:
        record.mask()  # what a restrict: rule matched reaches no sink (an upstream error may quote it)
        for sink in self.sinks:
            try:
                sink(record)
            except Exception:  # a broken sink must not break serving
                logger.exception("decision sink failed")

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
        prep: _Prepared | None = None
        plain: tuple[ChatRequest, SessionInfo] | None = None
        try:
            if len(body) >= PARSE_OFF_LOOP_BYTES:
                # Decoding 5 MB (100,000 messages) takes seconds of CPU: on a worker thread the event
                # loop serves everyone else meanwhile (docs/benchmarks.md); so is freeing it, after.
                # Smaller bodies are read here, once (engine/offload.py says where the line is).
                raw, request = await decode_off_loop(codec, body)
                release_off_loop(raw, request)
            else:
                raw = load_object(body)
                lane = None if self.preview_chars or self.hash_session_fallback else self._plain  # both read the IR
                if lane and fmt is WireFormat.OPENAI_CHAT:
                    plain = plain_chat.view(raw, hdrs, lane, self.route, derive=self.derive_session)
                request = await decode(codec, raw) if plain is None else plain[0]
            prep = await self._prepare(request, hdrs, fmt, raw, t0, None if plain is None else plain[1])
            if plain is not None:  # the stand-in's full decode, should the prompt's size be needed
                prep.decode = lambda: codec.decode_request(raw)
            prep.record.path = path
            if prep.decision.request is None:
                prep.body_bytes = len(body)
            if request.stream:
                runs = fmt in TAKES_RUNS and prep.route.verify is None  # a verifier reads every event
                events = await self._answer_stream(prep, runs=runs, relayed=plain is not None)
                encoder = codec.stream_encoder(
                    model=self._reply_model(prep, request.model, events.record), include_usage=request.include_usage
                )
                if caller_view.hides_reasoning(request):
                    encoder = caller_view.NoReasoning(encoder)
                return stream_reply(encoder, events, codec.keepalive(), self.keepalive_s, hold=hold_record)
            held = hold_record and prep.decision.response is None  # the router's own answer: emitted at once
            if plain is not None and prep.decision.response is None:
                answer = await relay.answer(self, prep, emit=not held)  # the general path when it must
            else:
                answer = (await self._answer(prep, emit=not held)).response
        except SwitchyardError as exc:
            return error_reply(self.targets, fmt, exc, prep.record if prep is not None else None)
        model = self._reply_model(prep, request.model, prep.record)
        release = partial(self._emit, prep.record) if held else None
        return answer_reply(codec, request, answer, model, prep.record, release)

    def _reply_model(self, prep: _Prepared, requested: str, record: DecisionRecord) -> str:
        """The ``model`` a reply names (see :mod:`switchyard.engine.reply_model`)."""
        return reply_model(prep.route.reply_model or self.reply_model, requested, record.selected_model)

    async def count_tokens(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Serves ``POST /v1/messages/count_tokens`` (see :func:`switchyard.engine.counting.count_tokens`)."""
        return await count_tokens(self.route, self.targets, body, headers)

    async def aclose(self) -> None:
        """Closes every backend, and every router that holds connections (``aclose``)."""
        await self.monitor.aclose()
        await close_all(self.targets.values(), self.routes.values())
