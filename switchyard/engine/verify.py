"""Verification-gated answers: check the efficient answer before release, per the route's mode.

Layer: ``engine`` — imports ``protocol`` and ``routers.verify`` (the checks).

Stage 6 of the request path, run inside the attempt stage (:mod:`switchyard.engine.attempt`) for
a JSON answer and by the answer stage (:mod:`switchyard.engine.answer`) around a stream. Reads
the answer (or the stream's events) and the request; changes the record's ``details.verify``
and router cost (a discarded or compared answer), and may ask the walk for another answer.

A route with ``verify:`` has a :class:`Verifier`. When its efficient target served the answer:

* ``shadow`` — the checks run and ``details.verify`` records the verdict; the answer is served;
* ``evaluate`` — as ``shadow``, and on a failure the capable target is asked too (its answer
  checked, its cost booked as routing overhead, recorded for comparison); the efficient answer
  is still served;
* ``active`` — on a failure the capable target answers instead (the discarded efficient answer
  is booked as routing overhead). An answer that failed its check is never released: when the
  capable call fails too, the caller gets that error.

Streams: in ``active`` mode a stream the efficient target would serve is buffered — the
efficient answer is fetched whole, checked, then replayed as a stream or replaced by the
capable target's live stream; the capable target's streams are never buffered. In ``shadow``
and ``evaluate`` mode streams pass through unbuffered and are checked once they end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import field
from typing import Any, Protocol, TypeVar

from switchyard._dataclass import dataclass
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamAccumulator, StreamEvent
from switchyard.protocol.targets import TargetInfo


class Served(Protocol):
    """What the gate reads of a target that served an answer (the engine's
    :class:`switchyard.engine.target.Target`, which names this module's :class:`Verifier`: a
    protocol here keeps the two modules out of an import circle)."""

    @property
    def info(self) -> TargetInfo:
        """The target's name and price."""
        ...


T = TypeVar("T", bound=Served)

Check = Callable[[ChatRequest, ChatResponse], Awaitable[str | None]]
"""One check: the reason the answer fails it, or ``None`` when it passes."""

Second = Callable[[Sequence[str]], Awaitable[tuple[T, ChatResponse]]]
"""The engine's answer call on other targets (its fallback, retries and restriction)."""


@dataclass(slots=True)
class Verifier:
    """A route's verification gate.

    Attributes:
        mode: ``shadow``, ``evaluate`` or ``active``.
        efficient: The target whose answers are checked.
        capable: The target that answers when a check fails.
        checks: ``(name, check)`` pairs, run in order until one fails.
        relevant: Per check (same order), whether it can fail for a request at all
            (``tool_arguments`` needs tools, ``response_schema`` a structured-output request);
            ``None``: always. A request no check applies to is neither checked nor buffered.
    """

    mode: str
    efficient: str
    capable: str
    checks: list[tuple[str, Check]] = field(default_factory=list)
    relevant: list[Callable[[ChatRequest], bool] | None] = field(default_factory=list)

    def applies(self, request: ChatRequest) -> bool:
        """Whether any check can fail for ``request``."""
        if not self.relevant:
            return True
        return any(test is None or test(request) for test in self.relevant)

    def gates(self, target: str, request: ChatRequest) -> bool:
        """Whether the answer ``target`` serves for ``request`` is checked."""
        return target == self.efficient and self.applies(request)

    def buffers(self, candidates: Sequence[str], request: ChatRequest) -> bool:
        """Whether a stream for these candidates must be buffered (``active``, efficient first,
        and a check that can fail for this request)."""
        return self.mode == "active" and bool(candidates) and candidates[0] == self.efficient and self.applies(request)

    async def failure(self, request: ChatRequest, response: ChatResponse) -> dict[str, str] | None:
        """The first failed check as ``{"check", "reason"}``, or ``None`` when all pass."""
        for name, check in self.checks:
            reason = await check(request, response)
            if reason:
                return {"check": name, "reason": reason}
        return None


async def gate(
    verifier: Verifier,
    request: ChatRequest,
    record: DecisionRecord,
    target: T,
    response: ChatResponse,
    second: Second[T],
) -> tuple[T, ChatResponse]:
    """Checks the efficient answer and acts on the mode; returns what the caller gets.

    Raises:
        UpstreamError: ``active`` mode, a check failed and the capable call failed too.
    """
    started = time.perf_counter()
    failed = await verifier.failure(request, response)
    entry: dict[str, Any] = {
        "mode": verifier.mode,
        "target": target.info.name,
        "passed": failed is None,
        "check_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    record.details["verify"] = entry
    if failed is None:
        return target, response
    entry["failed"] = failed
    if verifier.mode == "shadow":
        return target, response
    try:
        other_target, other = await second([verifier.capable])
    except UpstreamError as exc:
        entry["capable_error"] = exc.message
        if verifier.mode == "active":
            raise
        return target, response
    again = await verifier.failure(request, other)
    entry["capable"] = {"target": other_target.info.name, "passed": again is None}
    if verifier.mode == "evaluate":
        _book(record, other_target, other)  # the comparison is overhead: the efficient answer stands
        return target, response
    entry["served"] = other_target.info.name
    _book(record, target, response)  # the discarded efficient answer
    return other_target, other


def _book(record: DecisionRecord, target: Served, response: ChatResponse) -> None:
    cost = record.router_cost
    cost.calls += 1
    cost.input_tokens += response.usage.input_tokens
    cost.output_tokens += response.usage.output_tokens
    cost.cost_usd += target.info.price.cost(response.usage)


def gated_stream(
    verifier: Verifier | None,
    request: ChatRequest,
    record: DecisionRecord,
    target: str,
    first: Sequence[StreamEvent],
    rest: AsyncIterator[StreamEvent],
) -> AsyncIterator[StreamEvent]:
    """``rest`` itself, or — for a stream the verifier gates — :func:`checked_at_end` of it."""
    if verifier is None or not verifier.gates(target, request):
        return rest
    return checked_at_end(verifier, request, record, target, first, rest)


async def checked_at_end(
    verifier: Verifier,
    request: ChatRequest,
    record: DecisionRecord,
    target: str,
    first: Sequence[StreamEvent],
    rest: AsyncIterator[StreamEvent],
) -> AsyncIterator[StreamEvent]:
    """The rest of a ``shadow``/``evaluate`` stream, unchanged, checked once it has ended.

    The verdict is in ``record.details["verify"]`` before the engine writes the record; a
    stream the caller stopped reading is not checked.
    """
    acc = StreamAccumulator()
    for event in first:
        acc.add(event)
    try:
        async for event in rest:
            acc.add(event)
            yield event
    finally:
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()
    started = time.perf_counter()
    failed = await verifier.failure(request, acc.response())
    entry: dict[str, Any] = {
        "mode": verifier.mode,
        "target": target,
        "passed": failed is None,
        "streamed": True,
        "check_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    if failed is not None:
        entry["failed"] = failed
    record.details["verify"] = entry


def sync_check(fn: Callable[[ChatRequest, ChatResponse], str | None]) -> Check:
    """A pure check as a :data:`Check`."""

    async def run(request: ChatRequest, response: ChatResponse) -> str | None:
        return fn(request, response)

    return run


def guarded(
    name: str, fn: Callable[[ChatRequest, ChatResponse], Awaitable[Any]], timeout_s: float, on_error: str
) -> Check:
    """A user check (hook or HTTP endpoint) bounded by ``timeout_s``.

    Its result ``True``/``None`` passes, ``False`` fails, a string fails with that reason; a
    check that raises or times out counts as ``on_error`` (``fail`` or ``pass``).
    """

    async def run(request: ChatRequest, response: ChatResponse) -> str | None:
        try:
            async with asyncio.timeout(timeout_s):
                verdict = await fn(request, response)
        except TimeoutError:
            return None if on_error == "pass" else f"{name} gave no verdict within {timeout_s:g}s"
        except Exception as exc:  # a broken hook is a verdict of its own, never a crash
            return None if on_error == "pass" else f"{name} failed: {type(exc).__name__}: {exc}"
        if verdict is True or verdict is None:
            return None
        if verdict is False:
            return f"{name} rejected the answer"
        if isinstance(verdict, str):
            return verdict or f"{name} rejected the answer"
        return None if on_error == "pass" else f"{name} answered {type(verdict).__name__}, not a verdict"

    return run
