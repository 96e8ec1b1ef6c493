"""Live USD accounting: what each request cost, what always-capable would have cost, the totals.

Layer: ``engine``.

Two decision sinks, both fed by the decision record (nothing else in the engine calls them):

* :class:`Pricing` runs first and fills in the record's ``tier``, ``feature_cost_usd`` (a
  learned router's feature extraction — probe or kNN — priced per call and per second from
  ``accounting.feature_extraction``) and ``baseline_cost_usd`` (the same tokens at the route's
  capable target's price: the cost had every request gone to the capable model).
* :class:`UsdLedger` keeps running totals per route and per session (``GET /v1/stats`` →
  ``usd``; ``switchyard stats`` computes the same from a decision log).

``saved_usd`` = baseline - (answer + router's model calls + feature extraction). It is an
estimate: the capable model would have produced a different number of output tokens. It is
negative when routing overhead exceeds what the cheaper model saved.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.response import Usage
from switchyard.protocol.targets import Price


@dataclass(frozen=True, slots=True)
class RouteTiers:
    """A route's two tiers as target names (either may be unknown)."""

    capable: str | None = None
    efficient: str | None = None


@dataclass(slots=True)
class Pricing:
    """Fills in ``tier``, ``feature_cost_usd`` and ``baseline_cost_usd`` of every record, and a
    shadow request's ``details.would_cost_usd``.

    Args:
        tiers: Per route, its capable and efficient targets.
        prices: Per target, its price.
        feature_usd_per_call: Price of one feature extraction (an embeddings API call …).
        feature_usd_per_second: Price of one second of extraction (a dedicated GPU's hourly
            rate / 3600, when the probe's model runs on its own hardware).
    """

    tiers: Mapping[str, RouteTiers]
    prices: Mapping[str, Price]
    feature_usd_per_call: float = 0.0
    feature_usd_per_second: float = 0.0

    def __call__(self, record: DecisionRecord) -> None:
        tiers = self.tiers.get(record.route)
        if tiers is not None and record.selected is not None:
            if record.selected == tiers.capable:
                record.tier = "capable"
            elif record.selected == tiers.efficient:
                record.tier = "efficient"
        feature_ms = record.feature_ms
        if feature_ms is not None:
            record.feature_cost_usd = self.feature_usd_per_call + self.feature_usd_per_second * feature_ms / 1000
        capable = self.prices.get(tiers.capable) if tiers is not None and tiers.capable else None
        would = record.details.get("would_select")  # a shadow request's router choice (engine/experiment.py)
        if record.status >= 400 or (capable is None and would is None):
            return
        usage = Usage(
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            cache_read_tokens=record.cache_read_tokens,
            cache_creation_tokens=record.cache_creation_tokens,
        )
        if capable is not None:
            record.baseline_cost_usd = capable.cost(usage)
        if isinstance(would, str) and (price := self.prices.get(would)) is not None:
            # The same tokens at the price of the target the router would have chosen.
            record.details["would_cost_usd"] = price.cost(usage)


@dataclass(slots=True)
class Share:
    """What one record adds to a :class:`Totals`."""

    capable: bool
    answer_usd: float
    router_usd: float
    feature_usd: float
    baseline_usd: float | None
    experiment_usd: float = 0.0

    @classmethod
    def of(cls, record: DecisionRecord) -> Share:
        return cls(
            record.tier == "capable",
            record.cost_usd,
            record.router_cost.cost_usd,
            record.feature_cost_usd,
            record.baseline_cost_usd,
            record.experiment_cost_usd,
        )


@dataclass(slots=True)
class Totals:
    """USD totals of a set of requests."""

    requests: int = 0
    capable_requests: int = 0
    answer_usd: float = 0.0
    router_usd: float = 0.0
    feature_usd: float = 0.0
    baseline_usd: float = 0.0
    priced_requests: int = 0
    experiment_usd: float = 0.0
    """Spent by experiments besides the answers: shadow mode's mirror calls."""

    @property
    def total_usd(self) -> float:
        """Answers plus routing overhead plus experiments' mirror calls."""
        return self.answer_usd + self.router_usd + self.feature_usd + self.experiment_usd

    @property
    def saved_usd(self) -> float:
        """Baseline minus what was spent, over the requests with a baseline."""
        return self.baseline_usd - self._spent_priced

    _spent_priced: float = 0.0

    def add(self, record: DecisionRecord) -> None:
        """Counts one record."""
        self.add_share(Share.of(record))

    def add_share(self, share: Share) -> None:
        """Counts one record's share (read off the record once for several totals)."""
        self.requests += 1
        self.capable_requests += share.capable
        self.answer_usd += share.answer_usd
        self.router_usd += share.router_usd
        self.feature_usd += share.feature_usd
        self.experiment_usd += share.experiment_usd
        if share.baseline_usd is not None:
            self.priced_requests += 1
            self.baseline_usd += share.baseline_usd
            self._spent_priced += share.answer_usd + share.router_usd + share.feature_usd + share.experiment_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready totals (USD rounded to 1e-9)."""
        share = self.capable_requests / self.requests if self.requests else 0.0
        return {
            "requests": self.requests,
            "capable_share": round(share, 6),
            "answer_usd": _usd(self.answer_usd),
            "router_usd": _usd(self.router_usd),
            "feature_usd": _usd(self.feature_usd),
            "experiment_usd": _usd(self.experiment_usd),
            "total_usd": _usd(self.total_usd),
            "always_capable_usd": _usd(self.baseline_usd),
            "saved_usd": _usd(self.saved_usd),
            "saved_share": round(self.saved_usd / self.baseline_usd, 6) if self.baseline_usd > 0 else None,
        }


@dataclass
class UsdLedger:
    """Running USD totals per route and per session (the most recent ``max_sessions``).

    Thread-safe: the sync API serves from its own loop thread.
    """

    max_sessions: int = 10_000
    total: Totals = field(default_factory=Totals)
    routes: dict[str, Totals] = field(default_factory=dict)
    sessions: OrderedDict[str, Totals] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, record: DecisionRecord) -> None:
        share = Share.of(record)
        with self._lock:
            self.total.add_share(share)
            route = self.routes.get(record.route)
            if route is None:  # not setdefault: that would build a Totals for every request
                route = self.routes[record.route] = Totals()
            route.add_share(share)
            key = record.session_key
            if key is not None:
                found = self.sessions.get(key)
                if found is None:
                    found = self.sessions[key] = Totals()
                    while len(self.sessions) > self.max_sessions:
                        self.sessions.popitem(last=False)
                else:
                    self.sessions.move_to_end(key)
                found.add_share(share)

    def snapshot(self, *, sessions: int = 100) -> dict[str, Any]:
        """Totals, per route and for the ``sessions`` most recently active sessions."""
        with self._lock:
            recent = list(self.sessions.items())[-sessions:] if sessions > 0 else []
            return {
                "total": self.total.to_dict(),
                "routes": {name: t.to_dict() for name, t in sorted(self.routes.items())},
                "sessions": {key: t.to_dict() for key, t in reversed(recent)},
                "sessions_tracked": len(self.sessions),
            }


def _usd(value: float) -> float:
    return 0.0 if math.isclose(value, 0.0, abs_tol=5e-10) else round(value, 9)


def record_from_log(obj: Mapping[str, Any]) -> DecisionRecord:
    """The accounting fields of one decision-log line (a :meth:`DecisionRecord.to_json` object).

    Fields missing from older logs keep their defaults; wrongly typed ones raise ``ValueError``
    naming the field.
    """

    def number(name: str, source: Mapping[str, Any] = obj) -> float:
        value = source.get(name, 0) or 0
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name!r} must be a number, got {value!r}")
        return float(value)

    def text(name: str) -> str | None:
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name!r} must be a string, got {value!r}")
        return value

    route = text("route")
    if route is None:
        raise ValueError("'route' is missing")
    router_cost = obj.get("router_cost") or {}
    if not isinstance(router_cost, Mapping):
        raise ValueError(f"'router_cost' must be an object, got {router_cost!r}")
    details = obj.get("details") or {}
    baseline = obj.get("baseline_cost_usd")
    record = DecisionRecord(
        request_id=text("request_id") or "",
        route=route,
        router=text("router") or "",
        session_id=text("session_id"),
        tenant=text("tenant"),
        source=text("source") or "",
        selected=text("selected"),
        status=int(number("status")) if "status" in obj else 200,
        cost_usd=number("cost_usd"),
        feature_cost_usd=number("feature_cost_usd"),
        experiment_cost_usd=number("experiment_cost_usd"),
        baseline_cost_usd=None if baseline is None else number("baseline_cost_usd"),
        tier=text("tier"),
        details=dict(details) if isinstance(details, Mapping) else {},
    )
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
        setattr(record, key, int(number(key)))
    record.router_cost.calls = int(number("calls", router_cost))
    record.router_cost.cost_usd = number("cost_usd", router_cost)
    return record
