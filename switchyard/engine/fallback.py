"""Ordered fallback with retries: the one retry loop of Switchyard.

Layer: ``engine`` — imports ``clients.retry`` (pure policy) and ``clients.errors``; never ``httpx``.

Every model call the engine makes — the answer call (JSON or the opening of a stream) and the
calls routers make through :class:`~switchyard.protocol.call.ModelCall` — goes through
:meth:`Fallback.run` (a plain Chat relay's first attempt is made before it, by the relay lane,
and handed to it when it fails: :class:`FirstAttempt`, ``engine/relay.py``). Backends never
retry (the HTTP client has no retries; the drop-in SDK clients are built with ``max_retries=0``;
the proxy tells SDK callers ``x-should-retry: false``), so attempts never multiply: the worst
case is, per candidate, ``max_retries + 1`` attempts.

For each candidate in order:

1. skip it when an earlier candidate overflowed its context window and this one's window is known
   and not larger; when its window is known and the prompt clearly does not fit
   (:mod:`switchyard.engine.windows`); when a health probe found its backend down
   (:mod:`switchyard.engine.monitor`); or when its circuit breaker is open (all written to
   ``record.skipped``);
2. try it; on failure look the error up in :data:`~switchyard.clients.retry.ERROR_TABLE`:
   retry the same target after the backoff (or the upstream's ``Retry-After`` when it is at most
   ``max_retry_after_s``), or give it up and fall back, or stop and return the error;
3. never start an attempt or a wait past the request's deadline (``x-switchyard-timeout``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar, runtime_checkable

from switchyard._dataclass import dataclass
from switchyard.clients.errors import overflow_limit
from switchyard.clients.retry import ErrorClass, Rule, judge
from switchyard.engine.health import Health
from switchyard.engine.records import Attempt, Skipped
from switchyard.engine.target import Reliability as Reliability
from switchyard.engine.target import Target
from switchyard.engine.timeouts import Budget
from switchyard.engine.windows import PromptSize
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.targets import TargetInfo

logger = logging.getLogger("switchyard.engine")

T = TypeVar("T")

WINDOW_LOOKUP_TIMEOUT_S = 2.0
"""Longest time a ``GET /models`` context-window lookup may take."""
WINDOW_MEMORY_S = 600.0
"""How long a learned (or not found) context window is remembered."""


@runtime_checkable
class WindowSource(Protocol):
    """A backend that can tell a model's context window (e.g. vLLM's ``max_model_len``)."""

    async def context_window(self, target: TargetInfo, timeout_s: float) -> int | None:
        """The model's context window in tokens, or ``None`` when the upstream does not say."""
        ...


class NoCandidateError(UpstreamError):
    """Every candidate was skipped (circuit breakers open) before any attempt."""

    status = 503
    code = "targets_unavailable"


class DeadlineExceededError(UpstreamTimeoutError):
    """The request's own deadline (``x-switchyard-timeout``) passed."""

    code = "request_deadline_exceeded"


@dataclass(slots=True)
class FirstAttempt:
    """An attempt already made before the walk began (the relay lane's, engine/relay.py): the
    walk takes its outcome as its first attempt on ``target`` instead of calling again.

    Attributes:
        target: The candidate it was made on.
        error: What ended it (an :class:`UpstreamError`, a cancellation, or a bug), raised
            where the walk's own call would have raised it.
        started: When it began (``time.perf_counter()``), for the attempt's duration.
    """

    target: str
    error: BaseException
    started: float


@dataclass(slots=True)
class _Floor:
    """The largest context window known to be too small for this request."""

    tokens: int | None = None
    overflowed: bool = False


class Fallback:
    """One request's walk over its candidates.

    Args:
        targets: Targets by name.
        health: Shared breakers and counters.
        budget: The request's deadline and per-request timeout overrides.
        auth_fallback: The route's ``fallback_on_auth_error``.
        attempts: Receives every attempt (the decision record's list, or a router call's).
        skipped: Receives every skipped candidate.
        prompt: The request's prompt size, for the pre-call context-window check (``None``:
            no check).
        defer_success: A successful call does not close the target's breaker (nor reset its
            failure count): the caller reports the outcome later — a stream, whose success is
            known only at its end, after failures mid-stream could still happen.
        allowed: The targets a restricted request may reach (``None``: any); every other
            candidate is skipped as ``restricted`` — the last line behind the engine's own
            filtering (see :mod:`switchyard.engine.restriction`).
        sleep: Awaitable sleep (tests inject a fake).
        rng: Uniform [0, 1) source for jitter.
        first: An attempt made before the walk (:class:`FirstAttempt`): the first attempt on
            its target replays its outcome, with the same health checks before it and the same
            judgement, retries and fallbacks after it.
    """

    def __init__(
        self,
        targets: Mapping[str, Target],
        health: Health,
        *,
        budget: Budget | None = None,
        auth_fallback: bool = False,
        attempts: list[Attempt] | None = None,
        skipped: list[Skipped] | None = None,
        prompt: PromptSize | None = None,
        defer_success: bool = False,
        allowed: frozenset[str] | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
        first: FirstAttempt | None = None,
    ) -> None:
        self.targets = targets
        self.health = health
        self.budget = budget or Budget()
        self.auth_fallback = auth_fallback
        self.attempts: list[Attempt] = [] if attempts is None else attempts
        self.skipped: list[Skipped] = [] if skipped is None else skipped
        self.tried: list[str] = []
        self.prompt = prompt
        self.defer_success = defer_success
        self.allowed = allowed
        self._unfit: dict[str, int] = {}
        self._last: UpstreamError | None = None
        self._sleep = sleep
        self._rng = rng
        self._first = first

    async def run(
        self,
        candidates: Sequence[str],
        call: Callable[[Target, CallOptions], Awaitable[T]],
        options: CallOptions,
    ) -> tuple[Target, T]:
        """Calls ``call(target, options)`` on the candidates in order until one answers.

        Returns:
            The target that answered and its result.

        Raises:
            UpstreamError: The error that ended the walk: a non-fallback error (other 4xx,
                401/403 unless the route allows), the last candidate's error, a
                :class:`DeadlineExceededError`, a :class:`NoCandidateError` when every
                candidate was skipped, or a 400 ``context_length_exceeded`` when the prompt
                fits no candidate's known window.
        """
        options = limited(options, self.budget.deadline, self.budget.overrides or options.timeout)
        floor = _Floor()
        last: UpstreamError | None = None
        for name in candidates:
            if self.allowed is not None and name not in self.allowed:
                self.skipped.append(Skipped(name, "restricted"))
                continue
            target = self.targets[name]
            if floor.overflowed and await self._too_small(target, floor):
                continue
            if self.prompt is not None and self._does_not_fit(target):
                continue
            outcome = await self._try_target(target, call, options)
            if isinstance(outcome, _Success):
                if name != candidates[0]:
                    self.health.count("fallbacks")
                return target, outcome.value
            if outcome.error is None:
                continue  # skipped: its breaker is open
            last = outcome.error
            if outcome.rule.fallback == "never":
                break
            if outcome.rule.fallback == "if_route_allows" and not self.auth_fallback:
                break
            if outcome.deadline:
                break
            if outcome.rule.error_class is ErrorClass.CONTEXT_OVERFLOW:
                await self._raise_floor(target, floor, outcome.error)
        self.health.count("failed_requests")
        if last is None:
            raise self._nothing_tried()
        raise last

    # -- one target -------------------------------------------------------------------------

    async def _try_target(
        self, target: Target, call: Callable[[Target, CallOptions], Awaitable[T]], options: CallOptions
    ) -> _Success[T] | _Failure:
        name = target.info.name
        policy = target.reliability
        first = self._first if self._first is not None and self._first.target == name else None
        # An attempt made before the walk passed these checks when it was made.
        held = None if first is not None else self.health.held(target.info.client or name)
        if held is not None:
            self.skipped.append(Skipped(name, "unhealthy", round(held, 3)))
            self.health.count("unhealthy_skips")
            return _Failure(None, _SKIP_RULE)
        failure: _Failure | None = None
        waited = 0.0
        for retry in range(policy.retry.max_retries + 1):
            if first is None:
                admission = self.health.admit(name, policy.breaker)
                if not admission.allowed:
                    if failure is None:
                        self.skipped.append(Skipped(name, "circuit_open", round(admission.retry_in_s, 3)))
                        return _Failure(None, _SKIP_RULE)
                    return failure  # our own failures opened it: stop retrying, fall back
                remaining = self.budget.remaining()
                if remaining is not None and remaining <= 0:
                    return self._deadline()
            if name not in self.tried:
                self.tried.append(name)
            self.health.count("attempts")
            if retry:
                self.health.count("retries")
            started = time.perf_counter()
            try:
                if first is not None:
                    # Made already (FirstAttempt): its outcome is this attempt's.
                    self._first = None
                    started, error, first = first.started, first.error, None
                    raise error
                value = await call(target, options)
            except UpstreamError as exc:
                exc.target = exc.target or name
                self._last = exc
                verdict = judge(exc, retry, policy.retry, self._rng)
                self._log(target, started, exc, verdict.rule, retry, waited)
                if isinstance(exc, UpstreamTimeoutError) and exc.caller_limit:
                    # A deadline the caller chose passed: not a failure of the target (four
                    # callers at 50 ms must not open its breaker for everyone else).
                    self.health.released(name)
                else:
                    self._health_after(target, verdict.rule, verdict.retry_after_s)
                failure = _Failure(exc, verdict.rule)
                if verdict.wait_s is None:
                    return failure
                remaining = self.budget.remaining()
                if remaining is not None and verdict.wait_s >= remaining:
                    return failure  # sleeping would outlive the request: fall back instead
                waited = verdict.wait_s
                logger.info("target %r failed (%s); retrying in %.2fs", name, exc.message, waited)
                await self._sleep(waited)
                continue
            except asyncio.CancelledError:
                self.attempts.append(
                    Attempt(
                        name,
                        False,
                        _ms(started),
                        "cancelled (the caller went away)",
                        499,
                        "cancelled",
                        retry,
                        round(waited * 1000, 3),
                    )
                )
                self.health.released(name)
                raise
            self.attempts.append(Attempt(name, True, _ms(started), retry=retry, waited_ms=round(waited * 1000, 3)))
            if not self.defer_success:
                self.health.succeeded(name)
            return _Success(value)
        assert failure is not None
        return failure

    def _log(self, target: Target, started: float, exc: UpstreamError, rule: Rule, retry: int, waited: float) -> None:
        status = exc.upstream_status if isinstance(exc, UpstreamStatusError) else exc.status
        self.attempts.append(
            Attempt(
                target.info.name,
                False,
                _ms(started),
                exc.message,
                status,
                rule.error_class.value,
                retry,
                round(waited * 1000, 3),
            )
        )

    def _health_after(self, target: Target, rule: Rule, retry_after: float | None) -> None:
        name = target.info.name
        policy = target.reliability
        if not rule.trips_breaker:
            # The upstream answered (4xx): it is up, whatever it thought of the request.
            self.health.succeeded(name)
            return
        hold = None
        if retry_after is not None and retry_after > policy.retry.max_retry_after_s:
            hold = retry_after
        if self.health.failed(name, policy.breaker, hold_s=hold):
            logger.warning("circuit breaker of target %r opened", name)

    def _deadline(self) -> _Failure:
        self.health.count("deadline_exceeded")
        tried = len(self.attempts)
        last = f"; last error: {self._last.message}" if self._last else ""
        err = DeadlineExceededError(
            f"request deadline of {self.budget.total_s:g}s passed after {tried} attempt(s){last}",
            target=self._last.target if self._last else None,
        )
        return _Failure(err, _DEADLINE_RULE, deadline=True)

    def _nothing_tried(self) -> UpstreamError:
        if self._unfit and len(self._unfit) == len(self.skipped):
            return self._too_long()
        waits = [s.retry_in_s for s in self.skipped if s.retry_in_s is not None]
        headers = {"retry-after": str(max(1, math.ceil(min(waits))))} if waits else {}
        reasons = "; ".join(skip_reason(s) for s in self.skipped) or "no candidates"
        # Only the reasons that happened: agents classify errors by their words (Hermes Agent
        # reads "context window" as an overflow and compresses instead of waiting).
        return NoCandidateError(f"no target could be tried: {reasons}", headers=headers)

    # -- context windows --------------------------------------------------------------------

    def _does_not_fit(self, target: Target) -> bool:
        """The pre-call check: the target's window is known and the prompt clearly exceeds it."""
        assert self.prompt is not None
        info = target.info
        window = info.context_window or self.health.known_window(info.name, WINDOW_MEMORY_S)
        if not window or not self.prompt.exceeds(window):
            return False
        self.skipped.append(Skipped(info.name, "context_window", window=window, prompt_tokens=self.prompt.tokens()))
        self.health.count("context_window_skips")
        self._unfit[info.name] = window
        return True

    def _too_long(self) -> ContextWindowExceededError:
        """The 400 for a prompt that fits no candidate, worded like the providers' overflow
        errors ("prompt is too long", "maximum context length") so agents compact."""
        assert self.prompt is not None
        largest = max(self._unfit.values())
        windows = ", ".join(f"{name}: {tokens}" for name, tokens in self._unfit.items())
        return ContextWindowExceededError(
            f"prompt is too long: about {self.prompt.tokens()} tokens (estimated) > {largest} maximum context "
            f"length of every candidate ({windows})",
            upstream_status=400,
        )

    async def _window(self, target: Target) -> int | None:
        info = target.info
        if info.context_window:
            return info.context_window
        known, tokens = self.health.window(info.name, WINDOW_MEMORY_S)
        if known:
            return tokens
        source = target.backend
        if not target.reliability.discover_context_window or not isinstance(source, WindowSource):
            return None
        remaining = self.budget.remaining()
        timeout = WINDOW_LOOKUP_TIMEOUT_S if remaining is None else min(WINDOW_LOOKUP_TIMEOUT_S, remaining)
        if timeout <= 0:
            return None
        try:
            async with asyncio.timeout(timeout):
                tokens = await source.context_window(info, timeout)
        except (TimeoutError, UpstreamError, ValueError, TypeError) as exc:
            logger.info("context window of target %r unknown: %s", info.name, exc)
            tokens = None
        self.health.learn_window(info.name, tokens)
        return tokens

    async def _raise_floor(self, target: Target, floor: _Floor, error: UpstreamError | None) -> None:
        floor.overflowed = True
        if not target.info.context_window and error is not None:
            said = overflow_limit(error.message)
            if said is not None:
                self.health.learn_window(target.info.name, said)
        tokens = await self._window(target)
        if tokens is not None:
            floor.tokens = max(floor.tokens or 0, tokens)

    async def _too_small(self, target: Target, floor: _Floor) -> bool:
        if floor.tokens is None:
            return False  # the failed target's window is unknown: any other may be larger
        tokens = await self._window(target)
        if tokens is None or tokens > floor.tokens:
            return False
        self.skipped.append(Skipped(target.info.name, "context_window"))
        self.health.count("context_window_skips")
        return True


@dataclass(slots=True)
class _Success(Generic[T]):
    value: T


@dataclass(slots=True)
class _Failure:
    error: UpstreamError | None  # None: the target was skipped, not tried
    rule: Rule
    deadline: bool = False


_SKIP_RULE = Rule(ErrorClass.SERVER_ERROR, "circuit breaker open", False, "next", False)
_DEADLINE_RULE = Rule(ErrorClass.TIMEOUT, "request deadline passed", False, "never", False)


def limited(options: CallOptions, deadline: float | None, timeout: Mapping[str, float] | None) -> CallOptions:
    """``options`` with this request's ``deadline`` and ``timeout``: what
    ``dataclasses.replace`` makes, for a fifth of its cost (it inspects the fields every call)."""
    return CallOptions(options.raw_body, options.raw_format, options.headers, timeout, deadline)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def tries_at_once(health: Health, target: Target, budget: Budget) -> bool:
    """Whether a walk would make its first attempt on ``target`` (its first candidate) at once,
    skipping and counting nothing: no health hold on its backend, a closed breaker, no context
    window to check the prompt against, time left. Reads only (the relay lane's question,
    ``engine/relay.py``); the walk's own checks are in :meth:`Fallback.run` and ``_try_target``."""
    info = target.info
    if health.held(info.client or info.name) is not None or not health.closed(info.name, target.reliability.breaker):
        return False
    if info.context_window or health.known_window(info.name, WINDOW_MEMORY_S):
        return False
    remaining = budget.remaining()
    return remaining is None or remaining > 0


def book_success(health: Health, attempts: list[Attempt], name: str, started: float, *, tell: bool = True) -> None:
    """Books a first attempt on ``name`` (begun at ``started``) that answered, as
    ``_try_target`` books one: counted, recorded, and its breaker told (``tell``; a stream's
    is told at its end, as with ``defer_success``)."""
    health.count("attempts")
    attempts.append(Attempt(name, True, _ms(started)))
    if tell:
        health.succeeded(name)


def skip_reason(skip: Skipped) -> str:
    """Why one candidate was not tried, in words that name only that cause."""
    wait = f"; retry in {max(1, math.ceil(skip.retry_in_s))}s" if skip.retry_in_s is not None else ""
    if skip.reason == "circuit_open":
        return f"{skip.target}: circuit breaker open after repeated upstream failures{wait}"
    if skip.reason == "unhealthy":
        return f"{skip.target}: backend unhealthy (its health check failed){wait}"
    if skip.reason == "restricted":
        return f"{skip.target}: lacks a label the request requires"
    if skip.reason == "context_window":
        size = f" of {skip.window} tokens" if skip.window else ""
        prompt = f" (prompt ~{skip.prompt_tokens} tokens)" if skip.prompt_tokens else ""
        return f"{skip.target}: prompt does not fit its context window{size}{prompt}"
    return f"{skip.target}: {skip.reason}"
