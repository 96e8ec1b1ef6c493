"""Bounded graceful shutdown: open requests get ``drain_s``, then each is ended explicitly.

Layer: ``server``.

On SIGTERM uvicorn stops accepting and waits for open requests. Alone it waits as long as they
run (a stream may run for the upstream's whole ``total``), and an orchestrator's SIGKILL then
cuts streams with no error event. :class:`Drain` bounds that: ``drain_s`` after shutdown began,
every request still open is told to end — a stream writes an error event in its API's format
(recorded with status 503, ``details.interrupted``), a request still waiting for its answer is
answered 503 — so the process exits well before the orchestrator's grace period ends.
"""

from __future__ import annotations

import asyncio
import logging
from functools import cache
from typing import TYPE_CHECKING

from switchyard.engine.reply import SHUTDOWN_CANCEL

if TYPE_CHECKING:
    from switchyard.protocol.errors import ErrorInfo

logger = logging.getLogger("switchyard.server")


@cache
def shutdown_error() -> ErrorInfo:
    """What a request cut short by shutdown is told (and recorded with).

    Built on first use: building a pydantic model at import would build its validator (and make
    pydantic look for plugins) in every process that imports the server, shutdown or not.
    """
    from switchyard.protocol.errors import ErrorInfo

    return ErrorInfo(
        status=503,
        type="api_error",
        code=SHUTDOWN_CANCEL,
        message="the proxy is shutting down and ended this request after its drain time; retry it",
    )


class Drain:
    """The requests in flight, and the signal that ends them."""

    def __init__(self) -> None:
        self._open: set[asyncio.Future[None]] = set()

    def enter(self) -> asyncio.Future[None]:
        """A future that completes when this request must end (call :meth:`leave` after)."""
        signal: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._open.add(signal)
        return signal

    def open_count(self) -> int:
        """Requests in flight now."""
        return len(self._open)

    def leave(self, signal: asyncio.Future[None]) -> None:
        """Forgets a finished request."""
        self._open.discard(signal)
        if not signal.done():
            signal.cancel()

    def end_all(self) -> int:
        """Tells every open request to end now; returns how many were told."""
        told = 0
        for signal in list(self._open):
            if not signal.done():
                signal.set_result(None)
                told += 1
        if told:
            logger.warning("drain time over: ending %d open request(s) with an error", told)
        return told
