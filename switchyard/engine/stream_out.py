"""Writing an answer stream in the caller's format, with keep-alives during upstream silence.

Layer: ``engine``.

Upstream events are read by a pump task into a small bounded queue; a timer, re-armed on every
event, drops a keep-alive marker into the queue when the upstream has been silent for
``interval`` seconds. The writer therefore waits on one queue and never cancels an upstream
read (cancelling an async generator mid-``await`` would close it), and the per-event cost
stays a few microseconds (see ``benchmarks/translation_throughput.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

_END = object()
_PING = object()
_QUEUE = 64  # events read ahead of a slow caller at most (back-pressure beyond that)


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


async def encode_stream(encoder: Any, events: Any, ping: bytes, interval: float | None) -> AsyncIterator[bytes]:
    """SSE bytes for ``events`` (an ``EventStream``) through ``encoder``; ``ping`` after every
    ``interval`` seconds without an upstream event (``None``: never)."""
    if interval is None:
        async for chunk in _plain(encoder, events):
            yield chunk
        return
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=_QUEUE)
    timer: asyncio.TimerHandle | None = None

    def due() -> None:
        nonlocal timer
        if not queue.full():
            queue.put_nowait(_PING)
        timer = loop.call_later(interval, due)

    def arm() -> None:
        nonlocal timer
        if timer is not None:
            timer.cancel()
        timer = loop.call_later(interval, due)

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
                arm()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the writer, which re-raises it
            await queue.put(_Failure(exc))
            return
        await queue.put(_END)

    arm()
    task = asyncio.ensure_future(pump())
    try:
        while True:
            item = await queue.get()
            if item is _END:
                break
            if item is _PING:
                yield ping
                continue
            if isinstance(item, _Failure):
                raise item.exc
            data: bytes = encoder.encode(item)
            if data:
                yield data
        tail: bytes = encoder.finish()
        if tail:
            yield tail
    finally:
        if timer is not None:
            timer.cancel()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await events.aclose()


async def _plain(encoder: Any, events: Any) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            chunk: bytes = encoder.encode(event)
            if chunk:
                yield chunk
        end: bytes = encoder.finish()
        if end:
            yield end
    finally:
        await events.aclose()
