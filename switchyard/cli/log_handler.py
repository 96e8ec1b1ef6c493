"""The CLI's log handler: every line formatted when it is logged, written together shortly after.

Layer: ``cli``. ``switchyard serve`` logs one decision line per request; with the standard
``StreamHandler`` each of those is its own ``write`` and ``flush``, which was about a sixth of
the proxy's CPU per JSON request on ``../shared/bench`` (docs/benchmarks.md). Here lines logged
from inside a running event loop are kept for :data:`LINGER_S` (or until the end of the loop
turn, with ``linger_s=0``) and then written together: at 4,000 requests a second that is one
write per 200 lines instead of one per few. Lines from anywhere else (another thread, start-up,
shutdown) are written at once, after whatever is still pending, so the order is kept.
``logging.shutdown`` (at interpreter exit) flushes what is left; a process killed with
``SIGKILL`` loses at most the lines of its last :data:`LINGER_S`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TextIO

MAX_PENDING = 64 * 1024
"""Characters kept before a write even while lingering (a burst that logs a lot)."""

LINGER_S = 0.05
"""Longest a line logged inside the event loop waits for others to be written with it."""


class Formatter(logging.Formatter):
    """``logging.Formatter`` whose default ``asctime`` is computed once per second, not per line.

    The text is what the standard formatter writes (``2026-12-02 05:46:25,182``).
    """

    def __init__(self, fmt: str | None = None) -> None:
        super().__init__(fmt)
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The record's time as ``YYYY-MM-DD HH:MM:SS,mmm`` in local time (or ``datefmt``)."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, record.msecs)

    def stamp(self, created: float, msecs: float | None = None) -> str:
        """``created`` (a ``time.time()`` value) as the default ``asctime`` text."""
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(created))  # default_time_format
            self._second = second
        if msecs is None:
            msecs = (created - second) * 1000
        return f"{self._stamp},{int(msecs):03d}"  # the default_msec_format "%s,%03d"


FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The CLI's line format."""


class TurnBatchingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` that writes the lines logged inside an event loop together.

    Args:
        stream: Where lines go (default ``sys.stderr``, as ``StreamHandler``).
        max_pending: Characters kept before an early write.
        linger_s: How long the first pending line waits for others (0: to the end of its loop
            turn).
    """

    def __init__(
        self, stream: TextIO | None = None, max_pending: int = MAX_PENDING, linger_s: float = LINGER_S
    ) -> None:
        super().__init__(stream)
        self.max_pending = max_pending
        self.linger_s = linger_s
        self._pending: list[str] = []
        self._size = 0
        self._scheduled: asyncio.AbstractEventLoop | None = None  # the loop a write is due in

    def emit(self, record: logging.LogRecord) -> None:
        """Formats ``record`` now; writes it with the lines that follow within ``linger_s`` (now, outside a loop).

        ``Handler.handle`` holds the handler's lock around this call.
        """
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._queue(line, loop, record)

    def _queue(self, line: str, loop: asyncio.AbstractEventLoop | None, record: logging.LogRecord | None) -> None:
        """Adds ``line``; writes now outside a loop or past ``max_pending``, else when the linger ends."""
        if self._scheduled is not None and self._scheduled is not loop:
            self._write_pending(record)  # lines due in a loop that has stopped, or in another
            self._scheduled = None
        self._pending.append(line)
        self._size += len(line)
        if loop is None or self._size >= self.max_pending:
            self._write_pending(record)
        elif self._scheduled is None:
            self._scheduled = loop
            if self.linger_s > 0:
                loop.call_later(self.linger_s, self._write_due)
            else:
                loop.call_soon(self._write_due)

    def write_direct(self, logger: logging.Logger, level: int, message: str) -> bool:
        """Queues ``message`` of ``logger`` at ``level`` as this handler would format it, without
        a ``LogRecord`` (the decision line of every request, engine/records.py).

        Returns:
            ``False`` (nothing written) unless the record would reach this handler alone,
            unfiltered, formatted with :data:`FORMAT` by :class:`Formatter`: the caller then
            logs it the usual way.
        """
        formatter = self.formatter
        if (
            logger.handlers
            or logger.filters
            or not logger.propagate
            or self.filters
            or level < self.level
            or type(formatter) is not Formatter
            or formatter._fmt != FORMAT
        ):
            return False
        parent = logger.parent
        while parent is not None and parent.parent is not None:  # up to the root
            if parent.handlers or not parent.propagate:
                return False
            parent = parent.parent
        if parent is None or parent.handlers != [self] or parent.filters:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        created = time.time()
        stamp = formatter.stamp(created)
        line = f"{stamp} {logging.getLevelName(level)} {logger.name}: {message}{self.terminator}"
        self.acquire()
        try:
            self._queue(line, loop, None)
        finally:
            self.release()
        return True

    def _write_due(self) -> None:
        self.acquire()
        try:
            self._scheduled = None
            self._write_pending(None)
        finally:
            self.release()

    def _write_pending(self, record: logging.LogRecord | None) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._size = 0
        try:
            self.stream.write(text)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:
            if record is not None:
                self.handleError(record)

    def flush(self) -> None:
        """Writes whatever is pending, then flushes the stream."""
        self.acquire()
        try:
            self._write_pending(None)
            super().flush()
        finally:
            self.release()
