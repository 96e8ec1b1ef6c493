"""Target health: circuit breakers, backend probes, markup leaks, counters and context windows.

Layer: ``engine``. One :class:`Health` is shared by every engine of a
:class:`~switchyard.api.Switchyard` (one engine per event loop), so it is thread-safe.

A breaker per target counts consecutive failed attempts of the classes that say something about
the upstream's health (5xx, 429, timeouts, connection and protocol errors, mid-stream failures).
After ``failures`` of them in a row it opens: the target is skipped (and the skip written in the
decision record) for ``cooldown_s``. Then it is half-open: exactly one request probes it; success
closes the breaker, failure opens it for another cooldown. A 429 whose ``Retry-After`` is longer
than the retry policy honours opens the breaker at once for that long (capped by
``max_cooldown_s``), so the next requests do not knock on a door that said "come back in an hour".

Two more signals are kept here, both shown by ``GET /health`` and ``GET /v1/stats``:

* **Backend probes** (per ``llm_clients`` entry, see :mod:`switchyard.engine.monitor`): the last
  answer of the upstream's health endpoint. A backend whose probe failed is *held out of
  routing* until a later probe says it is up again (or, as a safety net, until its hold expires).
* **Markup leaks** (per target, see :mod:`switchyard.engine.markup`): a Chat upstream that put
  ``</think>`` or tool-call XML in ``content``. The target is *flagged degraded* for
  :data:`MARKUP_FLAG_S` after its last leak; routing is unaffected unless the client asked for
  ``markup_leak: fallback``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from switchyard._dataclass import dataclass

if TYPE_CHECKING:
    from switchyard.clients.health import Probe

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
    "unhealthy_skips",
    "markup_leaks",
)
"""Names of the reliability counters (see :meth:`Health.stats`)."""

MARKUP_FLAG_S = 600.0
"""How long a target stays flagged degraded after its last markup leak."""


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


@dataclass(frozen=True, slots=True)
class HealthCheckPolicy:
    """``llm_clients.<name>.health_check``: how the upstream's health endpoint is probed.

    Attributes:
        enabled: Probe at all (``False``: reported ``not_probed``, never taken out of routing).
        path: Health endpoint under the server root, or an absolute URL; ``None`` chooses by
            format (see :mod:`switchyard.clients.health`).
        interval_s: Probe in the background this often; ``None``: only on ``GET /health?deep=1``
            (and re-probes of a backend found down).
        timeout_s: Longest a probe may take.
    """

    enabled: bool = True
    path: str | None = None
    interval_s: float | None = None
    timeout_s: float = 1.0


@dataclass(frozen=True, slots=True)
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


_GO = Admission(True)
"""The admission of an attempt on a closed breaker (immutable: one for all)."""


@dataclass(slots=True)
class _Breaker:
    state: State = "closed"
    consecutive: int = 0
    open_until: float = 0.0
    probe_since: float | None = None
    opened: int = 0


@dataclass(slots=True)
class _Backend:
    probe: Probe | None = None
    checked_at: float | None = None
    down_until: float = 0.0
    probes: int = 0
    failed_probes: int = 0


@dataclass(slots=True)
class _Leaks:
    count: int = 0
    markers: dict[str, int] = field(default_factory=dict)
    last_at: float = 0.0


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
        self._backends: dict[str, _Backend] = {}
        # Backends held out of routing: client name -> monotonic time the hold ends. Read without
        # the lock on every attempt (a dict lookup is atomic), so the common case costs ~nothing.
        self._held: dict[str, float] = {}
        self._leaks: dict[str, _Leaks] = {}

    # -- breakers ---------------------------------------------------------------------------

    def admit(self, target: str, policy: BreakerPolicy) -> Admission:
        """Asks to send an attempt to ``target``; a skip is counted."""
        if not policy.enabled:
            return _GO
        with self._lock:
            b = self._breakers.get(target)
            if b is None:
                b = self._breakers[target] = _Breaker()
            if b.state == "closed":  # nearly every attempt: no clock, no new objects
                return _GO
            now = self._clock()
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

    def closed(self, target: str, policy: BreakerPolicy) -> bool:
        """Whether :meth:`admit` would let an attempt through as a closed breaker does: at once,
        taking no half-open probe and counting no skip. Read without the lock; a target seen for
        the first time gets its (closed) breaker, as from :meth:`admit`."""
        if not policy.enabled:
            return True
        b = self._breakers.get(target)
        if b is None:
            with self._lock:
                b = self._breakers.setdefault(target, _Breaker())
        return b.state == "closed"

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
        unhealthy_skips (candidates skipped because their backend's health probe failed),
        markup_leaks (answers of Chat upstreams with reasoning or tool-call markup in the text).
        ``targets``: per target that ever failed or leaked markup, its breaker state, consecutive
        failures, how often it opened and its markup leaks. ``backends``: per probed
        ``llm_clients`` entry, its last probe (see :meth:`backend`).
        """
        with self._lock:
            now = self._clock()
            targets: dict[str, dict[str, Any]] = {
                name: {
                    "state": "half_open" if b.state == "open" and now >= b.open_until else b.state,
                    "consecutive_failures": b.consecutive,
                    "opened": b.opened,
                    "open_for_s": round(max(0.0, b.open_until - now), 3) if b.state == "open" else 0.0,
                }
                for name, b in self._breakers.items()
            }
            for name, leaks in self._leaks.items():
                entry = targets.setdefault(name, {"state": "closed", "consecutive_failures": 0, "opened": 0})
                entry["markup_leaks"] = self._leak_view(leaks, now)
            backends = {name: self._backend_view(b, now) for name, b in self._backends.items()}
            return {"counters": dict(self._counters), "targets": targets, "backends": backends}

    # -- context windows ----------------------------------------------------------------------

    def window(self, target: str, max_age_s: float) -> tuple[bool, int | None]:
        """A learned context window: ``(known, tokens)``; entries older than ``max_age_s`` are
        forgotten (``tokens`` is ``None`` when a lookup found nothing)."""
        with self._lock:
            found = self._windows.get(target)
            if found is None or self._clock() - found.at > max_age_s:
                return False, None
            return True, found.tokens

    def known_window(self, target: str, max_age_s: float) -> int | None:
        """A learned context window, without waiting on the lock (the pre-call fit check runs
        on every candidate of every request); ``None`` when none is remembered."""
        found = self._windows.get(target)
        if found is None or self._clock() - found.at > max_age_s:
            return None
        return found.tokens

    def learn_window(self, target: str, tokens: int | None) -> None:
        """Remembers a target's context window (``None``: looked up, not found)."""
        with self._lock:
            self._windows[target] = _Window(tokens, self._clock())

    # -- backend probes -------------------------------------------------------------------------

    def record_probe(self, client: str, probe: Probe, *, hold_s: float) -> bool:
        """Stores a health probe of ``client``; returns whether its up/down state changed.

        A ``down`` probe holds the backend out of routing for ``hold_s`` (a later probe renews
        or lifts the hold); any other outcome lifts it.
        """
        with self._lock:
            b = self._backends.setdefault(client, _Backend())
            before = b.probe.state if b.probe is not None else None
            now = self._clock()
            b.probe, b.checked_at = probe, now
            b.probes += 1
            if probe.state == "down":
                b.failed_probes += 1
                b.down_until = now + hold_s
                self._held[client] = b.down_until
            else:
                b.down_until = 0.0
                self._held.pop(client, None)
            return before != probe.state and (before == "down" or probe.state == "down")

    def held(self, client: str) -> float | None:
        """Seconds ``client`` stays out of routing after a failed probe, or ``None``."""
        until = self._held.get(client)
        if until is None:
            return None
        left = until - self._clock()
        # An expired entry stays until the next probe replaces it: removing it here, without
        # the lock, could drop a hold another thread has just renewed.
        return left if left > 0 else None

    def last_probe(self, client: str) -> tuple[Probe | None, float | None]:
        """The last probe of ``client`` and its monotonic time (``(None, None)`` if never)."""
        with self._lock:
            b = self._backends.get(client)
            return (None, None) if b is None else (b.probe, b.checked_at)

    def backend(self, client: str) -> dict[str, Any]:
        """The last probe of ``client``, JSON-ready: ``state`` (``up``, ``down``, ``auth_error``,
        ``rate_limited``, ``not_probed``, or ``unknown`` before the first probe), ``status``, ``url``,
        ``latency_ms``, ``error``, ``checked_s_ago``, ``held_out_for_s``, ``probes``,
        ``failed_probes``."""
        with self._lock:
            return self._backend_view(self._backends.get(client) or _Backend(), self._clock())

    @staticmethod
    def _backend_view(b: _Backend, now: float) -> dict[str, Any]:
        p = b.probe
        return {
            "state": p.state if p is not None else "unknown",
            "status": p.status if p is not None else None,
            "url": p.url if p is not None else None,
            "latency_ms": p.latency_ms if p is not None else None,
            "error": p.error if p is not None else None,
            "checked_s_ago": None if b.checked_at is None else round(now - b.checked_at, 3),
            "held_out_for_s": round(max(0.0, b.down_until - now), 3),
            "probes": b.probes,
            "failed_probes": b.failed_probes,
        }

    # -- markup leaks ---------------------------------------------------------------------------

    def markup_leak(self, target: str, marker: str) -> bool:
        """Counts a markup leak of ``target``; returns ``True`` the first time this target leaks
        this marker (the caller logs it once)."""
        with self._lock:
            leaks = self._leaks.setdefault(target, _Leaks())
            first = marker not in leaks.markers
            leaks.count += 1
            leaks.markers[marker] = leaks.markers.get(marker, 0) + 1
            leaks.last_at = self._clock()
            self._counters["markup_leaks"] += 1
            return first

    def leaks(self, target: str) -> dict[str, Any] | None:
        """``target``'s markup leaks (``count``, ``markers``, ``last_s_ago``, ``flagged``), or
        ``None`` when it never leaked."""
        with self._lock:
            leaks = self._leaks.get(target)
            return None if leaks is None else self._leak_view(leaks, self._clock())

    @staticmethod
    def _leak_view(leaks: _Leaks, now: float) -> dict[str, Any]:
        ago = now - leaks.last_at
        return {
            "count": leaks.count,
            "markers": dict(leaks.markers),
            "last_s_ago": round(ago, 3),
            "flagged": ago < MARKUP_FLAG_S,
        }
