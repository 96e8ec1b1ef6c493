"""Writing a stream to the caller: from the task that reads it, under the write deadline, with
keep-alives while it is silent.

Layer: ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from types import CoroutineType
from typing import Any

from switchyard.clients.http_parts import Deadline, Rest, step_once

logger = logging.getLogger("switchyard.server")

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


async def relay(
    chunks: AsyncIterator[bytes],
    start: Message,
    send: Send,
    write: Callable[..., Awaitable[None]],
    state: WriterState,
    end: Callable[[], None],
    opener: Callable[..., bool] | None = None,
) -> None:
    """Writes a stream's chunks to the caller from the task that reads them, then the body's end.

    The first steps of ``chunks`` are run by hand: the chunks they yield without waiting (what
    the upstream's first read held) leave with the head, in one body message — with the body's
    end too when the stream ends there, as a fast upstream's does. After that each chunk is
    written as it comes; the connection sends what one loop turn wrote together. One task does
    it all: no writer task, no queue, no hand-over per event, and a timeout scope entered inside
    ``chunks`` belongs to the task that leaves it. A caller that does not read makes ``write``
    wait, and the upstream is not read meanwhile (backpressure); ``write`` raises
    :class:`Stalled` past its deadline. ``end`` runs once the body's end is written.
    ``opener(body, more=...)``, when given, writes the head with the body that is ready in one
    step (``whole_answer.respond``); where it declines, ``start`` goes through ``send``.
    """
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    ready: list[bytes] = []
    while True:
        step: Any = chunks.__anext__()
        waiting: Any = _NOT_STEPPED
        if type(step) not in _STEPPABLE:
            break
        try:
            waiting = step.send(None)  # runs it until it yields, ends or waits
        except StopIteration as got:
            ready.append(got.value)
            continue
        except StopAsyncIteration:
            data = b"".join(ready)
            if opener is not None and opener(data, more=False):  # the whole stream, head and end, at once
                state.started = state.done = True
                end()
                return
            await _finish(data, start, send, write, state, end, task)
            return
        break
    try:  # the stream waits for the upstream: the head and what was ready leave now
        data = b"".join(ready)
        if opener is not None and opener(data, more=True):
            state.started = True
            state.last = loop.time()
        else:
            await send(start)
            state.started = True
            if data:
                await write({"type": "http.response.body", "body": data, "more_body": True}, task)
                state.last = loop.time()
    except BaseException:
        if waiting is not _NOT_STEPPED:
            await _unwind(step)  # the stream is inside a step: it is cancelled there first
        raise
    try:
        chunk = await (step if waiting is _NOT_STEPPED else Rest(step, waiting))
    except StopAsyncIteration:
        await _finish(b"", start, send, write, state, end, task)
        return
    await write({"type": "http.response.body", "body": chunk, "more_body": True}, task)
    state.last = loop.time()
    async for chunk in chunks:
        await write({"type": "http.response.body", "body": chunk, "more_body": True}, task)
        state.last = loop.time()
    await _finish(b"", start, send, write, state, end, task)


async def _finish(
    data: bytes,
    start: Message,
    send: Send,
    write: Callable[..., Awaitable[None]],
    state: WriterState,
    end: Callable[[], None],
    task: Any,
) -> None:
    """Writes ``data`` with the body's end (the head first, if it is not out)."""
    state.done = True
    if not state.started:
        await send(start)
        state.started = True
    await write({"type": "http.response.body", "body": data, "more_body": False}, task)
    end()


async def _unwind(step: Any) -> None:
    """Cancels a step of a stream that was run by hand and now waits (its ``finally`` blocks run,
    the upstream read stops), as a cancelled task would: the step ends with the cancellation."""
    try:
        waiting = step.throw(asyncio.CancelledError())
    except BaseException:  # it ended at once, with the cancellation or its own error
        return
    with contextlib.suppress(BaseException):
        await Rest(step, waiting)  # its clean-up waits for something: it ends the same way


async def _generator() -> AsyncIterator[None]:
    yield None


_NOT_STEPPED = object()
_STEPPABLE = (type(_generator().__anext__()), CoroutineType)
"""What an async generator's ``__anext__`` (or an iterator's coroutine) returns: stepped by
:func:`relay` with ``send``. Anything else is awaited as it is."""


class WriterState:
    """When the stream last wrote, whether its head is out, whether it is ending (``done``: no
    more pings), and whether a write outlived the write deadline (shared by :func:`relay` and
    the ``Pinger``)."""

    __slots__ = ("done", "last", "stalled", "started")

    def __init__(self, last: float) -> None:
        self.last = last
        self.started = False
        self.done = False
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
        done, pending = step_once(send(message))
        if done:
            return
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
