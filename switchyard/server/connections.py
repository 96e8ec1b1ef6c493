"""Slow, surplus and oversized clients at the connection level: a header deadline, header-size
caps and a connection cap.

Layer: ``server``. Needs uvicorn (the ``server`` extra).

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but never one that is still
sending its request headers: a client that connects and trickles a header byte every few
seconds (slowloris) holds a connection, a task slot and a file descriptor for as long as it
likes. It also accepts every connection it is offered. :func:`guarded_protocol` subclasses
uvicorn's HTTP protocol (httptools or h11, whichever uvicorn would pick) with:

* a header deadline — armed when a connection opens and when the first byte of a next request
  arrives on a kept-alive connection, disarmed once the request's headers are complete (the
  moment uvicorn builds its request cycle); when it fires the connection is closed;
* a cap on open connections — a connection beyond ``max_connections`` is answered 503 and
  closed at once, before it is read;
* header-size caps — httptools keeps a header field's partial bytes until the field ends, so an
  8 MiB field line (or 20,000 fields) would be held whole before the app ever saw the request.
  The bytes of a request head are counted *before* they are fed to the parser: a line over
  ``max_header_bytes``, more than ``max_header_fields`` fields, or a head over four lines' worth
  is answered 431 (RFC 6585 §5) and the connection closed. What is held is bounded by the cap
  plus one socket read. (With h11 instead of httptools only the first request of a connection
  is metered; h11 caps later heads itself at 16 KiB.)
* a gentler close of idle keep-alive connections at shutdown — uvicorn closes them at once,
  and a client whose next request is already on its way then sees the connection close with no
  answer (a POST it may not retry). Instead such a connection stays open for
  :data:`IDLE_CLOSE_GRACE_S`: a request that arrives meanwhile is answered with
  ``connection: close``; one that stays silent is closed after it. This is what lets
  ``serve --workers`` reload under load without failed requests (benchmarks/workers_reload.py).

The body deadline is the ASGI app's (:mod:`switchyard.server.app`), where the body is read.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from switchyard.server.whole_answer import RESPOND_EXTENSION, respond

logger = logging.getLogger("switchyard.server")

FLUSH_EXTENSION = "switchyard.flush"
"""Scope extension set by the guarded httptools protocol: sends what the connection's
:class:`TurnWriter` holds now (the app calls it once an answer is written whole, so the bytes
leave in this loop turn rather than the next)."""

DISCONNECT_EXTENSION = "switchyard.disconnected"
"""Scope extension set by the guarded httptools protocol: a future resolved when the request's
connection is lost (the app's disconnect watch, see ``server/app.py``)."""

IDLE_CLOSE_GRACE_S = 1.0
"""At shutdown, how long an idle keep-alive connection stays open for a request in flight."""

_BUSY_BODY = (
    b'{"error":{"message":"too many open connections to this proxy '
    b'(server.client_timeouts.max_connections); retry shortly","type":"api_error","code":"too_many_connections"}}'
)
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY
)


_TOO_LARGE_OPENAI = (
    b'{"error":{"message":"request header fields too large (server.limits.max_header_bytes, '
    b'max_header_fields)","type":"invalid_request_error","code":"request_header_fields_too_large"}}'
)
_TOO_LARGE_ANTHROPIC = (
    b'{"type":"error","error":{"type":"invalid_request_error","message":"request header fields too large '
    b'(server.limits.max_header_bytes, max_header_fields)"}}'
)


def _too_large(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


HEADERS_TOO_LARGE = _too_large(_TOO_LARGE_OPENAI)
"""The 431 answer (OpenAI's error shape)."""
HEADERS_TOO_LARGE_ANTHROPIC = _too_large(_TOO_LARGE_ANTHROPIC)
"""The 431 answer for a request line naming ``/v1/messages`` (Anthropic's error shape)."""

MAX_HEADER_BYTES = 16 * 1024
"""Default of ``server.limits.max_header_bytes`` (one request or field line)."""
MAX_HEADER_FIELDS = 100
"""Default of ``server.limits.max_header_fields``."""
HEAD_LINES = 4
"""A whole request head may hold this many ``max_header_bytes`` (nginx allows 4 buffers of 8 KiB)."""


class HeadMeter:
    """Counts one request head's lines as its bytes arrive, before the parser keeps them.

    Args:
        max_line: Longest request line or field line, in bytes (CRLF included).
        max_fields: Most header fields.

    ``feed`` returns ``True`` once a cap is passed; the meter stops counting at the blank line
    that ends the head (the body is not its business) until :meth:`restart` is called.
    """

    __slots__ = ("active", "cr", "fields", "line", "max_fields", "max_line", "max_total", "total")

    def __init__(self, max_line: int, max_fields: int) -> None:
        self.max_line = max_line
        self.max_fields = max_fields
        self.max_total = max_line * HEAD_LINES
        self.active = True
        self.line = 0  # bytes of the line not yet ended
        self.cr = False  # whether those bytes end with CR
        self.fields = 0  # lines ended, the request line included
        self.total = 0

    def restart(self) -> None:
        """A next request's head begins."""
        self.active = True
        self.line = self.fields = self.total = 0
        self.cr = False

    def feed(self, data: bytes) -> bool:
        """Counts ``data``; ``True`` when the head is over a cap."""
        if not self.fields and not self.line:
            # The usual case, in O(1) Python steps: the whole head in one read, shorter than one line.
            end = data.find(b"\r\n\r\n", 0, self.max_line + 4)
            if end > 0:
                self.active = False
                return data.count(b"\n", 0, end) > self.max_fields
        pos = 0
        size = len(data)
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                if size > pos:
                    self.line += size - pos
                    self.cr = data[size - 1] == 13
                self.total += size
                return self.line > self.max_line or self.total > self.max_total
            length = self.line + nl - pos
            cr = data[nl - 1] == 13 if nl > pos else self.cr
            self.line = 0
            self.cr = False
            if length - cr <= 0:
                if self.fields:  # the blank line: the head is complete
                    self.active = False
                    self.total += nl + 1
                    return self.total > self.max_total
                # A blank line before the request line is tolerated (RFC 9112 §2.2).
            else:
                self.fields += 1
                if length + 1 > self.max_line or self.fields - 1 > self.max_fields:
                    return True
            pos = nl + 1


def _metered(proto: Any, data: bytes) -> bool:
    """Counts ``data`` against the head caps of a guarded protocol; ``False``: refuse (431)."""
    head: HeadMeter = proto._sy_head
    if not head.active and (proto._sy_between or proto._sy_parsing_head):
        head.restart()  # a next request on a kept-alive (or pipelining) connection
        proto._sy_first = b""
        proto._sy_between = False
    if not head.active:
        return True
    if len(proto._sy_first) < 32:
        proto._sy_first += data[:32]  # the request line's start: which API's error shape
    return not head.feed(data)


def _base_protocol() -> Any:
    """The HTTP protocol class uvicorn's ``http="auto"`` would use."""
    try:
        import httptools  # noqa: F401
    except ImportError:  # pragma: no cover - httptools ships with the server extra
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return HttpToolsProtocol


# A base typed as Any: the mixin's super() calls reach the uvicorn protocol it is mixed into.
_ProtocolBase: Any = object


class _GentleClose(_ProtocolBase):  # type: ignore[misc]
    """Shutdown without cutting a keep-alive client's next request (see the module docstring)."""

    _sy_closing: asyncio.TimerHandle | None = None
    _sy_timer: asyncio.TimerHandle | None = None
    _sy_drain_after = False

    def shutdown(self) -> None:
        cycle = self.cycle
        if self.transport.is_closing():
            return
        if cycle is None or cycle.response_complete:
            self._sy_idle_grace()
        elif cycle.response_started:
            # Its headers promised keep-alive, so the client will send its next request here:
            # close only after a grace that answers it with connection: close.
            self._sy_drain_after = True
        else:
            super().shutdown()  # the answer's headers will say connection: close

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._sy_drain_after and not self.transport.is_closing():
            self._sy_drain_after = False
            self._sy_idle_grace()

    def _sy_headers_done(self) -> None:
        """A request's headers are complete: the app now owns its deadlines (the header timer
        stops), and during a shutdown grace the request is answered with connection: close."""
        if self._sy_timer is not None:
            self._sy_timer.cancel()
            self._sy_timer = None
        if self._sy_closing is not None:
            self._sy_answer_then_close()

    def _sy_answer_then_close(self) -> None:
        """A request arrived during the grace: answer it with connection: close."""
        if self._sy_closing is not None:
            self._sy_closing.cancel()
            self._sy_closing = None
        self.cycle.keep_alive = False

    def _sy_idle_grace(self) -> None:
        if self._sy_closing is None:
            self._sy_closing = self.loop.call_later(IDLE_CLOSE_GRACE_S, self._sy_close_idle)

    def _sy_close_idle(self) -> None:
        self._sy_closing = None
        if not self.transport.is_closing():
            super().shutdown()

    def _sy_forget(self) -> None:
        if self._sy_closing is not None:
            self._sy_closing.cancel()
            self._sy_closing = None


_COPY_BELOW = 4096
"""A turn's writes are joined when the last is shorter: copying small pieces costs less than the
vectored send's bookkeeping (callgrind, per request: a 1 KiB JSON answer +0.3 % instructions
with ``writelines``, a 50-event stream's 11 KiB body -0.7 %)."""


class TurnWriter:
    """A connection's transport that sends what one event-loop turn wrote in one ``write``.

    uvicorn writes a response's head and its body separately: two sends on the socket (two
    system calls, two TCP segments for the caller to read) for every JSON answer. Bytes written
    in one turn are joined and sent at its end; ``close`` sends what is pending first, ``abort``
    drops it. Everything else is the transport's own.
    """

    __slots__ = ("_loop", "_pending", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        """Queues ``data`` for the end of this loop turn."""
        pending = self._pending
        if pending is None:
            self._pending = [data]
            self._loop.call_soon(self.flush)
        else:
            pending.append(data)

    def flush(self) -> None:
        """Sends what is pending now."""
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        if not self.transport.is_closing():
            if len(pending) == 1:
                self.transport.write(pending[0])
            elif len(pending[-1]) < _COPY_BELOW:
                self.transport.write(b"".join(pending))
            else:  # a stream's head and a large body: one vectored send, the body not copied first
                self.transport.writelines(pending)

    def close(self) -> None:
        """Sends what is pending, then closes the transport (its buffered bytes still leave)."""
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        """Drops the connection at once, pending bytes included."""
        self._pending = None
        self.transport.abort()

    def is_closing(self) -> bool:
        """Whether the transport is closing or closed."""
        return self.transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class _DisconnectSignal(_ProtocolBase):  # type: ignore[misc]
    """Each request's scope extensions: its "caller went away" future
    (:data:`DISCONNECT_EXTENSION`), resolved when the connection is lost, so the app needs no
    task per request waiting on ``receive()`` for ``http.disconnect``; the connection's flush
    (:data:`FLUSH_EXTENSION`); and, on httptools' protocol, the whole-answer write
    (:data:`~switchyard.server.whole_answer.RESPOND_EXTENSION`)."""

    _sy_gone: asyncio.Future[None] | None = None
    _sy_whole = False  # whether the request cycles are httptools' (whole_answer.respond)

    def _sy_watch(self) -> None:
        gone = self._sy_gone = self.loop.create_future()
        cycle = self.cycle
        scope = cycle.scope
        extensions = scope.get("extensions")
        if extensions is None:
            extensions = scope["extensions"] = {}
        extensions[DISCONNECT_EXTENSION] = gone
        if self._sy_whole:
            extensions[RESPOND_EXTENSION] = partial(respond, cycle)
        flush = getattr(self.transport, "flush", None)
        if flush is not None:
            extensions[FLUSH_EXTENSION] = flush

    def _sy_lost(self) -> None:
        gone = self._sy_gone
        if gone is not None and not gone.done():
            gone.set_result(None)


def guarded_protocol(
    header_s: float,
    max_connections: int,
    base: Any = None,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_header_fields: int = MAX_HEADER_FIELDS,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a header deadline, header-size caps and a connection cap.

    Args:
        header_s: Seconds a connection has to complete its request headers.
        max_connections: Open connections allowed at once.
        base: The uvicorn protocol class to extend (default: what ``http="auto"`` picks).
        max_header_bytes: Longest request line or header field line (431 above).
        max_header_fields: Most header fields in one request (431 above).
    """
    parent = base or _base_protocol()
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        whole = issubclass(parent, HttpToolsProtocol)
    except ImportError:  # pragma: no cover - httptools ships with the server extra
        whole = False

    class GuardedProtocol(_GentleClose, _DisconnectSignal, parent):  # type: ignore[misc,valid-type]
        _sy_timer: asyncio.TimerHandle | None = None
        _sy_whole = whole

        def connection_made(self, transport: asyncio.Transport) -> None:
            self._sy_head = HeadMeter(max_header_bytes, max_header_fields)
            self._sy_first = b""
            # Where the parser is (httptools' callbacks): between two messages, or inside a head
            # that began in bytes already fed. Only then do the next bytes belong to a head — not
            # the rest of a body that arrives after an early answer (401, 413).
            self._sy_between = False
            self._sy_parsing_head = False
            super().connection_made(TurnWriter(transport, self.loop))
            if len(self.connections) > max_connections:
                logger.warning("refused a connection: %d open (max_connections)", len(self.connections) - 1)
                transport.write(BUSY_RESPONSE)
                transport.close()
                return
            self._sy_arm()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            between = cycle is None or cycle.response_complete
            if not _metered(self, data):
                self._sy_refuse()
                return
            super().data_received(data)
            if self.cycle is not cycle:
                self._sy_headers_done()
            elif between and self._sy_timer is None and not self.transport.is_closing():
                # The first bytes of a next request on a kept-alive connection, its head not yet
                # complete: its deadline starts now. (A head that arrived whole, the usual case,
                # needs no timer at all.)
                self._sy_arm()

        def on_message_begin(self) -> None:
            self._sy_between = False
            self._sy_parsing_head = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._sy_parsing_head = False
            super().on_headers_complete()
            self._sy_watch()

        def on_message_complete(self) -> None:
            self._sy_between = True
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._sy_timer is not None:
                self._sy_timer.cancel()
                self._sy_timer = None
            self._sy_forget()
            super().connection_lost(exc)
            self._sy_lost()

        def _sy_refuse(self) -> None:
            logger.warning("refused a request from %s: header fields too large (431)", self.client)
            anthropic = b" /v1/messages" in self._sy_first or b" /messages" in self._sy_first
            self.transport.write(HEADERS_TOO_LARGE_ANTHROPIC if anthropic else HEADERS_TOO_LARGE)
            self.transport.close()
            if self._sy_timer is not None:
                self._sy_timer.cancel()
                self._sy_timer = None

        def _sy_arm(self) -> None:
            self._sy_timer = self.loop.call_later(header_s, self._sy_expired)

        def _sy_expired(self) -> None:
            self._sy_timer = None
            if not self.transport.is_closing():
                logger.info(
                    "closed a connection from %s: request headers not complete within %gs", self.client, header_s
                )
                self.transport.close()

    return GuardedProtocol
