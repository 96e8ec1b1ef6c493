"""Target health: circuit breakers, reliability counters and learned context windows.

Layer: ``engine``. One :class:`Health` is shared by every engine of a
:class:`~switchyard.api.Switchyard` (one engine per event loop), so it is thread-safe.

A breaker per target counts consecutive failed attempts of the classes that say something about
the upstream's health (5xx, 429, timeouts, connection and protocol errors, mid-stream failures).
After ``failures`` of them in a row it opens: the target is skipped (and the skip written in the
decision record) for ``cooldown_s``. Then it is half-open: exactly one request probes it; success
closes the breaker, failure opens it for another cooldown. A 429 whose ``Retry-After`` is longer
than the retry policy honours opens the breaker at once for that long (capped by
``max_cooldown_s``), so the next requests do not knock on a door that said "come back in an hour".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

State = Literal["closed", "open", "half_open"]

COUNTERS = (
    "attempts",
    "retries",
    "fallbacks",
    "failed_requests",
    "mid_stream_failures",
    "breaker_opened",
    "breaker_skips",
    "context_window_skips",
    "deadline_exceeded",
    "cancelled",
)
"""Names of the reliability counters (see :meth:`Health.stats`)."""


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """``llm_clients.<name>.circuit_breaker``, applied to each of the client's targets.

    Attributes:
        failures: Consecutive failed attempts that open the breaker (0 disables it).
        cooldown_s: How long an open breaker skips the target before a probe.
        max_cooldown_s: Cap on a cooldown requested by an upstream's ``Retry-After``.
    """

    failures: int = 5
    cooldown_s: float = 30.0
    max_cooldown_s: float = 600.0

    @property
    def enabled(self) -> bool:
        """Whether the breaker is on."""
        return self.failures > 0


@dataclass(slots=True)
class Admission:
    """Whether an attempt on a target may go ahead.

    Attributes:
        allowed: Go ahead.
        probe: This attempt is the half-open probe.
        retry_in_s: When skipped, seconds until the target may be probed.
    """

    allowed: bool
    probe: bool = False
    retry_in_s: float = 0.0


@dataclass(slots=True)
class _Breaker:
    state: State = "closed"
    consecutive: int = 0
    open_until: float = 0.0
    probe_since: float | None = None
    opened: int = 0


@dataclass(slots=True)
class _Window:
    tokens: int | None
    at: float


class Health:
    """Circuit breakers per target, reliability counters and learned context windows.

    Args:
        clock: Monotonic clock (tests inject a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._breakers: dict[str, _Breaker] = {}
        self._counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._windows: dict[str, _Window] = {}

    # -- breakers ---------------------------------------------------------------------------

    def admit(self, target: str, policy: BreakerPolicy) -> Admission:
        """Asks to send an attempt to ``target``; a skip is counted."""
        if not policy.enabled:
            return Admission(True)
        with self._lock:
            b = self._breakers.setdefault(target, _Breaker())
            now = self._clock()
            if b.state == "closed":
                return Admission(True)
            if b.state == "open" and now >= b.open_until:
                b.state = "half_open"
                b.probe_since = None
            if b.state == "half_open":
                # One probe at a time; a probe that never reported back (its caller vanished
                # without a trace) stops blocking others after a cooldown.
                if b.probe_since is None or now - b.probe_since > policy.cooldown_s:
                    b.probe_since = now
                    return Admission(True, probe=True)
                self._counters["breaker_skips"] += 1
                return Admission(False, retry_in_s=max(0.0, b.probe_since + policy.cooldown_s - now))
            self._counters["breaker_skips"] += 1
            return Admission(False, retry_in_s=max(0.0, b.open_until - now))

    def succeeded(self, target: str) -> None:
        """The target answered (any answer that is not a health failure)."""
        with self._lock:
            b = self._breakers.get(target)
            if b is not None:
                b.state, b.consecutive, b.probe_since = "closed", 0, None

    def failed(self, target: str, policy: BreakerPolicy, *, hold_s: float | None = None) -> bool:
        """A health failure of ``target``; returns whether its breaker opened.

        Args:
            target: The target.
            policy: Its breaker policy.
            hold_s: The upstream asked to be left alone this long (a long ``Retry-After``).
        """
        if not policy.enabled:
            return False
        with self._lock:
            b = self._breakers.setdefault(target, _Breaker())
            now = self._clock()
            b.consecutive += 1
            cooldown: float | None = None
            if b.state == "half_open" or b.consecutive >= policy.failures:
                cooldown = policy.cooldown_s
            if hold_s is not None:
                cooldown = max(cooldown or 0.0, min(hold_s, policy.max_cooldown_s))
            if cooldown is None:
                return False
            was_open = b.state == "open"
            b.state, b.open_until, b.probe_since = "open", max(b.open_until, now + cooldown), None
            if not was_open:
                b.opened += 1
                self._counters["breaker_opened"] += 1
            return not was_open

    def released(self, target: str) -> None:
        """An attempt ended without saying anything about health (cancelled): free the probe."""
        with self._lock:
            b = self._breakers.get(target)
            if b is not None and b.state == "half_open":
                b.probe_since = None

    def state(self, target: str) -> State:
        """The breaker state of ``target`` (``closed`` when never failed)."""
        with self._lock:
            b = self._breakers.get(target)
            if b is None:
                return "closed"
            if b.state == "open" and self._clock() >= b.open_until:
                return "half_open"
            return b.state

    # -- counters -----------------------------------------------------------------------------

    def count(self, name: str, n: int = 1) -> None:
        """Adds ``n`` to a counter of :data:`COUNTERS`."""
        with self._lock:
            self._counters[name] += n

    def stats(self) -> dict[str, Any]:
        """Counters and breaker states, JSON-ready.

        ``counters``: attempts (upstream calls), retries (attempts after the first on one
        target), fallbacks (requests served by a later candidate), failed_requests,
        mid_stream_failures (streams ended by an error event after content reached the caller),
        breaker_opened, breaker_skips, context_window_skips, deadline_exceeded, cancelled.
        ``targets``: per target that ever failed, its breaker state, consecutive failures and how
        often it opened.
        """
        with self._lock:
            now = self._clock()
            targets = {
                name: {
                    "state": "half_open" if b.state == "open" and now >= b.open_until else b.state,
                    "consecutive_failures": b.consecutive,
                    "opened": b.opened,
                    "open_for_s": round(max(0.0, b.open_until - now), 3) if b.state == "open" else 0.0,
                }
                for name, b in self._breakers.items()
            }
            return {"counters": dict(self._counters), "targets": targets}

    # -- context windows ----------------------------------------------------------------------

    def window(self, target: str, max_age_s: float) -> tuple[bool, int | None]:
        """A learned context window: ``(known, tokens)``; entries older than ``max_age_s`` are
        forgotten (``tokens`` is ``None`` when a lookup found nothing)."""
        with self._lock:
            found = self._windows.get(target)
            if found is None or self._clock() - found.at > max_age_s:
                return False, None
            return True, found.tokens

    def learn_window(self, target: str, tokens: int | None) -> None:
        """Remembers a target's context window (``None``: looked up, not found)."""
        with self._lock:
            self._windows[target] = _Window(tokens, self._clock())
