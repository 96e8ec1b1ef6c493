"""Decision records: one structured line per request, and where they go.

Layer: ``engine``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.engine.reply import SHUTDOWN_CANCEL
from switchyard.protocol.access import Caller
from switchyard.protocol.messages import TextPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.protocol.session import tenant_namespace
from switchyard.protocol.targets import TargetInfo

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
            not fit it) or ``restricted`` (it lacks a label the request requires).
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
    tenant: str | None = None
    """Whose session this is: the tenant of the request's inbound key (``server.tenants``;
    :mod:`switchyard.protocol.tenancy`), ``None`` without keys. ``session_id`` is unique within
    a tenant only: join by session on both."""
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
    experiment_cost_usd: float = 0.0
    """What the route's experiment spent on this request besides answering it: a shadow
    request's mirror call (``details.mirror``; ``engine/mirror.py``)."""
    baseline_cost_usd: float | None = None
    tier: str | None = None
    overhead_ms: float = 0.0
    duration_ms: float = 0.0
    status: int = 200
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    """The HTTP path the request came in on (``/v1/messages``…); ``None`` for library calls."""
    _preview: str | None = None
    """The start of the request's latest message, for the dashboard's session timeline (only
    when ``server.dashboard`` asks for it). Kept in memory only: orjson leaves fields with a
    leading underscore out, so it never reaches a decision log or the decisions logger."""
    _caller: Caller | None = None
    """Who sent the request (bound when the record is opened; see :attr:`caller`). In memory
    only, like ``_preview``: the logs carry the key's name as ``details.api_key``."""
    _redact: Callable[[str], str] | None = None
    """Masks what the request's ``restrict:`` rules matched (set when a rule matched): applied
    to the record's error texts before any sink sees them (:meth:`mask`). In memory only."""

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
    def session_key(self) -> str | None:
        """``<route>:<session id>`` — its tenant's namespace before the id when it has one
        (``agent:~t:alice:s-1``) — or ``None`` without a session: how the ledger
        (``/v1/stats``) and the dashboard tell sessions apart, so two tenants' same id never
        merge."""
        if self.session_id is None:
            return None
        return f"{self.route}:{tenant_namespace(self.tenant)}{self.session_id}"

    @property
    def total_cost_usd(self) -> float:
        """Answer cost plus routing cost (the router's model calls and its feature extraction)
        plus the experiment's (a shadow request's mirror call): everything the request spent."""
        return self.cost_usd + self.router_cost.cost_usd + self.feature_cost_usd + self.experiment_cost_usd

    @property
    def caller(self) -> Caller | None:
        """The inbound key (and tenant) of the request this record belongs to, bound when the
        request was admitted: what budgets, attribution and tenant scoping read, wherever and
        whenever the record is handed out. ``None`` without inbound keys."""
        return self._caller

    def bind(self, caller: Caller | None) -> None:
        """Binds the request's caller to this record, names its key as ``details.api_key`` and
        its tenant as :attr:`tenant`."""
        self._caller = caller
        if caller is not None:
            self.details["api_key"] = caller.key
            self.tenant = caller.tenant

    def mask(self) -> None:
        """Masks what the request's ``restrict:`` rules matched in the record's texts: its error
        and its attempts' (an upstream's error may quote the request: a schema, a value it
        refused), the router's reason and its ``details`` (a judge's or advisor's words may
        quote the prompt)."""
        redact = self._redact
        if redact is None:
            return
        if self.error:
            self.error = redact(self.error)
        if self.reason:
            self.reason = redact(self.reason)
        for attempt in (*self.attempts, *self.router_attempts):
            if attempt.error:
                attempt.error = redact(attempt.error)
        self.details = _masked(self.details, redact)

    def restrict(self, restriction: dict[str, Any], redact: Callable[[str], str] | None) -> None:
        """Notes the request's restriction (``details.restriction``) and masks what its rules
        matched (``redact``; ``None``: no rule matched) in the record's texts before any sink
        sees them (:meth:`mask`)."""
        self.details["restriction"] = restriction
        self._redact = redact

    def keep_preview(self, preview: str | None) -> None:
        """Keeps the start of the request's latest message for the dashboard (:attr:`preview`)."""
        self._preview = preview

    @property
    def preview(self) -> str | None:
        """The start of the request's latest message, when the dashboard keeps one (in memory only)."""
        return self._preview

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (without the in-memory prompt preview, like :meth:`to_json`)."""
        out = asdict(self)
        out.pop("_preview", None)
        out.pop("_caller", None)
        out.pop("_redact", None)
        return out

    def served_by(self, target: TargetInfo) -> None:
        """Names the target (and its model) that answered."""
        self.selected = target.name
        self.selected_model = target.model

    def to_json(self) -> bytes:
        """One compact JSON line (no newline)."""
        # orjson serialises (nested, slotted) dataclasses itself: ~10x cheaper than going
        # through dataclasses.asdict, and this runs once per request when records are logged.
        return orjson.dumps(self, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _masked(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with every string passed through ``redact``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _masked(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item, redact) for item in value]
    return value


def prompt_preview(request: ChatRequest, limit: int, redact: Callable[[str], str] | None = None) -> str | None:
    """The first ``limit`` characters of the latest message that carries text, prefixed with its
    role (``user: …``, ``tool: …``); ``None`` when the last few messages carry none.

    Looks at no more than the last four messages, so its cost does not grow with the history.
    ``redact`` (a restriction's: what its rules matched) is applied to the whole text before it
    is cut, so that a secret cut in two cannot escape it.
    """
    for message in reversed(request.messages[-4:]):
        for part in message.content:
            kind = type(part)
            if kind is TextPart:
                text = part.text  # type: ignore[union-attr]
            elif kind is ToolResultPart:
                text = " ".join(p.text for p in part.content if type(p) is TextPart)  # type: ignore[union-attr]
            else:
                continue
            if text:
                return f"{message.role}: {(redact(text) if redact else text)[:limit]}"
    return None


def mark_cancelled(record: DecisionRecord, t0: float, tried: int, exc: BaseException) -> bool:
    """Marks a request cancelled before its answer: by the server's shutdown
    (``task.cancel(SHUTDOWN_CANCEL)``; returns ``True``) or by the caller going away (``False``)."""
    record.fallbacks_tried = max(0, tried - 1)
    shutdown = bool(exc.args) and exc.args[0] == SHUTDOWN_CANCEL
    if shutdown:
        record.status = 503
        record.error = "ended by the server's shutdown before the answer"
        record.details["interrupted"] = SHUTDOWN_CANCEL
    else:
        record.status = 499
        record.error = "cancelled: the caller went away before the answer"
    record.duration_ms = (time.perf_counter() - t0) * 1000
    return shutdown


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

    def append(self, line: dict[str, Any]) -> None:
        """Appends one JSON object that is not a decision record (a feedback report)."""
        raw = orjson.dumps(line) + b"\n"
        with self._lock:
            self._fh.write(raw)

    def close(self) -> None:
        """Closes the file."""
        self._fh.close()


DirectWriter = Callable[[logging.Logger, int, str], bool]
"""Writes one message of a logger at a level the way its handlers would, without a
``LogRecord``; ``False`` when it cannot (other handlers, filters, another format)."""

_direct: list[DirectWriter] = []


def set_direct_writer(writer: DirectWriter | None) -> None:
    """Lets :func:`log_sink` hand its lines to ``writer`` (the CLI's log handler, see
    ``switchyard/cli/log_handler.py``) instead of going through ``logging`` for each request."""
    _direct[:] = [] if writer is None else [writer]


def log_sink(record: DecisionRecord) -> None:
    """Logs the record at INFO on the ``switchyard.decisions`` logger (as JSON)."""
    if logger.isEnabledFor(logging.INFO):
        line = record.to_json().decode()
        if not (_direct and _direct[0](logger, logging.INFO, line)):
            logger.info("%s", line)
