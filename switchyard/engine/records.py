"""Decision records: one structured line per request, and where they go.

Layer: ``engine``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from switchyard.protocol.response import Usage

logger = logging.getLogger("switchyard.decisions")


@dataclass(slots=True)
class Attempt:
    """One upstream attempt of the answer call.

    Attributes:
        target: The target tried.
        ok: Whether it answered (for streams: whether its first content arrived).
        elapsed_ms: Time the attempt took.
        error: What went wrong.
        status: The upstream's HTTP status (or the error's status).
        error_class: The row of the error-class table (``rate_limited``, ``timeout`` …).
        retry: 0 for the first attempt on this target, 1 for its first retry …
        waited_ms: Backoff (or ``Retry-After``) slept before this attempt.
    """

    target: str
    ok: bool
    elapsed_ms: float
    error: str | None = None
    status: int | None = None
    error_class: str | None = None
    retry: int = 0
    waited_ms: float = 0.0


@dataclass(slots=True)
class Skipped:
    """A candidate the engine did not try.

    Attributes:
        target: The target.
        reason: ``circuit_open`` (its breaker is open or a probe is in flight),
            ``unhealthy`` (a health probe found its backend down) or ``context_window`` (its
            window is not larger than one that already overflowed, or the prompt clearly does
            not fit it).
        retry_in_s: For ``circuit_open`` and ``unhealthy``: seconds until it may be tried again.
        window: For ``context_window`` skips before any call: the target's context window.
        prompt_tokens: For those skips: the prompt's estimated tokens.
    """

    target: str
    reason: str
    retry_in_s: float | None = None
    window: int | None = None
    prompt_tokens: int | None = None


@dataclass(slots=True)
class RouterCost:
    """Model calls a router made while deciding (judges, weak-first answers)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_ms: float = 0.0
    failures: int = 0


@dataclass(slots=True)
class DecisionRecord:
    """Everything worth knowing about how one request was routed and served.

    Written once per request when the answer is complete (for streams: when the stream ends).

    ``feature_cost_usd`` (feature extraction of learned routers), ``baseline_cost_usd`` (what the
    route's capable target would have charged for the same tokens: the always-capable baseline)
    and ``tier`` (``capable``, ``efficient`` or ``None``) are filled in by
    :class:`~switchyard.engine.accounting.Pricing` before any sink sees the record.
    """

    request_id: str
    route: str
    router: str
    inbound_format: str | None = None
    stream: bool = False
    ts: float = field(default_factory=time.time)
    session_id: str | None = None
    session_source: str | None = None
    agent_id: str | None = None
    turn_index: int = 0
    source: str = ""
    reason: str = ""
    score: float | None = None
    confidence: float | None = None
    candidates: list[str] = field(default_factory=list)
    selected: str | None = None
    selected_model: str | None = None
    served_model: str | None = None
    """The ``model`` the upstream's answer named (see :mod:`switchyard.engine.served_model`)."""
    model_mismatch: bool = False
    """Whether ``served_model`` is another model than ``selected_model`` (aliases tolerated)."""
    attempts: list[Attempt] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    fallbacks_tried: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    router_cost: RouterCost = field(default_factory=RouterCost)
    router_attempts: list[Attempt] = field(default_factory=list)
    feature_cost_usd: float = 0.0
    baseline_cost_usd: float | None = None
    tier: str | None = None
    overhead_ms: float = 0.0
    duration_ms: float = 0.0
    status: int = 200
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    """The HTTP path the request came in on (``/v1/messages``…); ``None`` for library calls."""

    def set_usage(self, usage: Usage) -> None:
        """Copies token counts from ``usage``."""
        self.input_tokens = usage.input_tokens
        self.output_tokens = usage.output_tokens
        self.cache_read_tokens = usage.cache_read_tokens
        self.cache_creation_tokens = usage.cache_creation_tokens
        self.reasoning_tokens = usage.reasoning_tokens

    @property
    def feature_ms(self) -> float | None:
        """Milliseconds a learned router spent extracting this request's features (``None``
        when it extracted none). The one reading of ``details["feature_ms"]`` that pricing,
        metrics and traces share; the probe's own numpy inference (``probe_ms``) is not part
        of it."""
        value = self.details.get("feature_ms")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    @property
    def total_cost_usd(self) -> float:
        """Answer cost plus routing cost (the router's model calls and its feature extraction)."""
        return self.cost_usd + self.router_cost.cost_usd + self.feature_cost_usd

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    def to_json(self) -> bytes:
        """One compact JSON line (no newline)."""
        # orjson serialises (nested, slotted) dataclasses itself: ~10x cheaper than going
        # through dataclasses.asdict, and this runs once per request when records are logged.
        return orjson.dumps(self, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


DecisionSink = Callable[[DecisionRecord], None]
"""Receives every finished record. Must be quick and must not raise."""


class JsonlSink:
    """Appends records to a JSONL file (thread-safe, one line per record, flushed per line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("ab", buffering=0)
        self._lock = threading.Lock()

    def __call__(self, record: DecisionRecord) -> None:
        line = record.to_json() + b"\n"
        with self._lock:
            self._fh.write(line)

    def close(self) -> None:
        """Closes the file."""
        self._fh.close()


def log_sink(record: DecisionRecord) -> None:
    """Logs the record at INFO on the ``switchyard.decisions`` logger (as JSON)."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s", record.to_json().decode())
