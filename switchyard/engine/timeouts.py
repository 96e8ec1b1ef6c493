"""Per-request time limits: the ``x-switchyard-timeout`` header and the request deadline.

Layer: ``engine``.

A caller may tighten (or loosen) the limits of one request:

* ``x-switchyard-timeout: 20`` — the whole request (routing, every attempt, retries, backoff
  waits and, for streams, the stream up to its last byte) must be done within 20 s;
* ``x-switchyard-timeout: total=20, read=5, connect=1`` — the same, plus ``read`` and
  ``connect`` replacing the upstream clients' values for every attempt.

The library API takes the same thing as ``timeout=20`` or ``timeout={"total": 20, "read": 5}``
and the drop-in clients as ``extra_headers={"x-switchyard-timeout": "20"}``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import InvalidRequestError

HEADER_TIMEOUT = "x-switchyard-timeout"
_KEYS = ("total", "read", "connect")


@dataclass(frozen=True, slots=True)
class Budget:
    """The time limits of one request.

    Attributes:
        deadline: ``time.monotonic()`` by which the request must be done, or ``None``.
        total_s: The requested total, for messages.
        overrides: ``read``/``connect`` replacing the clients' values.
    """

    deadline: float | None = None
    total_s: float | None = None
    overrides: Mapping[str, float] | None = None

    def remaining(self) -> float | None:
        """Seconds left, or ``None`` without a deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()


def parse_timeout(value: str) -> dict[str, float]:
    """Parses an ``x-switchyard-timeout`` value.

    Raises:
        InvalidRequestError: The value is not a positive number of seconds or a list of
            ``total=``/``read=``/``connect=`` items.
    """
    text = value.strip()
    out: dict[str, float] = {}
    items = [text] if "=" not in text else [p for p in text.replace(";", ",").split(",") if p.strip()]
    for item in items:
        key, _, number = item.partition("=") if "=" in item else ("total", "", item)
        key = key.strip().lower()
        if key not in _KEYS:
            raise InvalidRequestError(
                f"{HEADER_TIMEOUT}: unknown limit {key!r}; use total=, read= and connect= (seconds)",
                param=HEADER_TIMEOUT,
            )
        out[key] = _positive(number)
    if not out:
        raise InvalidRequestError(f"{HEADER_TIMEOUT}: empty value", param=HEADER_TIMEOUT)
    return out


def _positive(text: str) -> float:
    try:
        number = float(text.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise InvalidRequestError(
            f"{HEADER_TIMEOUT}: {text.strip()!r} is not a positive number of seconds", param=HEADER_TIMEOUT
        )
    return number


def format_timeout(timeout: float | Mapping[str, float]) -> str:
    """The header value for a library-API ``timeout`` argument (validated)."""
    if isinstance(timeout, Mapping):
        text = ", ".join(f"{k}={float(v)}" for k, v in timeout.items())
    else:
        text = str(float(timeout))
    parse_timeout(text)
    return text


def budget(headers: Mapping[str, str], elapsed_s: float = 0.0) -> Budget:
    """The request's :class:`Budget` from its (lower-cased) headers.

    Args:
        headers: Caller headers.
        elapsed_s: Time already spent on the request (the deadline counts from its arrival).
    """
    raw = headers.get(HEADER_TIMEOUT)
    if not raw:
        return Budget()
    limits = parse_timeout(raw)
    total = limits.pop("total", None)
    deadline = None if total is None else time.monotonic() - elapsed_s + total
    return Budget(deadline, total, limits or None)
