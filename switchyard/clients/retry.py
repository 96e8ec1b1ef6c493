"""The error-class table and the retry/backoff policy: pure functions, no I/O, no clock of their own.

Layer: ``clients`` — imports ``protocol`` only (``httpx`` is not needed here).

The engine is the only owner of the retry loop (see :mod:`switchyard.engine.fallback`); this
module answers its questions:

* :func:`classify` / :func:`rule_for` — which row of :data:`ERROR_TABLE` an upstream failure
  falls in, and so whether to retry the same target, fall back, or fail;
* :func:`retry_after_s` — how long the upstream asked us to wait (``Retry-After``,
  ``retry-after-ms`` and the providers' rate-limit reset headers);
* :meth:`RetryPolicy.delay` — how long to wait before the next attempt on the same target
  (jittered exponential backoff, or the upstream's own wait when it gave one), or ``None`` when
  that wait is longer than :attr:`RetryPolicy.max_retry_after_s` and falling back is better.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)

if TYPE_CHECKING:
    from datetime import datetime


class ErrorClass(StrEnum):
    """The kinds of upstream failure the engine treats differently."""

    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server_error"
    CONNECTION = "connection"
    PROTOCOL = "protocol"
    CONTEXT_OVERFLOW = "context_overflow"
    AUTH = "auth"
    CLIENT_ERROR = "client_error"


Fallback = Literal["next", "larger_window", "if_route_allows", "never"]
"""What happens after a target failed for good: try the next candidate, only candidates with a
larger context window, the next candidate only when the route sets ``fallback_on_auth_error``,
or return the error to the caller."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the error-class table.

    Attributes:
        error_class: The class.
        matches: What the upstream did (documentation).
        retry: Whether the same target is tried again (within its attempt budget).
        fallback: What happens once the target is given up.
        trips_breaker: Whether the failure counts towards the target's circuit breaker.
    """

    error_class: ErrorClass
    matches: str
    retry: bool
    fallback: Fallback
    trips_breaker: bool


ERROR_TABLE: tuple[Rule, ...] = (
    Rule(ErrorClass.RATE_LIMITED, "HTTP 429", True, "next", True),
    Rule(ErrorClass.TIMEOUT, "HTTP 408, HTTP 504, connect/read/total timeout", True, "next", True),
    Rule(ErrorClass.SERVER_ERROR, "HTTP 500, 502 (HTML bodies too), 503, 529 and other 5xx", True, "next", True),
    Rule(ErrorClass.CONNECTION, "connection refused or reset, DNS failure", True, "next", True),
    Rule(ErrorClass.PROTOCOL, "200 with an undecodable body, empty or truncated stream", False, "next", True),
    Rule(
        ErrorClass.CONTEXT_OVERFLOW,
        "HTTP 400/413/422 saying the prompt does not fit (OpenAI, Anthropic, vLLM wording)",
        False,
        "larger_window",
        False,
    ),
    Rule(ErrorClass.AUTH, "HTTP 401, 403", False, "if_route_allows", False),
    Rule(ErrorClass.CLIENT_ERROR, "any other 4xx", False, "never", False),
)
"""The error-class table (also in ``docs/reliability.md``; a test keeps the two in step)."""

_RULES = {rule.error_class: rule for rule in ERROR_TABLE}


def _class_for_status(status: int) -> ErrorClass:
    if status == 429:
        return ErrorClass.RATE_LIMITED
    if status in (408, 504):
        return ErrorClass.TIMEOUT
    if status in (401, 403):
        return ErrorClass.AUTH
    if status >= 500:
        return ErrorClass.SERVER_ERROR
    return ErrorClass.CLIENT_ERROR


def classify(error: UpstreamError) -> ErrorClass:
    """The class of an upstream failure."""
    if isinstance(error, ContextWindowExceededError):
        return ErrorClass.CONTEXT_OVERFLOW
    if isinstance(error, UpstreamStatusError):
        return _class_for_status(error.upstream_status)
    if isinstance(error, UpstreamTimeoutError):
        return ErrorClass.TIMEOUT
    if isinstance(error, UpstreamConnectionError):
        return ErrorClass.CONNECTION
    if isinstance(error, UpstreamProtocolError):
        return ErrorClass.PROTOCOL
    # A bare UpstreamError: an in-band stream error or an empty stream. A status other than the
    # type's default 502 came from the upstream and says more than the type.
    if error.status >= 400 and error.status != UpstreamError.status:
        return _class_for_status(error.status)
    return ErrorClass.PROTOCOL


def rule_for(error: UpstreamError) -> Rule:
    """The table row for ``error``."""
    return _RULES[classify(error)]


def should_retry(error: UpstreamError) -> bool:
    """Whether the same target may be tried again after ``error``."""
    return rule_for(error).retry


# -- upstream-requested waits ----------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# Rate-limit families: (reset header, remaining header). OpenAI sends durations ("6m0s"),
# Anthropic RFC 3339 timestamps.
_OPENAI_KINDS = ("requests", "tokens")
_ANTHROPIC_KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


def _seconds(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _duration(value: str) -> float | None:
    """``"1s"``, ``"6m0s"``, ``"250ms"``, ``"1h2m3.5s"`` or a bare number of seconds."""
    plain = _seconds(value)
    if plain is not None:
        return plain
    text = value.strip().replace(" ", "")
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _until(when: datetime, now: float) -> float:
    return max(0.0, when.timestamp() - now)


def _http_date(value: str, now: float) -> float | None:
    # Imported here: the email package costs the proxy's start-up more than all retry policy,
    # and only an upstream that sends an HTTP-date Retry-After needs it.
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return _until(when, now)


def _rfc3339(value: str, now: float) -> float | None:
    from datetime import datetime

    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return _until(when, now)


def _pick(waits: list[tuple[float, bool]]) -> float | None:
    """The wait of the exhausted limits when the upstream says which; otherwise the longest."""
    if not waits:
        return None
    exhausted = [w for w, empty in waits if empty]
    return max(exhausted or [w for w, _ in waits])


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long the upstream asked the caller to wait, in seconds, or ``None``.

    Read in order of precedence: ``retry-after-ms``; ``retry-after`` (seconds or an HTTP date);
    OpenAI's ``x-ratelimit-reset-{requests,tokens}`` (durations such as ``6m0s``); Anthropic's
    ``anthropic-ratelimit-*-reset`` (RFC 3339 times); a generic ``x-ratelimit-reset`` (seconds,
    or a Unix time when larger than 10⁹). Among several reset headers of one family, the limit
    whose ``remaining`` is ``0`` wins; when none says so, the longest wait.

    Args:
        headers: The upstream's response headers (any case).
        now: Current Unix time (default: ``time.time()``), for date-valued headers.
    """
    h = {k.lower(): v for k, v in headers.items()}
    wall = time.time() if now is None else now
    if "retry-after-ms" in h:
        ms = _seconds(h["retry-after-ms"])
        if ms is not None:
            return ms / 1000
    if "retry-after" in h:
        value = h["retry-after"].strip()
        found = _seconds(value)
        if found is None:
            found = _http_date(value, wall)
        if found is not None:
            return found
    waits: list[tuple[float, bool]] = []
    for kind in _OPENAI_KINDS:
        reset = h.get(f"x-ratelimit-reset-{kind}")
        wait = _duration(reset) if reset else None
        if wait is not None:
            waits.append((wait, h.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0"))
    if not waits:
        for kind in _ANTHROPIC_KINDS:
            reset = h.get(f"anthropic-ratelimit-{kind}-reset")
            wait = _rfc3339(reset, wall) if reset else None
            if wait is not None:
                waits.append((wait, h.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0"))
    picked = _pick(waits)
    if picked is not None:
        return picked
    generic = h.get("x-ratelimit-reset")
    if generic:
        number = _seconds(generic)
        if number is not None:
            return max(0.0, number - wall) if number > 1e9 else number
    return None


def error_retry_after(error: UpstreamError, *, now: float | None = None) -> float | None:
    """:func:`retry_after_s` of the upstream answer behind ``error`` (``None`` without headers)."""
    headers = error.upstream_headers if isinstance(error, UpstreamStatusError) else error.headers
    return retry_after_s(headers, now=now) if headers else None


# -- backoff ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one target (``llm_clients.<name>.max_retries`` and ``retry``).

    Attributes:
        max_retries: Extra attempts on the same target after the first (0: none).
        initial_delay_s: Backoff before the first retry, before jitter.
        max_delay_s: Cap on the backoff.
        multiplier: Growth of the backoff per retry.
        jitter: Fraction of the backoff taken off at random (0: none, 1: "full jitter").
        max_retry_after_s: Longest upstream-requested wait (``Retry-After`` …) honoured; a longer
            one means "fall back now" instead of sleeping.
    """

    max_retries: int = 2
    initial_delay_s: float = 0.25
    max_delay_s: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_retry_after_s: float = 10.0

    def backoff(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """Jittered exponential backoff before retry number ``retry`` (0-based), in seconds."""
        base = min(self.max_delay_s, self.initial_delay_s * self.multiplier ** max(0, retry))
        return base * (1.0 - self.jitter * rng())

    def delay(
        self, retry: int, retry_after: float | None = None, rng: Callable[[], float] = random.random
    ) -> float | None:
        """Wait before retry number ``retry`` (0-based), or ``None`` to give up on this target now.

        The upstream's own wait wins over the backoff when it gave one (never retrying sooner
        than asked), unless it exceeds :attr:`max_retry_after_s`.
        """
        if retry >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after_s else None
        return self.backoff(retry, rng)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do after a failed attempt.

    Attributes:
        rule: The table row.
        wait_s: Seconds to wait before retrying the same target, or ``None`` to stop trying it.
        retry_after_s: The wait the upstream asked for, if any.
    """

    rule: Rule
    wait_s: float | None
    retry_after_s: float | None


def judge(error: UpstreamError, retry: int, policy: RetryPolicy, rng: Callable[[], float] = random.random) -> Verdict:
    """Classifies a failed attempt (retry number ``retry``, 0 = first try) and picks the wait."""
    rule = rule_for(error)
    after = error_retry_after(error)
    wait = policy.delay(retry, after, rng) if rule.retry else None
    return Verdict(rule, wait, after)
