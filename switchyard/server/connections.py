"""Slow and surplus clients at the connection level: a header deadline and a connection cap.

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
from typing import Any

logger = logging.getLogger("switchyard.server")

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


def guarded_protocol(header_s: float, max_connections: int, base: Any = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a header deadline and a connection cap.

    Args:
        header_s: Seconds a connection has to complete its request headers.
        max_connections: Open connections allowed at once.
        base: The uvicorn protocol class to extend (default: what ``http="auto"`` picks).
    """
    parent = base or _base_protocol()

    class GuardedProtocol(_GentleClose, parent):  # type: ignore[misc,valid-type]
        _sy_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                logger.warning("refused a connection: %d open (max_connections)", len(self.connections) - 1)
                transport.write(BUSY_RESPONSE)
                transport.close()
                return
            self._sy_arm()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            if self._sy_timer is None and (cycle is None or cycle.response_complete):
                self._sy_arm()  # the first byte of a next request on a kept-alive connection
            super().data_received(data)
            if self.cycle is not cycle:
                if self._sy_timer is not None:
                    self._sy_timer.cancel()  # headers complete: the app now owns the deadlines
                    self._sy_timer = None
                if self._sy_closing is not None:
                    self._sy_answer_then_close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._sy_timer is not None:
                self._sy_timer.cancel()
                self._sy_timer = None
            self._sy_forget()
            super().connection_lost(exc)

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
