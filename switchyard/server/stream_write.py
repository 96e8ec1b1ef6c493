"""Writing a stream to the caller: the bytes produced but not yet written, the write deadline,
the keep-alives of a silent stream.

Layer: ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, MutableMapping
from types import CoroutineType
from typing import Any

from switchyard.clients.http_parts import Deadline

logger = logging.getLogger("switchyard.server")

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

STREAM_BUFFER = 256 * 1024
"""Stream bytes produced but not yet handed to the connection, at most: past it the proxy stops
reading the upstream (backpressure) until the caller reads."""


async def produce(
    chunks: AsyncIterator[bytes],
    ready: Ready,
    direct: Callable[[bytes, bool], Awaitable[None]] | None = None,
    state: WriterState | None = None,
) -> None:
    """Moves a stream's chunks into ``ready`` as they come, waiting while it is full.

    With ``direct``, a chunk that finds the writer idle — the stream's head out (``state``),
    nothing waiting in ``ready``, the writer parked in :meth:`Ready.take` — is written here at
    once (``direct(chunk, False)``), and so is the body's end when the stream ends that way
    (``direct(b"", True)``; the writer then only returns): a stream that arrives an event per
    read costs one task step per event, not two (this one's and the writer's). Whatever meets
    the writer busy still waits in ``ready`` for it, so the order is kept."""
    try:
        async for chunk in chunks:
            if direct is not None and _idle(state, ready):
                await direct(chunk, False)  # nothing waits to go first, and nobody is writing
            elif ready.put(chunk):
                await ready.room()  # waits while the caller is not reading (bounded)
        if direct is not None and _idle(state, ready):
            await direct(b"", True)
    except BaseException as exc:
        ready.close(exc)
        raise
    ready.close(None)


def _idle(state: WriterState | None, ready: Ready) -> bool:
    """Whether the stream's writer is idle: its head is out, it has not ended, and it is parked."""
    return state is not None and state.started and not state.done and ready.parked()


class Ready:
    """Chunks produced but not yet written; the writer takes them all at once. The producer
    waits while ``limit`` bytes are waiting, so a caller that does not read stops the upstream
    read instead of growing this buffer (the upstream connection is paused in turn)."""

    __slots__ = ("_done", "_error", "_limit", "_loop", "_parts", "_room", "_size", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = STREAM_BUFFER) -> None:
        self._loop = loop
        self._parts: list[bytes] = []
        self._waiter: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._size = 0
        self._limit = limit
        self._done = False
        self._error: BaseException | None = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def put(self, chunk: bytes) -> bool:
        """Adds ``chunk``; ``True`` when the producer must now ``await room()`` (buffer full).
        (No coroutine per chunk: a stream of 50 events puts 50 times.)"""
        self._parts.append(chunk)
        self._size += len(chunk)
        self._wake()
        return self._size >= self._limit and not self._done

    async def room(self) -> None:
        """Waits until the writer has taken what is ready (or the stream ended)."""
        while self._size >= self._limit and not self._done:
            self._room = self._loop.create_future()
            try:
                await self._room
            finally:
                self._room = None

    def parked(self) -> bool:
        """Whether the writer waits in :meth:`take` for chunks, none are ready, and none has woken it."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._parts

    def ended(self) -> bool:
        """Whether the stream ended cleanly and nothing is left to take."""
        return self._done and not self._parts and self._error is None

    def close(self, error: BaseException | None) -> None:
        self._done = True
        self._error = error
        self._wake()

    async def take(self) -> bytes | None:
        """Everything ready, joined; ``None`` at the end. Re-raises the producer's failure."""
        while not self._parts:
            if self._done:
                if self._error is not None and not isinstance(self._error, asyncio.CancelledError):
                    raise self._error
                return None
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        parts, self._parts = self._parts, []
        self._size = 0
        if self._room is not None and not self._room.done():
            self._room.set_result(None)
        return parts[0] if len(parts) == 1 else b"".join(parts)


class WriterState:
    """When the stream last wrote, whether its head is out, whether it is ending (``done``: no
    more pings) and whether its body's end was written (``ended``), and whether a write outlived
    the write deadline (shared by the pump, the producer's direct writes and the ``Pinger``)."""

    __slots__ = ("done", "ended", "last", "stalled", "started")

    def __init__(self, last: float) -> None:
        self.last = last
        self.started = False
        self.done = False
        self.ended = False
        self.stalled = False


class Stalled(Exception):
    """A write to the caller did not complete within ``client_timeouts.write_s``."""


def deadline_send(
    send: Send, write_s: float, state: WriterState, abort: Callable[[], None] | None
) -> Callable[..., Awaitable[None]]:
    """``send`` bounded by the write deadline: a caller that reads nothing for ``write_s`` while
    data waits has its connection dropped (``abort``: no flush of what is queued) and the write
    raises :class:`Stalled`."""

    async def write(message: Message, task: Any = None) -> None:  # task: the writing one, if known
        if state.stalled:
            raise Stalled
        # Nearly every write is taken by the connection at once (``send`` returns without
        # waiting): it costs no timer. Only a write that has to wait for the caller to read
        # (flow control) finishes under the deadline.
        pending: Any = send(message)
        if type(pending) is CoroutineType:
            try:
                first = pending.send(None)
            except StopIteration:
                return
            pending = _Rest(pending, first)
        try:
            async with Deadline(write_s, task):
                await pending
        except TimeoutError:
            state.stalled = True
            logger.warning("caller read nothing for %gs (server.client_timeouts.write_s); closed its stream", write_s)
            if abort is not None:
                abort()
            raise Stalled from None

    return write


class _Rest:
    """Awaits the rest of a coroutine that was stepped once and yielded ``first`` (what
    ``await`` of it would have done from there: the same yields, sends and throws)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Any, first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting = self._coro, self._first
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # a cancellation (the deadline) goes to the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class Pinger:
    """Writes ``ping`` whenever the stream has been silent for ``interval`` seconds.

    One timer per silence, not one per event: the pump only stamps ``state.last``, and the timer,
    when it fires, sets itself again for the end of the current silence. A task exists only while
    a ping is being written — not for every stream, most of which end long before their first
    ping is due. Every write is one whole SSE event, so a ping never lands inside another event.
    """

    __slots__ = ("_handle", "_interval", "_loop", "_ping", "_send", "_state", "_task")

    def __init__(
        self, send: Callable[..., Awaitable[None]], state: WriterState, ping: bytes, interval: float, loop: Any
    ) -> None:
        self._send = send
        self._state = state
        self._ping = ping
        self._interval = interval
        self._loop = loop
        self._task: asyncio.Task[None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        """Sets the timer for the end of the current silence."""
        self._handle = self._loop.call_at(self._state.last + self._interval, self._due)

    def _due(self) -> None:
        self._handle = None
        if self._state.done:
            return
        if self._state.last + self._interval > self._loop.time():
            self._arm()  # the stream wrote meanwhile: a new silence
        else:
            self._task = self._loop.create_task(self._write())

    async def _write(self) -> None:
        await self._send({"type": "http.response.body", "body": self._ping, "more_body": True})
        self._state.last = self._loop.time()
        self._task = None
        if not self._state.done:
            self._arm()

    async def aclose(self) -> None:
        """Stops pinging; waits for a ping being written (its failure is the stream's, not news)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
