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
from typing import Any

from switchyard.api import Switchyard
from switchyard.config.server import ServerConfig
from switchyard.engine.reply import SHUTDOWN_CANCEL, Reply
from switchyard.protocol.errors import ErrorInfo
from switchyard.server.auth import Budgets, KeyRing, current_key
from switchyard.server.drain import SHUTDOWN_ERROR, Drain
from switchyard.server.guard import Gate, error_reply
from switchyard.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from switchyard.server.metrics import Metrics, for_switchyard
from switchyard.server.openapi import OPENAPI_PATH, openapi_reply
from switchyard.wire import codec as get_codec
from switchyard.wire import strict
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps

logger = logging.getLogger("switchyard.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 32 * 1024 * 1024
"""Default of ``server.limits.max_body_bytes``."""


class SwitchyardApp:
    """ASGI app serving a :class:`Switchyard`.

    Args:
        sy: The router to serve.
        max_body: Largest request body accepted, in bytes (413 above); default
            ``server.limits.max_body_bytes``.
        settings: The ``server:`` section (default: the one in ``sy``'s config).
    """

    def __init__(self, sy: Switchyard, *, max_body: int | None = None, settings: ServerConfig | None = None) -> None:
        self.switchyard = sy
        loaded = getattr(sy, "loaded", None)
        self.settings = settings or (loaded.config.server if loaded is not None else ServerConfig())
        self.max_body = max_body or self.settings.limits.max_body_bytes
        self.body_s = self.settings.client_timeouts.body_s
        self.max_messages = self.settings.limits.max_messages
        keys = KeyRing(self.settings.api_keys)
        budgets = None
        if any(k.budget_usd_per_day is not None for k in self.settings.api_keys):
            budgets = Budgets(sy.state_store)
        if keys:
            sy.on_decision(budgets.record if budgets is not None else _no_budget)
        self.gate = Gate(self.settings, keys, budgets)
        self.drain = Drain()
        self.metrics = _metrics(sy)

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
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                with contextlib.suppress(Exception):
                    await self.switchyard.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path: str = scope["path"]
        # Host, Origin, content type, API key and budget, on the headers alone (guard.py).
        admission = await self.gate.admit(scope["method"], path, headers)
        extra = admission.headers
        if admission.reply is not None:
            await _write(send, admission.reply, extra)
            return
        if path == OPENAPI_PATH and scope["method"] == "GET":
            await _write(send, openapi_reply(), extra)
            return
        body = await self._read_body(path, headers, receive, send, extra)
        if body is None:
            return
        strict.max_messages.set(self.max_messages)  # read by the decoders (wire/strict.py)
        # From here on the only message left to receive is ``http.disconnect``: watching for it
        # lets a caller that goes away cancel the work it started — the routing, the upstream
        # request of a JSON answer (its connection is closed) or the stream.
        watch = asyncio.ensure_future(_disconnected(receive))
        ending = self.drain.enter()
        try:
            reply = await self._dispatch(scope, body, headers, watch, ending)
            if reply is None:
                return
            if reply.stream is None:
                await _write(send, reply, extra)
                return
            await self._stream(reply, reply.stream, watch, send, ending, extra)
        finally:
            self.drain.leave(ending)
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _read_body(
        self, path: str, headers: dict[str, str], receive: Receive, send: Send, extra: list[tuple[bytes, bytes]]
    ) -> bytes | None:
        """The whole body within ``client_timeouts.body_s`` and ``limits.max_body_bytes``;
        ``None`` when the caller left or was answered (413, 408)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _write(send, _too_large(path, self.max_body), extra)
            return None
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            async with asyncio.timeout(self.body_s):
                while more:
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
    ) -> Reply | None:
        """The reply, or ``None`` when the caller disconnected first (the work is cancelled)."""
        path = scope["path"]
        if path == "/metrics" and self.metrics is not None and scope["method"] in ("GET", "HEAD"):
            return Reply(200, {"content-type": METRICS_CONTENT_TYPE}, body=self.metrics.render())
        query = scope.get("query_string") or b""
        if query:
            path = f"{path}?{query.decode('latin-1')}"
        work = asyncio.ensure_future(self.switchyard.dispatch(scope["method"], path, body, headers))
        await asyncio.wait((work, watch, ending), return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            shutting_down = ending.done() and not watch.done()
            work.cancel(SHUTDOWN_CANCEL if shutting_down else None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            if shutting_down:
                # Shutdown past its drain time: answer instead of leaving the caller hanging.
                logger.info("shutting down; ended %s %s with 503", scope["method"], scope["path"])
                info = SHUTDOWN_ERROR
                return error_reply(scope["path"], info.status, info.message, "api_error", code=info.code)
            logger.info("caller disconnected; cancelled %s %s", scope["method"], scope["path"])
            return None
        try:
            return work.result()
        except Exception as exc:  # the engine turns known errors into replies; this is a bug
            logger.exception("unhandled error serving %s %s", scope["method"], scope["path"])
            info = ErrorInfo(status=500, type="api_error", message=f"internal error: {type(exc).__name__}")
            codec = get_codec(WireFormat.OPENAI_CHAT)
            return Reply(500, {"content-type": "application/json"}, body=dumps(codec.encode_error(info)))

    async def _stream(
        self,
        reply: Reply,
        chunks: AsyncIterator[bytes],
        watch: asyncio.Future[None],
        send: Send,
        ending: asyncio.Future[None],
        extra: list[tuple[bytes, bytes]],
    ) -> None:
        await send({"type": "http.response.start", "status": reply.status, "headers": _headers(reply) + extra})
        loop = asyncio.get_running_loop()
        state = _Writer(last=loop.time())

        async def pump() -> None:
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                state.last = loop.time()
            state.done = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        pump_task = asyncio.ensure_future(pump())
        tasks: set[asyncio.Future[None]] = {pump_task, watch, ending}
        ticker = None
        if reply.keepalive and reply.keepalive_s:
            ticker = asyncio.ensure_future(_keepalive(send, state, reply.keepalive, reply.keepalive_s, loop))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            state.done = True
            if ticker is not None:
                ticker.cancel()
            closing = b""
            if not pump_task.done() and ending.done() and not watch.done() and reply.abort is not None:
                # Shutdown past its drain time: the stream ends with an error event in its API's
                # format (recorded as interrupted) instead of being cut by the process exit.
                closing = reply.abort(SHUTDOWN_ERROR)
            if not pump_task.done():
                # The caller went away: stop reading upstream (closing the stream cancels it).
                pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump_task
            if ticker is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await ticker
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            if closing:
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": closing, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        if pump_task.done() and not pump_task.cancelled() and pump_task.exception() is not None:
            logger.error("stream failed: %r", pump_task.exception())


class _Writer:
    """When the stream last wrote, and whether it has ended (shared by the pump and the ticker)."""

    __slots__ = ("done", "last")

    def __init__(self, last: float) -> None:
        self.last = last
        self.done = False


async def _keepalive(send: Send, state: _Writer, ping: bytes, interval: float, loop: asyncio.AbstractEventLoop) -> None:
    """Writes ``ping`` whenever the stream has been silent for ``interval`` seconds.

    One timer per silence, not one per event: the pump only stamps ``state.last``. Every write is
    one whole SSE event, so a ping never lands inside another event.
    """
    while not state.done:
        wait = state.last + interval - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
            continue
        await send({"type": "http.response.body", "body": ping, "more_body": True})
        state.last = loop.time()


async def _disconnected(receive: Receive) -> None:
    """Returns when the caller disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]


def _no_budget(record: Any) -> None:
    """Decision-record callback when keys have no budgets: names the key in the record."""
    key = current_key.get()
    if key is not None:
        record.details["api_key"] = key.name


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


def _metrics(sy: Switchyard) -> Metrics | None:
    """Prometheus metrics for ``GET /metrics`` when prometheus_client is installed."""
    if not hasattr(sy, "on_decision"):  # a stand-in object (tests) has no decision records to count
        return None
    try:
        return for_switchyard(sy)
    except ImportError:
        logger.info("GET /metrics is off: pip install 'switchyard-router[metrics]' for Prometheus metrics")
        return None


def create_app(sy: Switchyard) -> SwitchyardApp:
    """The ASGI app for ``sy``."""
    return SwitchyardApp(sy)
