"""The CLI's log handler: every line formatted when it is logged, written once per loop turn.

Layer: ``cli``. ``switchyard serve`` logs one decision line per request; with the standard
``StreamHandler`` each of those is its own ``write`` and ``flush``, which was about a sixth of
the proxy's CPU per JSON request on ``../shared/bench`` (docs/benchmarks.md). Here lines logged
from inside a running event loop are kept until the end of that loop turn and then written
together; lines from anywhere else (another thread, start-up, shutdown) are written at once, after
whatever is still pending, so the order is kept. ``logging.shutdown`` (at interpreter exit)
flushes what is left; a process killed with ``SIGKILL`` loses at most the lines of its last turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TextIO

MAX_PENDING = 64 * 1024
"""Characters kept before a write even inside a loop turn (one turn that logs a lot)."""


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
    """A ``StreamHandler`` that writes the lines of one event-loop turn in one ``write``.

    Args:
        stream: Where lines go (default ``sys.stderr``, as ``StreamHandler``).
        max_pending: Characters kept before an early write.
    """

    def __init__(self, stream: TextIO | None = None, max_pending: int = MAX_PENDING) -> None:
        super().__init__(stream)
        self.max_pending = max_pending
        self._pending: list[str] = []
        self._size = 0
        self._scheduled = False

    def emit(self, record: logging.LogRecord) -> None:
        """Formats ``record`` now; writes it at the end of this loop turn (or now, outside a loop).

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
        """Adds ``line``; writes now outside a loop or past ``max_pending``, else at the turn's end."""
        self._pending.append(line)
        self._size += len(line)
        if loop is None or self._size >= self.max_pending:
            self._write_pending(record)
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._end_of_turn)

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

    def _end_of_turn(self) -> None:
        self.acquire()
        try:
            self._scheduled = False
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
