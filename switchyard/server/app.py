"""The proxy as a plain ASGI application over :meth:`Switchyard.dispatch`.

Layer: ``server`` — imports ``api``. No web framework: the app reads the body, dispatches,
and writes the reply; streams are written event by event as the engine yields them, and a
caller that disconnects cancels the upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from functools import partial
from typing import TYPE_CHECKING, Any

from switchyard.api import Switchyard
from switchyard.clients.http_parts import Deadline, step_once
from switchyard.engine.reply import SHUTDOWN_CANCEL, Reply
from switchyard.server.auth import ApiKey, Budgets, KeyRing
from switchyard.server.connections import DISCONNECT_EXTENSION, FLUSH_EXTENSION
from switchyard.server.dashboard.http import DashboardHttp, is_dashboard_path
from switchyard.server.drain import Drain, shutdown_error
from switchyard.server.escape import printable
from switchyard.server.guard import Gate, error_reply, header_fields, host_problem
from switchyard.server.later import LaterRecords
from switchyard.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from switchyard.server.metrics import DeferredMetrics
from switchyard.server.stream_write import Pinger, Stalled, WriterState, deadline_send, relay
from switchyard.server.views import HealthPolicy, health_view, wants_deep
from switchyard.server.whole_answer import RESPOND_EXTENSION
from switchyard.wire import strict
from switchyard.wire.json import dumps

if TYPE_CHECKING:
    from switchyard.config.server import ServerConfig  # the schema loads with the config

logger = logging.getLogger("switchyard.server")

OPENAPI_PATH = "/openapi.json"
"""The OpenAPI document's path (``server/openapi.py``, imported when it is asked for)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_VIEWS = frozenset({"/health", "/v1/health", "/v1/stats", "/stats", "/metrics"})
"""Paths answered per caller by ``_view`` (the operator's views, see views.py)."""

MAX_BODY = 32 * 1024 * 1024
"""Default of ``server.limits.max_body_bytes``."""

ABORT_EXTENSION = "switchyard.abort"
"""Scope extension: a callable that drops the caller's connection at once (no flush)."""


class SwitchyardApp:
    """ASGI app serving a :class:`Switchyard`.

    Args:
        sy: The router to serve.
        max_body: Largest request body accepted, in bytes (413 above); default
            ``server.limits.max_body_bytes``.
        settings: The ``server:`` section (default: the one in ``sy``'s config).
        records_after_reply: Hand each answer's decision record to the sinks (the decision
            log, metrics, budgets, ``on_decision`` callbacks) after the reply's last byte is
            sent, when the server next waits (:mod:`switchyard.server.later`), so that they add
            nothing to this caller's wait nor to the next one's (docs/benchmarks.md "Seventh
            pass", "Twelfth pass"). Off, the record is out before the reply completes: code in
            another thread that waits for the reply then finds its record (:class:`ServerThread
            <switchyard.server.runner.ServerThread>`'s default).
    """

    def __init__(
        self,
        sy: Switchyard,
        *,
        max_body: int | None = None,
        settings: ServerConfig | None = None,
        records_after_reply: bool = True,
    ) -> None:
        self.switchyard = sy
        self.records_after_reply = records_after_reply
        loaded = getattr(sy, "loaded", None)
        if settings is None and loaded is not None:
            settings = loaded.config.server
        elif settings is None:
            from switchyard.config.server import ServerConfig  # no config: the defaults

            settings = ServerConfig()
        self.settings = settings
        self.max_body = max_body or self.settings.limits.max_body_bytes
        self.body_s = self.settings.client_timeouts.body_s
        self.write_s = self.settings.client_timeouts.write_s
        self.max_messages = self.settings.limits.max_messages
        keys = KeyRing(self.settings.api_keys, tenants=self.settings.tenants)
        budgets = None
        if limits := keys.limits():
            # Each record is booked to the key its request came with (DecisionRecord.caller),
            # whichever request is running when it is handed out (later.py).
            budgets = Budgets(sy.state_store, limits)
            sy.on_decision(budgets.record)
        self.gate = Gate(self.settings, keys, budgets)
        self.later = LaterRecords()
        self._budgets = budgets is not None  # a budget check reads the records: they go out first
        self.health_policy = HealthPolicy(bool(keys), self.settings.deep_health_interval_s)
        self.drain = Drain()
        self.metrics = _metrics(sy)
        self.dashboard = _dashboard(sy, self.settings, keys, self.gate)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Builds this loop's engine now, which starts background health probes
                # (health_check.interval_s) at boot rather than at the first request.
                _ = self.switchyard.engine
                if self.dashboard is not None and self.dashboard.fleet is not None:
                    self.dashboard.fleet.start()  # shares this replica's totals (a Redis store)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.later.flush()  # each record booked to its own request's key (DecisionRecord.caller)
                if self.gate.budgets is not None:
                    await self.gate.budgets.settle()  # before the store closes with the router
                if self.dashboard is not None and self.dashboard.fleet is not None:
                    await self.dashboard.fleet.stop()
                with contextlib.suppress(Exception):
                    await self.switchyard.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        later = self.later
        if later.pending:
            # A proxied call reads no record before it first waits; a view, the dashboard, a
            # budget check and a feedback report (matched against the records) do: theirs go out now.
            if scope["method"] == "POST" and not self._budgets and not scope["path"].rstrip("/").endswith("/feedback"):
                later.soon()
            else:
                later.flush()
        raw = scope["headers"]
        headers = header_fields(raw)
        path: str = scope["path"]
        bad_host = host_problem(raw, headers, scope.get("http_version", ""))
        if bad_host is not None:
            close = {"connection": "close"}
            await _write(
                send, error_reply(path, 400, bad_host, "invalid_request_error", code="invalid_host", headers=close)
            )
            return
        if self.dashboard is not None and is_dashboard_path(path):
            # Its own checks (same-origin only, admin key or loopback) and no CORS headers.
            page = self.dashboard.handle(
                scope["method"], path, scope.get("query_string") or b"", headers, scope.get("client")
            )
            await _write(send, page)
            return
        # Host, Origin, content type, API key and budget, on the headers alone (guard.py).
        admission = await self.gate.admit(scope["method"], path, headers)
        extra = admission.headers
        if admission.reply is not None:
            await _write(send, admission.reply, extra)
            return
        if path == OPENAPI_PATH and scope["method"] == "GET":
            from switchyard.server.openapi import openapi_reply

            await _write(send, openapi_reply(), extra)
            return
        task = asyncio.current_task()  # this request's: its deadlines cancel it
        assert task is not None
        body = await self._read_body(path, headers, receive, send, extra, task)
        if body is None:
            return
        strict.max_messages.set(self.max_messages)  # read by the decoders (wire/strict.py)
        # From here on the only message left to receive is ``http.disconnect``: watching for it
        # lets a caller that goes away cancel the work it started — the routing, the upstream
        # request of a JSON answer (its connection is closed) or the stream.
        watch = _disconnect_watch(scope, receive)
        ending = self.drain.enter()
        reply = None
        try:
            reply = await self._dispatch(scope, body, headers, watch, ending, task, admission.key)
            if reply is None:
                return
            extensions = scope.get("extensions") or {}
            flush = extensions.get(FLUSH_EXTENSION)
            if reply.stream is None:
                # One write past uvicorn's two ASGI sends when the connection offers it (whole_answer.py).
                respond = extensions.get(RESPOND_EXTENSION)
                if respond is None or not respond(reply.status, reply.headers, extra, reply.body):
                    await _write(send, reply, extra)
                self._send_now(flush)
                return
            await self._stream(
                reply,
                reply.stream,
                watch,
                send,
                ending,
                extra,
                connection_aborter(scope, send),
                flush,
                extensions.get(RESPOND_EXTENSION),
            )
        finally:
            # The record's sinks run once the caller has its answer, whatever happened to the
            # reply (its record is not lost), and off the path of the next request (later.py).
            later.keep(reply)
            self.drain.leave(ending)
            if isinstance(watch, asyncio.Task):
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    def _send_now(self, flush: Callable[[], None] | None) -> None:
        """Sends what this request's connection holds (``flush``, the scope's
        :data:`~switchyard.server.connections.FLUSH_EXTENSION`) right away while this request is
        the only one in flight: its head and body leave a loop turn sooner (~10 % lower latency
        at c=1 on ../shared/bench). While others are in flight the connection's ``TurnWriter``
        sends at the turn's end, so busy turns write in bursts (~10 % more requests/s at c=8)."""
        if flush is not None and self.drain.open_count() <= 1:
            flush()

    async def _read_body(
        self,
        path: str,
        headers: dict[str, str],
        receive: Receive,
        send: Send,
        extra: list[tuple[bytes, bytes]],
        task: asyncio.Task[Any] | None = None,
    ) -> bytes | None:
        """The whole body within ``client_timeouts.body_s`` and ``limits.max_body_bytes``;
        ``None`` when the caller left or was answered (413, 408)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _write(send, _too_large(path, self.max_body), extra)
            return None
        # The usual body came with its head: received at once, it needs no timer.
        done, first = step_once(receive())
        if done and first["type"] == "http.request" and not first.get("more_body", False):
            whole: bytes = first.get("body", b"")
            if len(whole) <= self.max_body:
                return whole
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            async with Deadline(self.body_s, task):
                while more:
                    if first is not None:
                        message = (await first) if not done else first
                        first = None
                    else:
                        message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        await _write(send, _too_large(path, self.max_body), extra)
                        return None
                    chunks.append(chunk)
                    more = message.get("more_body", False)
        except TimeoutError:
            # A body that trickles (or never comes) would hold the connection forever.
            slow = error_reply(
                path,
                408,
                f"request body not received within {self.body_s:g}s (server.client_timeouts.body_s)",
                "invalid_request_error",
                code="request_timeout",
                headers={"connection": "close"},
            )
            await _write(send, slow, extra)
            return None
        return b"".join(chunks)

    async def _dispatch(
        self,
        scope: Scope,
        body: bytes,
        headers: dict[str, str],
        watch: asyncio.Future[None],
        ending: asyncio.Future[None],
        task: asyncio.Task[Any],
        key: ApiKey | None = None,
    ) -> Reply | None:
        """The reply, or ``None`` when the caller disconnected first (the work is cancelled)."""
        path = scope["path"]
        method = scope["method"]
        if method in ("GET", "HEAD") and path.rstrip("/") in _VIEWS:
            view = await self._view(scope, key)
            if view is not None:
                return view
        query = scope.get("query_string") or b""
        if query:
            path = f"{path}?{query.decode('latin-1')}"
        # The work runs in this task (no task and no ``asyncio.wait`` per request); a disconnect
        # cancels this task while it is inside ``dispatch``, as cancelling a separate task would,
        # and so does the end of a shutdown's drain time.
        state = _Dispatch()

        def gone(_: asyncio.Future[None]) -> None:
            if not state.done and not state.cancelled and not watch.cancelled():
                state.cancelled = True
                task.cancel()

        def drained(_: asyncio.Future[None]) -> None:
            if not state.done and not state.cancelled and not ending.cancelled():
                state.cancelled = state.shutdown = True
                task.cancel(SHUTDOWN_CANCEL)

        watch.add_done_callback(gone)
        ending.add_done_callback(drained)
        try:
            hold = self.records_after_reply
            reply = await self.switchyard.dispatch(scope["method"], path, body, headers, hold_record=hold)
        except asyncio.CancelledError:
            if not state.cancelled:
                raise  # cancelled from outside: not ours to absorb
            task.uncancel()
            if state.shutdown:
                # Shutdown past its drain time: answer instead of leaving the caller hanging.
                logger.info("shutting down; ended %s %s with 503", scope["method"], printable(scope["path"]))
                info = shutdown_error()
                return error_reply(scope["path"], info.status, info.message, "api_error", code=info.code)
            logger.info("caller disconnected; cancelled %s %s", scope["method"], printable(scope["path"]))
            return None
        except Exception as exc:  # the engine turns known errors into replies; this is a bug
            logger.exception("unhandled error serving %s %s", scope["method"], printable(scope["path"]))
            # In the endpoint's own envelope, like every other error of the proxy.
            return error_reply(scope["path"], 500, f"internal error: {type(exc).__name__}", "api_error")
        finally:
            state.done = True
            watch.remove_done_callback(gone)
            ending.remove_done_callback(drained)
        if state.cancelled:
            task.uncancel()  # the work finished anyway
            if state.shutdown:
                return reply
            reply.released()
            return None  # the caller is gone
        return reply

    async def _view(self, scope: Scope, key: ApiKey | None) -> Reply | None:
        """``/health``, ``/v1/stats`` and ``/metrics`` as this caller may see them (views.py);
        ``None``: the engine answers as usual."""
        path = scope["path"].rstrip("/")
        policy = self.health_policy
        operator = policy.operator(key, scope.get("client"))
        if path in ("/health", "/v1/health"):
            query = (scope.get("query_string") or b"").decode("latin-1")
            skipped = None
            deep = wants_deep(query)
            if deep and not policy.may_probe(key, operator):
                deep = False
                if policy.keyed:
                    skipped = "not probed: deep checks need an admin key"
                elif not operator:
                    skipped = "not probed: deep checks are for callers on this machine (or set api_keys)"
                else:
                    skipped = (
                        f"not probed: the last round ran under {policy.interval_s:g}s ago "
                        "(server.deep_health_interval_s); these are its results"
                    )
            report = await self.switchyard.health(deep=deep)
            # Always 200 while the router runs: a liveness check must not restart it.
            return Reply(200, {"content-type": "application/json"}, body=dumps(health_view(report, operator, skipped)))
        if policy.keyed and not operator:
            # Every route's spend and every key's session ids: the operator's alone.
            message = f"{path} needs an admin key (server.api_keys[].admin)"
            return error_reply(path, 403, message, "permission_error", code="admin_key_required")
        if path == "/metrics" and self.metrics is not None:
            return Reply(200, {"content-type": METRICS_CONTENT_TYPE}, body=self.metrics.render())
        return None

    async def _stream(
        self,
        reply: Reply,
        chunks: AsyncIterator[bytes],
        watch: asyncio.Future[None],
        send: Send,
        ending: asyncio.Future[None],
        extra: list[tuple[bytes, bytes]],
        abort: Callable[[], None] | None = None,
        flush: Callable[[], None] | None = None,
        respond: Callable[..., bool] | None = None,
    ) -> None:
        start = {"type": "http.response.start", "status": reply.status, "headers": _headers(reply) + extra}
        loop = asyncio.get_running_loop()
        state = WriterState(last=loop.time())
        write = deadline_send(send, self.write_s, state, abort)
        stop = _Interrupt(asyncio.current_task())
        watch.add_done_callback(stop.gone)  # the caller went away: stop reading the upstream
        ending.add_done_callback(stop.shutdown)  # past the drain time: end the stream with an error
        ticker = None
        if reply.keepalive and reply.keepalive_s:
            ticker = Pinger(write, state, reply.keepalive, reply.keepalive_s, loop)
        closing = b""

        def ended() -> None:
            # Kept now, before the clean-up below may wait: a caller that reads the end and sends
            # its next request on this connection is admitted after this record is kept, so a
            # budget check books it first (later.py). Sent out after ``_http``'s.
            self.later.keep(reply)
            self._send_now(flush)

        # The head and the first bytes in one write (whole_answer.py), where the connection offers it.
        opener = None if respond is None else partial(respond, reply.status, reply.headers, extra, stream=True)
        try:
            await relay(chunks, start, send, write, state, ended, opener)
        except asyncio.CancelledError:
            if stop.why is None:
                raise  # not this stream's own interruption
            stop.task.uncancel()  # type: ignore[union-attr]
            if stop.why == "shutdown" and not state.stalled and reply.abort is not None:
                # Shutdown past its drain time: the stream ends with an error event in its API's
                # format (recorded as interrupted) instead of being cut by the process exit.
                closing = reply.abort(shutdown_error())
        except Stalled:
            pass  # the caller stopped reading: its connection is dropped
        except Exception as exc:  # the stream broke: the caller sees no clean end of the body
            logger.error("stream failed: %r", exc)
        finally:
            stop.over = True  # from here on, nothing interrupts
            state.done = True  # no ping from here on
            watch.remove_done_callback(stop.gone)
            ending.remove_done_callback(stop.shutdown)
            if ticker is not None:
                await ticker.aclose()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            if closing:
                with contextlib.suppress(Exception):
                    if not state.started:
                        await send(start)
                    await send({"type": "http.response.body", "body": closing, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Interrupt:
    """Why a stream's task was cancelled, when the cancel was the stream's own: its caller went
    away (``gone``) or the shutdown's drain time ended (``shutdown``). The task is cancelled only
    while the stream is being relayed (not ``over``), so the cancellation reaches it there."""

    __slots__ = ("over", "task", "why")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.why: str | None = None
        self.over = False

    def _cancel(self, why: str) -> None:
        if self.over or self.why is not None or self.task is None:
            return
        self.why = why
        self.task.cancel()

    def gone(self, _: asyncio.Future[None]) -> None:
        self._cancel("gone")

    def shutdown(self, _: asyncio.Future[None]) -> None:
        self._cancel("shutdown")


class _Dispatch:
    """Whether dispatching has ended, and whether a disconnect (or a shutdown's end of
    drain time, ``shutdown``) cancelled it."""

    __slots__ = ("cancelled", "done", "shutdown")

    def __init__(self) -> None:
        self.done = False
        self.cancelled = False
        self.shutdown = False


def connection_aborter(scope: Scope, send: Send) -> Callable[[], None] | None:
    """How to drop this request's connection at once: the scope's :data:`ABORT_EXTENSION`
    (set by :class:`~switchyard.server.access_log.AccessLog`, which wraps ``send``), or the
    transport of uvicorn's own ``send`` (a bound method of its request cycle). A graceful close
    would wait forever for a caller that reads nothing to take the queued bytes."""
    found = (scope.get("extensions") or {}).get(ABORT_EXTENSION)
    if callable(found):
        return found  # type: ignore[no-any-return]
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    abort = getattr(transport, "abort", None)
    return abort if callable(abort) else None


def _disconnect_watch(scope: Scope, receive: Receive) -> asyncio.Future[None]:
    """A future done when the caller disconnects: the connection's own (the guarded protocol's
    :data:`~switchyard.server.connections.DISCONNECT_EXTENSION`), else a task waiting on
    ``receive`` for ``http.disconnect`` (other servers, the h11 protocol)."""
    found = (scope.get("extensions") or {}).get(DISCONNECT_EXTENSION)
    if isinstance(found, asyncio.Future):
        return found
    return asyncio.ensure_future(_disconnected(receive))


async def _disconnected(receive: Receive) -> None:
    """Returns when the caller disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]


async def _write(send: Send, reply: Reply, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = _headers(reply)
    if extra:
        headers.extend(extra)
    headers.append((b"content-length", str(len(reply.body)).encode()))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})


def _too_large(path: str, limit: int) -> Reply:
    """413 in the endpoint's own error shape (Anthropic's on ``/v1/messages`` and ``count_tokens``)."""
    message = f"request body exceeds {limit} bytes (server.limits.max_body_bytes)"
    return error_reply(path, 413, message, "request_too_large", code="request_too_large")


def _metrics(sy: Switchyard) -> DeferredMetrics | None:
    """Prometheus metrics for ``GET /metrics`` when prometheus_client is installed."""
    if not hasattr(sy, "on_decision"):  # a stand-in object (tests) has no decision records to count
        return None
    try:
        return DeferredMetrics(sy)
    except ImportError:
        logger.info("GET /metrics is off: pip install 'switchyard-router[metrics]' for Prometheus metrics")
        return None


def _dashboard(sy: Switchyard, settings: ServerConfig, keys: KeyRing, gate: Gate) -> DashboardHttp | None:
    """The built-in dashboard when ``server.dashboard.enabled`` (and ``sy`` is a real router)."""
    if not settings.dashboard.enabled or not hasattr(sy, "on_decision"):
        return None
    from switchyard.server.dashboard import for_switchyard

    return for_switchyard(sy, settings, keys, gate.host_allowed)


def create_app(sy: Switchyard, *, records_after_reply: bool = True) -> SwitchyardApp:
    """The ASGI app for ``sy`` (``records_after_reply``: see :class:`SwitchyardApp`)."""
    return SwitchyardApp(sy, records_after_reply=records_after_reply)
