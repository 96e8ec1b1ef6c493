"""One upstream response of the lean HTTP/1.1 pool (:mod:`switchyard.clients.h1`): status and
headers at once, the body as the connection feeds it, read by the backend.

Layer: ``clients``.

Waiting for body bytes is bounded twice: by the read timeout (no bytes for that long) and, for a
stream, by the stream's total deadline (:meth:`H1Response.stop_at`). Both are kept by one timer
per response that is armed when a wait finds none and re-armed only when it fires early, not by
a timer (and a timeout scope) per read: a streamed answer that arrives an event per read used to
pay for two timers per event (docs/benchmarks.md, "Ninth pass").
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol

from switchyard.clients.h1_errors import ReadTimeout, ResponseTooLarge, StreamDeadline

DECODE_PIECE = 64 * 1024
"""Most bytes one decompression step may produce (the rest of the input waits its turn)."""


class Feed(Protocol):
    """What a response needs of the connection that feeds it (the pool's connection in
    :mod:`switchyard.clients.h1`): described here so that this module does not import that one,
    which imports this."""

    paused: bool

    def resume(self) -> None:
        """Reads from the socket again after the buffer drained."""

    def abort(self) -> None:
        """Closes the connection: what is left of the body cannot be read any more."""


MAX_BUFFER = 256 * 1024
"""Unread response bytes held per connection before reading from the socket pauses (the
buffer can exceed it by one socket read)."""


_SLACK_S = 0.002
"""How early a timer may fire and still end a wait: the loop's timers are kept to the
millisecond, so one set for a wait's end can run just before it (it would otherwise set itself
again for a fraction of a millisecond, over and over)."""


class H1Response:
    """One upstream response: status and headers at once, the body as it arrives.

    The surface the backend uses on ``httpx.Response``: ``status_code``, ``headers``,
    ``content`` (after :meth:`aread`), :meth:`aiter_bytes`, :meth:`aread`, :meth:`aclose`.
    """

    __slots__ = (
        "_chunks",
        "_conn",
        "_deadline",
        "_decoder",
        "_error",
        "_limit",
        "_loop",
        "_raw_headers",
        "_read_timeout",
        "_received",
        "_since",
        "_timer",
        "_waiter",
        "buffered",
        "complete",
        "content",
        "content_type",
        "status_code",
    )

    def __init__(self, read_timeout: float | None, limit: int | None = None, *, whole: bool = True) -> None:
        self.status_code = 0
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self.content_type = ""
        self.content = b""
        self.complete = False
        self.buffered = 0
        self._chunks: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._conn: Feed | None = None
        self._read_timeout = read_timeout
        self._deadline: float | None = None  # the stream's end of waiting (``stop_at``)
        self._since = 0.0  # when the current wait began (``time.monotonic()``)
        self._timer: asyncio.TimerHandle | None = None  # the one timer of every wait (``_check``)
        self._loop: asyncio.AbstractEventLoop | None = None  # set by the pool, else looked up once
        self._decoder: Any = None
        # Bytes counted against ``limit``: every body byte of a JSON answer (``whole``), only the
        # decoded bytes of a compressed stream (a plain stream is bounded by backpressure).
        self._limit = limit
        self._received = 0 if whole else None

    @property
    def headers(self) -> dict[str, str]:
        """Response headers, names lower-cased (repeated ones joined with ``", "``, as httpx
        does); built on demand (error replies, ``Retry-After``)."""
        out: dict[str, str] = {}
        for name, value in self._raw_headers:
            key, text = name.decode("latin-1").lower(), value.decode("latin-1")
            out[key] = f"{out[key]}, {text}" if key in out else text
        return out

    # -- fed by the connection ---------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _feed(self, data: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            self._take(data)
            return
        # Bounded steps: a small compressed input may inflate a thousandfold; each step's output
        # is counted before the next one is made.
        while data:
            self._take(decoder.decompress(data, DECODE_PIECE))
            data = decoder.unconsumed_tail

    def _take(self, data: bytes) -> None:
        if not data:
            return
        if self._received is not None or self._decoder is not None:
            self._received = (self._received or 0) + len(data)
            if self._limit is not None and self._received > self._limit:
                raise ResponseTooLarge(
                    f"upstream body exceeds {self._limit} bytes"
                    + (" once decoded" if self._decoder is not None else "")
                    + " (llm_clients.<name>.max_response_bytes)"
                )
        self._chunks.append(data)
        self.buffered += len(data)
        self._wake()

    def _finish(self) -> None:
        if self._decoder is not None:
            self._take(self._decoder.flush())
        self.complete = True
        self._conn = None
        self._disarm()
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._conn = None
        self._disarm()
        self._wake()

    # -- read by the backend -----------------------------------------------------------------

    def stop_at(self, deadline: float | None) -> None:
        """Ends every later wait for body bytes at ``deadline`` (a ``time.monotonic()`` value)
        with :class:`~switchyard.clients.h1_errors.StreamDeadline`, a ``TimeoutError``: a
        stream's total limit, kept by this response's timer instead of a timeout scope around
        each read. Bytes already received are still handed out; ``None`` lifts the limit."""
        self._deadline = deadline

    def _due(self) -> float | None:
        """When the current wait ends unless bytes come: its read timeout or the deadline."""
        due = self._deadline
        if self._read_timeout is not None:
            silence = self._since + self._read_timeout
            due = silence if due is None or silence < due else due
        return due

    def _check(self) -> None:
        """The timer: fails the pending wait whose time is up, or sets itself for when it will be."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # nobody waits: the next wait sets the timer again
        now = time.monotonic()
        deadline = self._deadline
        if deadline is not None and now >= deadline - _SLACK_S:
            waiter.set_exception(StreamDeadline("the stream's deadline passed while waiting for the upstream"))
        elif self._read_timeout is not None and now >= self._since + self._read_timeout - _SLACK_S:
            waiter.set_exception(ReadTimeout("timed out waiting for the upstream"))
        else:
            due = self._due()
            if due is not None:
                self._timer = self._arm(due - now)

    def _arm(self, delay: float) -> asyncio.TimerHandle:
        assert self._loop is not None  # set by the wait that needs the timer
        return self._loop.call_later(max(delay, 0.0), self._check)

    def _disarm(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    async def _wait(self) -> None:
        now = time.monotonic()
        self._since = now
        deadline = self._deadline
        if deadline is not None and now >= deadline:
            raise StreamDeadline("the stream's deadline passed while waiting for the upstream")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if self._timer is None:
            due = self._due()
            if due is not None:
                self._timer = self._arm(due - now)
        # An armed timer is left as it is: it was set for an earlier wait's end, which is no
        # later than this one's, and re-arms itself for this one when it fires.
        try:
            await waiter
        finally:
            self._waiter = None

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Body chunks as they arrive (decoded), then the end of the body.

        Raises:
            ReadTimeout: No bytes for longer than the read timeout.
            ReadError: The connection broke before the body ended.
        """
        chunks = self._chunks
        while True:
            if chunks:
                data = chunks.popleft()
                self.buffered -= len(data)
                conn = self._conn
                if conn is not None and conn.paused and self.buffered < MAX_BUFFER // 2:
                    conn.resume()
                yield data
            elif self._error is not None:
                raise self._error
            elif self.complete:
                return
            else:
                await self._wait()

    def take_ready(self) -> bytes | None:
        """Everything received and not yet read, in one piece, without waiting; ``None`` when
        nothing is buffered (then :meth:`aiter_bytes` waits, ends or raises)."""
        chunks = self._chunks
        if not chunks:
            return None
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        conn = self._conn
        if conn is not None and conn.paused:
            conn.resume()
        return data

    async def aread(self) -> bytes:
        """The whole body (also kept in ``content``)."""
        chunks = self._chunks
        if self.complete and self._error is None:
            # All here already (a JSON answer usually comes in the read that brought its head):
            # no async generator, whose start registers it with the event loop.
            self.content = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
            chunks.clear()
            self.buffered = 0
            return self.content
        parts = [chunk async for chunk in self.aiter_bytes()]
        self.content = parts[0] if len(parts) == 1 else b"".join(parts)
        return self.content

    async def aclose(self) -> None:
        """Stops reading: an unfinished response closes its connection (it cannot be reused)."""
        conn, self._conn = self._conn, None
        if conn is not None and not self.complete:
            conn.abort()
        self._chunks.clear()
        self._disarm()
