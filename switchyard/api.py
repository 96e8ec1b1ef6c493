"""The library API: :class:`Switchyard`.

Layer: ``api`` — above ``config`` and ``engine``; the server, the in-process transport and the
drop-in SDK clients are thin shells over :meth:`Switchyard.dispatch`.

Example:
    >>> sy = Switchyard.from_config("router.yaml")
    >>> done = await sy.complete(model="agent", messages=[{"role": "user", "content": "hi"}])
    >>> done.response.text, done.record.selected, done.record.cost_usd
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from switchyard.engine.logs import log_count_tokens
from switchyard.engine.reply import Reply
from switchyard.engine.timeouts import HEADER_TIMEOUT, format_timeout
from switchyard.loop_thread import LoopThread
from switchyard.protocol.access import may_use, no_such_model
from switchyard.protocol.errors import ErrorInfo, RouteNotFoundError
from switchyard.wire import available_formats
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps

if TYPE_CHECKING:
    # The config loader and builder and the engine load when a router is built
    # (:meth:`Switchyard.__init__`), not when the server module is imported.
    from switchyard.config.load import LoadedConfig
    from switchyard.engine.core import Completion, Engine, EventStream, Route
    from switchyard.engine.feedback import FeedbackStore
    from switchyard.engine.records import DecisionRecord, DecisionSink, JsonlSink
    from switchyard.protocol.request import ChatRequest
    from switchyard.protocol.session import StateStore
    from switchyard.protocol.stream import StreamEvent

T = TypeVar("T")

_ROOT = {
    "name": "switchyard",
    "status": "ok",
    "endpoints": ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/models", "/v1/feedback", "/health"],
}
"""What ``GET /`` and ``HEAD /`` answer: the proxy is up and where to send requests."""

# Paths (below an optional ``/v1``) that carry model calls, by wire format.
_INFERENCE_PATHS: dict[str, WireFormat] = {
    "/chat/completions": WireFormat.OPENAI_CHAT,
    "/messages": WireFormat.ANTHROPIC_MESSAGES,
    "/responses": WireFormat.OPENAI_RESPONSES,
}
_AVAILABLE = frozenset(available_formats())  # fixed once imported (a list built per request before)


class Switchyard:
    """A configured router you can call in-process, serve over HTTP or wrap in an SDK client.

    Build it with :meth:`from_config`. One instance may be used from several event loops (each
    gets its own connection pools); routers and session state are shared.
    """

    def __init__(self, loaded: LoadedConfig, *, decision_log: str | None = None) -> None:
        from switchyard.config.build import (
            build_engine,
            build_feedback_store,
            build_routes,
            build_span_sink,
            build_store,
            decision_log_sink,
        )
        from switchyard.config.build import target_infos as _target_infos
        from switchyard.config.discovery import probe_context_windows
        from switchyard.engine.accounting import UsdLedger
        from switchyard.engine.experiment_log import experiment_log
        from switchyard.engine.health import Health

        self.loaded = loaded
        self._callbacks: list[DecisionSink] = []
        self.ledger = UsdLedger()
        """Live USD totals per route and per session (``GET /v1/stats`` → ``usd``)."""
        self._spans = build_span_sink(loaded)
        self._jsonl: JsonlSink | None = decision_log_sink(loaded, decision_log)
        self._store: StateStore = build_store(loaded)
        self.feedback_store: FeedbackStore = build_feedback_store(loaded, self._store)
        """Outcome reports and the decisions they match (``POST /v1/feedback``, :meth:`feedback`)."""
        # Served context windows (probe_context_window targets) before routers see TargetInfo.
        probe_context_windows(loaded)
        self._routes: dict[str, Route] = build_routes(loaded, _target_infos(loaded))
        self.experiments = experiment_log(self._routes.values(), self._callbacks, self.feedback_store.listeners)
        # Circuit breakers and reliability counters span every engine (one per event loop).
        self._health = Health()
        self._engines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Engine] = weakref.WeakKeyDictionary()
        # The engine of the loop that asked last (a strong reference to that loop until another asks).
        self._last_engine: tuple[asyncio.AbstractEventLoop, Engine] | None = None
        self._lock = threading.Lock()
        self._thread: LoopThread | None = None
        # Fail at construction, not at the first request, when clients cannot be built.
        self._probe: Engine | None = build_engine(loaded, routes=self._routes, store=self._store, health=self._health)

    @classmethod
    def from_config(cls, source: str | Path | Mapping[str, Any], *, decision_log: str | None = None) -> Switchyard:
        """Loads a YAML file (or a dict of the same shape) and builds the router.

        Args:
            source: Path to a YAML config, or the parsed mapping.
            decision_log: JSONL file receiving one decision record per request.

        Raises:
            ConfigError: The config is invalid; the message names each bad key's YAML path.
        """
        from switchyard.config.load import load_config

        return cls(load_config(source), decision_log=decision_log)

    # -- engines ----------------------------------------------------------------------------

    def _sinks(self) -> list[DecisionSink]:
        sinks: list[DecisionSink] = [self.ledger, self._dispatch_record, *self.feedback_store.decision_sinks()]
        if self._spans is not None:
            sinks.append(self._spans)
        if self._jsonl is not None:
            sinks.append(self._jsonl)
        return sinks

    def _dispatch_record(self, record: DecisionRecord) -> None:
        for callback in list(self._callbacks):
            callback(record)

    @property
    def engine(self) -> Engine:
        """The engine for the running event loop (created on first use in that loop)."""
        loop = asyncio.get_running_loop()
        last = self._last_engine
        if last is not None and last[0] is loop:
            return last[1]  # the usual case: one loop serves every request, no lock needed
        with self._lock:
            found = self._engines.get(loop)
            if found is None:
                if self._probe is not None:
                    found, self._probe = self._probe, None
                    found.sinks.extend(self._sinks())
                else:
                    from switchyard.config.build import build_engine

                    found = build_engine(
                        self.loaded, routes=self._routes, store=self._store, sinks=self._sinks(), health=self._health
                    )
                self._engines[loop] = found
                if found.monitor.background and not self._background_probing():
                    # health_check.interval_s: one background prober per router, in the first loop.
                    found.monitor.ensure_running()
            self._last_engine = (loop, found)
        return found

    def _forget_engine(self, loop: asyncio.AbstractEventLoop) -> Engine | None:
        """Removes (and returns) ``loop``'s engine: the next request in that loop builds another."""
        with self._lock:
            last = self._last_engine
            if last is not None and last[0] is loop:
                self._last_engine = None
            return self._engines.pop(loop, None)

    def _background_probing(self) -> bool:
        return any(e.monitor.running for e in self._engines.values())

    @property
    def state_store(self) -> StateStore:
        """The session state store (``state:`` in the config), shared with the proxy's budgets."""
        return self._store

    def on_decision(self, callback: DecisionSink) -> None:
        """Calls ``callback(record)`` for every finished request (keep it quick; never raise).

        In-process calls hand the record over before they return. Under ``switchyard serve`` it
        comes after the reply's last byte, when the server next waits: as the next proxied call
        waits for its upstream, before ``/metrics``, ``/v1/stats`` or a budget check, or at most
        ~5 ms later when nothing comes (``switchyard/server/later.py``).
        """
        self._callbacks.append(callback)

    @property
    def routes(self) -> list[str]:
        """Route ids."""
        return list(self._routes)

    def stats(self) -> dict[str, Any]:
        """Reliability counters and circuit-breaker states (also served as ``GET /v1/stats``).

        ``counters`` holds ``attempts``, ``retries``, ``fallbacks``, ``failed_requests``,
        ``mid_stream_failures`` (streams ended by an error event after content reached the
        caller), ``breaker_opened``, ``breaker_skips``, ``context_window_skips``,
        ``deadline_exceeded`` and ``cancelled``; ``targets`` the breaker state of every target
        that ever failed. See ``docs/reliability.md``.
        """
        return self._health.stats()

    async def health(self, *, deep: bool = False) -> dict[str, Any]:
        """The router's health (also served as ``GET /health``).

        Args:
            deep: Probe every backend's health endpoint now (each within its
                ``health_check.timeout_s``, all at once) instead of reporting the cached states.

        Returns:
            ``status`` (``ok`` or ``degraded``), ``routes``, ``backends`` (per ``llm_clients``
            entry: the last probe's ``state`` — ``up``, ``down``, ``auth_error``, ``rate_limited``, ``unknown``
            or ``not_probed`` — with status, URL, latency and age) and ``targets`` (per target:
            breaker state, whether routing may use it, markup leaks, ``problems``) and
            ``process`` (``pid``; under ``serve --workers`` also the worker's ``slot`` and
            config ``generation``). See ``docs/reliability.md``.
        """
        report = await self.engine.health_report(deep=deep)
        state = self.state_status()
        status = "degraded" if state.get("degraded") else report["status"]
        return {**report, "status": status, "routes": self.routes, "state": state, "process": _process()}

    def threshold_control(self) -> dict[str, dict[str, Any]]:
        """Per route with a controlled threshold (``threshold: {target_capable_share: …}``): the
        controller's live state, ``threshold`` included (also in ``GET /v1/stats`` →
        ``threshold_control``). See docs/learned-routers.md."""
        out: dict[str, dict[str, Any]] = {}
        for name, route in self._routes.items():
            state = getattr(route.router, "control_state", None)
            value = state() if callable(state) else None
            if isinstance(value, dict):
                out[name] = value
        return out

    def state_status(self) -> dict[str, Any]:
        """The session-state backend: ``backend`` and, for Redis, ``degraded`` (serving from this
        process's own copy because Redis is unreachable) with outage counters."""
        status = getattr(self._store, "status", None)
        return status() if callable(status) else {"backend": "memory", "degraded": False}

    # -- requests -----------------------------------------------------------------------------

    @staticmethod
    def build_request(**kwargs: Any) -> ChatRequest:
        """Builds an IR request from OpenAI-Chat-style keywords (``model``, ``messages``, ``tools`` …)."""
        body = {k: v for k, v in kwargs.items() if v is not None}
        return get_codec(WireFormat.OPENAI_CHAT).decode_request(body)

    @staticmethod
    def _headers(
        session_id: str | None, headers: Mapping[str, str] | None, timeout: float | Mapping[str, float] | None = None
    ) -> dict[str, str]:
        out = {k.lower(): v for k, v in (headers or {}).items()}
        if session_id:
            out["x-switchyard-session-id"] = session_id
        if timeout is not None:
            out[HEADER_TIMEOUT] = format_timeout(timeout)
        return out

    async def complete(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        stream: bool = False,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> Completion | EventStream:
        """Routes and answers one request.

        Args:
            model: The route id.
            messages: OpenAI Chat messages.
            stream: Return an :class:`EventStream` of IR events instead of a :class:`Completion`.
            session_id: Session identity for stateful routers (same as ``x-switchyard-session-id``).
            headers: Extra caller headers (session/agent headers are read from here).
            timeout: This request's limits (same as ``x-switchyard-timeout``): seconds for the
                whole request (retries, fallbacks and the stream included), or a mapping with
                ``total``, ``read`` and/or ``connect``.
            **kwargs: Any other Chat Completions field (``tools``, ``tool_choice``, ``max_tokens``,
                ``temperature``, vLLM extras …).

        Returns:
            A :class:`Completion` (``.response``, ``.record``) or an :class:`EventStream`.
        """
        request = self.build_request(model=model, messages=messages, stream=stream, **kwargs)
        hdrs = self._headers(session_id, headers, timeout)
        if stream:
            return await self.engine.stream(request, hdrs)
        return await self.engine.complete(request, hdrs)

    async def decide(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> DecisionRecord:
        """Routes without the answer call (the library's ``POST /v1/decision``, docs/decision.md).

        The session's state is read and updated, and judge calls are made and booked, as for a
        proxied request. The record goes to the sinks as that endpoint's does, with
        ``details.decision_only`` and no answer cost: a decision-log line, metrics, the
        experiment figures, and the feedback index, so :meth:`feedback` on its session or
        request id matches. Its arguments are :meth:`complete`'s.

        Returns:
            The decision record: ``selected``, ``candidates`` (fallbacks in order), ``source``.
        """
        request = self.build_request(model=model, messages=messages, **kwargs)
        return await self.engine.decide(request, self._headers(session_id, headers))

    async def feedback(
        self,
        *,
        session_id: str | None = None,
        request_id: str | None = None,
        resolved: bool | None = None,
        score: float | None = None,
        reward: float | None = None,
        labels: list[str] | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        """Reports how a session (or one request) ended: the library's ``POST /v1/feedback``.

        Give one id and exactly one outcome. The report is kept in the state store (the latest
        per id wins) and written to the decision log, matched or not (docs/rollout.md).

        Args:
            session_id: The session (as sent with ``session_id=`` or ``x-switchyard-session-id``).
            request_id: Or one request (``record.request_id``).
            resolved: Whether the task was resolved.
            score: A grade in [0, 1].
            reward: Any finite number.
            labels: Up to 16 tags of at most 64 characters.
            tenant: The tenant the session belongs to (``server.tenants``; ``None`` without keys).

        Returns:
            The answer's body: ``matched`` (a decision with that id is known), ``replaced``
            (an earlier report was), ``route``, ``id``.

        Raises:
            InvalidRequestError: A bad report (the field is named).
            FeedbackOffError: The config has feedback off (``feedback.enabled``).
        """
        body: dict[str, Any] = {"session_id": session_id, "request_id": request_id, "resolved": resolved}
        body["score"] = score
        body |= {"reward": reward, "labels": labels}
        found = {k: v for k, v in body.items() if v is not None}
        from switchyard.engine.feedback_http import record_feedback

        result = await record_feedback(self.feedback_store, found, self._log_feedback, tenant=tenant, api_key=None)
        return result.to_dict()

    def feedback_sync(self, **kwargs: Any) -> dict[str, Any]:
        """Synchronous :meth:`feedback`."""
        return self.run_sync(self.feedback(**kwargs))

    def _log_feedback(self, line: dict[str, Any]) -> None:
        if self._jsonl is not None:
            self._jsonl.append(line)

    def _loop_thread(self) -> LoopThread:
        with self._lock:
            if self._thread is None:
                self._thread = LoopThread()
            return self._thread

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine on the instance's private loop thread and waits for it."""
        return self._loop_thread().run(coro)

    def iterate_sync(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Iterates an async iterator on the private loop thread."""
        return self._loop_thread().iterate(agen)

    def complete_sync(self, **kwargs: Any) -> Completion | Iterator[StreamEvent]:
        """Synchronous :meth:`complete`; with ``stream=True`` returns an iterator of IR events."""
        from switchyard.engine.core import EventStream

        result = self.run_sync(self.complete(**kwargs))
        if isinstance(result, EventStream):
            return self.iterate_sync(result)
        return result

    def decide_sync(self, **kwargs: Any) -> DecisionRecord:
        """Synchronous :meth:`decide`."""
        return self.run_sync(self.decide(**kwargs))

    # -- HTTP-shaped entry point ---------------------------------------------------------------

    async def dispatch(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str], *, hold_record: bool = False
    ) -> Reply:
        """Serves one HTTP request (the proxy and the in-process transport both call this).

        Handles ``POST /v1/chat/completions``, ``/v1/messages`` (with or without Anthropic's
        ``?beta=true``), ``/v1/messages/count_tokens``, ``/v1/responses`` and ``/v1/decision``
        (the decision only, see :mod:`switchyard.engine.decision_http`), ``GET /v1/models``,
        ``GET /v1/stats`` and ``GET /health`` (``?deep=1`` probes the backends first); anything
        else is a 404 (in Anthropic's envelope below ``/v1/messages``, else OpenAI's). With
        ``hold_record`` (the proxy's), an answer's decision record reaches the sinks when the
        caller calls :meth:`Reply.released <switchyard.engine.reply.Reply.released>`: after its
        last byte is sent, so that the sinks add nothing to the caller's wait.
        """
        route, _, query = path.partition("?")  # Anthropic's beta calls add ?beta=true
        route = route.rstrip("/")
        sub = route[3:] if route.startswith("/v1/") else route
        if sub == "/messages/count_tokens" and method == "POST":
            counted = await self.engine.count_tokens(body, headers)
            log_count_tokens(route, counted)
            return counted
        fmt = _INFERENCE_PATHS.get(sub)
        if fmt is not None and method == "POST":
            if fmt._value_ not in _AVAILABLE:
                return _error(
                    WireFormat.OPENAI_CHAT, 404, f"{route} is not available in this version", "not_found_error"
                )
            return await self.engine.handle(fmt, body, headers, path=route, hold_record=hold_record)
        if sub == "/decision" and method == "POST":
            # Decide only: the route's choice as JSON, no answer call (engine/decision_http.py).
            from switchyard.engine.decision_http import decision_reply

            return await decision_reply(self.engine, body, headers, query)
        if sub == "/feedback" and method == "POST":
            from switchyard.engine.feedback_http import feedback_reply  # outcomes in (docs/rollout.md)

            return await feedback_reply(self.feedback_store, body, self._log_feedback)
        if sub == "/stats" and method == "GET":
            stats = {"reliability": self.stats(), "usd": self.ledger.snapshot(), "state": self.state_status()}
            if self.experiments is not None:  # routed vs control, shadow's prediction (docs/rollout.md)
                stats["experiment"] = self.experiments.view()
            if thresholds := self.threshold_control():
                stats["threshold_control"] = thresholds
            return Reply(200, {"content-type": "application/json"}, body=dumps(stats))
        if sub == "/models" and method == "GET":
            from switchyard.config.build import describe_routes

            # An inbound key limited to some routes sees only those (and their aliases).
            routes = [r for r in describe_routes(self.engine) if may_use(r.get("alias_of") or r["id"])]
            if _anthropic_client(headers):
                from switchyard.config.model_list import anthropic_page

                try:
                    page = anthropic_page(routes, query)
                except ValueError as exc:
                    return _error(WireFormat.ANTHROPIC_MESSAGES, 400, str(exc), "invalid_request_error")
                return Reply(200, {"content-type": "application/json"}, body=dumps(page))
            data = {"object": "list", "data": routes}
            return Reply(200, {"content-type": "application/json"}, body=dumps(data))
        if sub.startswith("/models/") and method in ("GET", "HEAD"):
            return self._model(sub[len("/models/") :], headers)
        if route in ("", "/v1") and method in ("GET", "HEAD"):
            # Agents probe the base URL before their first call (Claude Code sends HEAD /).
            return Reply(200, {"content-type": "application/json"}, body=dumps(_ROOT))
        if route in ("/health", "/v1/health") and method in ("GET", "HEAD"):
            # Always 200 while the router runs (a liveness check must not restart it because a
            # backend is down); "status" says whether every backend and target is healthy.
            data = await self.health(deep=wants_deep(query))
            return Reply(200, {"content-type": "application/json"}, body=dumps(data))
        envelope = WireFormat.ANTHROPIC_MESSAGES if sub.startswith("/messages") else WireFormat.OPENAI_CHAT
        if fmt is not None or sub in ("/models", "/messages/count_tokens", "/decision", "/feedback"):
            return _error(envelope, 405, f"method {method} not allowed on {route}", "invalid_request_error")
        return _error(envelope, 404, f"no such endpoint: {method} {route}", "not_found_error")

    def _model(self, model_id: str, headers: Mapping[str, str]) -> Reply:
        """``GET /v1/models/{id}`` in OpenAI's shape, or Anthropic's for an Anthropic client."""
        from urllib.parse import unquote

        from switchyard.config.model_list import anthropic_shape, describe_model

        model_id = unquote(model_id)
        anthropic = _anthropic_client(headers)
        entry = describe_model(self.engine, model_id)
        if entry is not None and not may_use(entry.get("alias_of") or entry["id"]):
            entry = None  # an inbound key limited to some routes sees only those
        if entry is None:
            message = no_such_model(model_id, self.engine.routes)
            if anthropic:
                return _error(WireFormat.ANTHROPIC_MESSAGES, 404, message, "not_found_error")
            # The same answer as a request for the model gets (engine/target.py).
            info = RouteNotFoundError(message, param="model").info()
            codec = get_codec(WireFormat.OPENAI_CHAT)
            return Reply(404, {"content-type": "application/json"}, body=dumps(codec.encode_error(info)))
        body = anthropic_shape(entry) if anthropic else entry
        return Reply(200, {"content-type": "application/json"}, body=dumps(body))

    # -- lifecycle ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the connection pools of the current loop's engine."""
        loop = asyncio.get_running_loop()
        engine = self._forget_engine(loop)
        if engine is not None:
            await engine.aclose()
        closer = getattr(self._store, "aclose", None)
        if closer is not None:
            await closer()

    def close(self) -> None:
        """Closes everything, including the private loop thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            engine = self._forget_engine(thread.loop)
            if engine is not None:
                thread.run(engine.aclose())
            closer = getattr(self._store, "aclose", None)
            if closer is not None:
                thread.run(closer())
            thread.stop()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None

    async def __aenter__(self) -> Switchyard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Switchyard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process() -> dict[str, int]:
    """Which process answers: its pid, and under ``serve --workers`` its slot and generation
    (the supervisor sets ``SWITCHYARD_WORKER=slot:generation``)."""
    out = {"pid": os.getpid()}
    slot, _, generation = os.environ.get("SWITCHYARD_WORKER", "").partition(":")
    if slot.isdigit() and generation.isdigit():
        out |= {"slot": int(slot), "generation": int(generation)}
    return out


def wants_deep(query: str) -> bool:
    """Whether a ``/health`` query string asks for probes (``deep=1``, ``deep=true``, ``deep``).

    The one reading of ``?deep``: :meth:`Switchyard.dispatch` and the server's caller views
    (:mod:`switchyard.server.views`) both ask it.
    """
    for item in query.split("&"):
        key, _, value = item.partition("=")
        if key == "deep":
            return value.lower() not in ("0", "false", "no")
    return False


def _anthropic_client(headers: Mapping[str, str]) -> bool:
    """Whether the caller speaks Anthropic's API (its SDK and Claude Code send ``anthropic-version``)."""
    return any(k.lower() == "anthropic-version" for k in headers)


def _error(fmt: WireFormat, status: int, message: str, kind: str) -> Reply:
    info = ErrorInfo(status=status, type=kind, message=message)
    return Reply(status, {"content-type": "application/json"}, body=dumps(get_codec(fmt).encode_error(info)))


__all__ = ["Switchyard", "wants_deep"]
