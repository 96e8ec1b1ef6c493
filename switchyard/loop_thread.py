"""A private event loop on a daemon thread: what the synchronous library calls run on
(:meth:`Switchyard.run_sync <switchyard.api.Switchyard.run_sync>` and the ``*_sync`` methods).

Layer: beside ``api``, its only user. Imports nothing of the package.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when the ``server`` extra installed it (the proxy runs on it too): its
    cross-thread wake-ups and socket I/O are cheaper for every synchronous call."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """A private event loop on a daemon thread, for the synchronous API."""

    def __init__(self) -> None:
        self.loop = new_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="switchyard-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs ``coro`` on the loop and waits for its result (its exception is raised here)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Iterates ``agen`` on the loop; closes it there when the caller stops early."""
        try:
            while True:
                try:
                    yield self.run(agen.__anext__())  # type: ignore[arg-type]
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and self.loop.is_running():
                self.run(aclose())

    def stop(self) -> None:
        """Stops the loop, waits for its thread (5 s at most) and closes the loop."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive() and not self.loop.is_closed():
            # Releases the loop's self-pipe; an unclosed loop is a ResourceWarning at exit.
            self.loop.close()
