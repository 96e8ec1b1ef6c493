"""Pieces of the upstream HTTP clients shared by the backend: limits, default headers, the
choice of the lean pool, and what happens to the tail of a finished stream.

Layer: ``clients``. Imports neither httpx nor httptools (each is looked up only if loaded; the
lean pool's module, which needs httptools, only when a backend asks for a pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Generator, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from switchyard._version import __version__

if TYPE_CHECKING:  # the server app imports this module at start-up, before pydantic is needed
    from switchyard.protocol.call import CallOptions

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Default ``llm_clients.<name>.max_response_bytes``: the largest JSON answer body, and the
largest decoded size of a compressed body, read from an upstream."""

# Bounds on reading the tail of a stream whose answer is complete (see ``drain``).
_DRAIN_S = 5.0
_DRAIN_BYTES = 64 * 1024

# What httpx sends by default, for requests that do not go through httpx (the lean pool); the
# user agent names the client that actually sends them.
DEFAULT_HEADERS = {
    "accept": "*/*",
    "accept-encoding": "gzip, deflate",
    "connection": "keep-alive",
    "user-agent": f"switchyard/{__version__}",
}


class Timeouts:
    """Connect, read (longest silence between bytes) and total (per request) limits in seconds."""

    __slots__ = ("connect", "read", "total")

    def __init__(self, connect: float = 10.0, read: float = 300.0, total: float | None = 900.0) -> None:
        self.connect = connect
        self.read = read
        self.total = total

    def merged(self, override: Mapping[str, float] | None) -> Timeouts:
        """These limits with per-request overrides applied.

        A caller may only tighten them: each override is capped by the operator's value
        (``x-switchyard-timeout: read=3600`` cannot lift a configured ``read: 300``).
        """
        if not override:
            return self
        total = self.total
        if "total" in override:
            total = float(override["total"]) if total is None else min(total, float(override["total"]))
        return Timeouts(
            connect=min(self.connect, float(override.get("connect", self.connect))),
            read=min(self.read, float(override.get("read", self.read))),
            total=total,
        )

    def for_call(self, options: CallOptions) -> tuple[Timeouts, float | None, str]:
        """One attempt's limits: these with the request's overrides applied, its
        ``time.monotonic()`` deadline (``total``, capped by the request's own deadline) and which
        of the two that is, for messages (``"request deadline"`` marks the caller's own limit,
        :func:`switchyard.clients.errors.timed_out`). Every backend asks this."""
        timeouts = self.merged(options.timeout)
        deadline = None if timeouts.total is None else time.monotonic() + timeouts.total
        label = "total" if timeouts.total is None else f"total of {timeouts.total:g}s"
        if options.deadline is not None and (deadline is None or options.deadline < deadline):
            deadline, label = options.deadline, "request deadline"
        return timeouts, deadline, label

    def pool_wait(self, deadline: float | None) -> float:
        """How long to wait for a free pooled connection: the connect timeout, kept a little
        inside the attempt's deadline so an exhausted pool surfaces as such rather than as the
        deadline passing while "waiting for headers"."""
        if deadline is None:
            return self.connect
        return max(0.001, min(self.connect, (deadline - time.monotonic()) * 0.95))


class Deadline:
    """``async with Deadline(seconds):`` — ``asyncio.timeout(seconds)`` for the hot path.

    The same outcome (the block is cancelled and ``TimeoutError`` raised when the time is up;
    ``None`` never expires) at about a third of the cost: one timer and no state machine, which
    matters on a path that opens two or three of these per proxied request
    (docs/benchmarks.md). Not reusable, not reschedulable.
    """

    __slots__ = ("_cancelling", "_delay", "_fired", "_task", "_timer")

    def __init__(self, delay: float | None, task: asyncio.Task[Any] | None = None) -> None:
        self._delay = delay
        self._timer: asyncio.TimerHandle | None = None
        self._fired = False
        self._task = task  # the running task, when the caller has it at hand (else looked up)

    async def __aenter__(self) -> Deadline:
        delay = self._delay
        if delay is not None:
            # Each lookup of the running loop is a getpid() system call on CPython 3.11: the
            # task's own loop is the running one.
            task = self._task or asyncio.current_task()
            if task is None:
                raise RuntimeError("Deadline must be used inside a task")
            self._task = task
            self._cancelling = task.cancelling()
            self._timer = task.get_loop().call_later(max(delay, 0.0), self._fire)
        return self

    def _fire(self) -> None:
        self._fired = True
        self._timer = None
        assert self._task is not None  # set before the timer
        self._task.cancel()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None
        elif (
            self._fired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc

    def expired(self) -> bool:
        """Whether the time ran out (as ``asyncio.Timeout.expired``)."""
        return self._fired


class Rest:
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
            except BaseException as exc:  # a cancellation (a deadline) goes to the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def step_once(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
    """Runs a coroutine until it first waits: ``(True, its result)`` when it never does, else
    ``(False, an awaitable of the rest)``. Whatever is not a coroutine comes back to be awaited.

    Most reads and writes of a request are ready at once (the body arrived with the head, the
    connection takes the answer): those then cost no timer, and a deadline is set only around
    the rest of one that has to wait.
    """
    if type(awaitable) is CoroutineType:
        try:
            first = awaitable.send(None)
        except StopIteration as stop:
            return True, stop.value
        return False, Rest(awaitable, first)
    return False, awaitable


def left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (a ``time.monotonic()`` value), for ``asyncio.timeout``."""
    return None if deadline is None else deadline - time.monotonic()


def env_proxy(scheme: str) -> bool:
    """Whether the environment names a proxy for ``scheme`` (any case, as httpx reads it)."""
    names = (f"{scheme}_proxy", "all_proxy")
    return any(value for key, value in os.environ.items() if key.lower() in names)


_CALLER_DEFAULTS = frozenset({"anthropic-version", "anthropic-beta"})
"""Backend headers a caller's request usually replaces: the lean pool's defaults."""


def lean_pool(
    url: str, headers: Mapping[str, str], injected: bool, max_connections: int, max_response_bytes: int
) -> Any:
    """The lean HTTP/1.1 pool for a backend's answer calls (:mod:`switchyard.clients.h1`) to
    ``url`` with its ``headers``, or ``None`` to stay on httpx: a transport was ``injected``,
    the environment names a proxy for this scheme (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``,
    which httpx would honour), httptools is not installed, or ``SWITCHYARD_HTTP_CLIENT=httpx``
    asks for it."""
    if injected or os.environ.get("SWITCHYARD_HTTP_CLIENT", "").lower() == "httpx":
        return None
    scheme = url.split(":", 1)[0].lower()
    if scheme not in ("http", "https") or env_proxy(scheme):
        return None
    try:
        from switchyard.clients.h1 import H1Pool
    except ImportError:  # httptools comes with the ``server`` extra
        return None
    fixed = {**DEFAULT_HEADERS, **headers}
    # Headers callers forward (``anthropic-version``, ``anthropic-beta``) are the pool's
    # defaults, not part of its fixed prefix: Anthropic SDKs send anthropic-version on every
    # request, and replacing it must stay as cheap as not sending it.
    defaults = {k: fixed.pop(k) for k in list(fixed) if k.lower() in _CALLER_DEFAULTS}
    return H1Pool(url, fixed, defaults=defaults, max_connections=max_connections, max_response_bytes=max_response_bytes)


def is_timeout(exc: BaseException) -> bool:
    """A timeout of either client (each module is looked up only if it was loaded)."""
    return _raised(exc, "TimeoutException")


def is_connect_timeout(exc: BaseException) -> bool:
    """No connection (or no free pooled one) within the connect limit, in either client."""
    return _raised(exc, "ConnectTimeout") or _raised(exc, "PoolTimeout")


def is_decoding_error(exc: BaseException) -> bool:
    """A body that could not be decoded (corrupt, unsupported, or too large once inflated)."""
    return _raised(exc, "DecodingError")


def is_pool_timeout(exc: BaseException) -> bool:
    """No free pooled connection in time, in either client."""
    return _raised(exc, "PoolTimeout")


def _raised(exc: BaseException, name: str) -> bool:
    """Whether ``exc`` is the exception class ``name`` of the lean pool or of httpx (both use
    httpx's names), looking a module up only if it was loaded."""
    for module in ("switchyard.clients.h1", "httpx"):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return False


async def read_capped(response: Any, limit: int) -> bytes:
    """Reads an httpx response's decoded body, failing past ``limit`` bytes (as the lean pool
    does) instead of inflating a compressed bomb into memory whole.

    Raises:
        httpx.DecodingError: The decoded body grew past ``limit``.
    """
    import httpx

    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise httpx.DecodingError(
                f"upstream body exceeds {limit} bytes once decoded (llm_clients.<name>.max_response_bytes)"
            )
        parts.append(chunk)
    body = b"".join(parts)
    response._content = body  # what ``response.content`` returns from now on (as aread sets it)
    return body


async def drain(resp: Any, chunks: AsyncIterator[bytes], errors: tuple[type[BaseException], ...]) -> None:
    """Reads what is left of a finished stream's response (normally just the end of the chunked
    body), briefly and boundedly, then closes it; a complete response leaves its connection
    pooled, anything else closes it."""
    caught: tuple[type[BaseException], ...] = (TimeoutError, *errors)
    try:
        async with asyncio.timeout(_DRAIN_S):
            left = _DRAIN_BYTES
            async for chunk in chunks:
                left -= len(chunk)
                if left < 0:
                    break
    except caught:
        pass
    finally:
        with contextlib.suppress(*errors):
            await resp.aclose()


def keeps_deadline(resp: Any, deadline: float | None) -> bool:
    """Whether ``resp`` keeps the stream's total deadline itself (the lean pool's response, with
    one timer): the deadline bounds every wait for bytes, so a stream that trickles (each gap
    shorter than ``read``) still ends on time. httpx's is read within a timeout scope instead
    (:func:`next_within`), which never spans a ``yield``."""
    stop_at = getattr(resp, "stop_at", None)
    if stop_at is None:
        return False
    stop_at(deadline)
    return True


async def next_within(chunks: AsyncIterator[bytes], deadline: float | None) -> bytes | None:
    """The next chunk of an httpx stream, within the time left before ``deadline``."""
    async with Deadline(left(deadline)):
        return await anext(chunks, None)
