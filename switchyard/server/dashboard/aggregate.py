"""Windowed figures of the dashboard, folded in from the record ring when a page asks.

Layer: ``server``.

Records are grouped into time buckets of :data:`BUCKET_S` seconds. A bucket keeps USD totals
(the same :class:`~switchyard.engine.accounting.Totals` that ``GET /v1/stats`` reports) per
route and per target, decision sources, reliability counts and latency histograms; a window
is the merge of its buckets, and the time series is the buckets themselves, so a poll costs
the new records plus the buckets of the window, never the whole ring again. Buckets older
than the longest window are dropped, so memory stays bounded however long the process runs.

Latency percentiles come from log-spaced histograms (bins 10 % wide): bounded memory per
bucket, within 10 % of the exact value.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.accounting import Share, Totals
from switchyard.engine.records import DecisionRecord

BUCKET_S = 10.0
"""Width of one time bucket, in seconds."""

MAX_WINDOW_S = 86_400.0
"""The longest window the views offer (older buckets are dropped)."""

_RATIO = 1.1
_LOG_RATIO = math.log(_RATIO)
_FLOOR_MS = 0.01

MAX_MS = 1e9
"""The longest duration the views count (about eleven and a half days): a longer one — a
decision log edited by hand, or written under a broken clock — counts as this."""


def clamp_ms(ms: float) -> float:
    """``ms`` within ``[0, MAX_MS]`` (anything that is not a number: 0)."""
    return ms if 0.0 <= ms <= MAX_MS else (MAX_MS if ms > MAX_MS else 0.0)


class Histogram:
    """Counts of milliseconds in log-spaced bins (each bin 10 % wider than the one below)."""

    __slots__ = ("bins", "count", "max")

    def __init__(self) -> None:
        self.bins: Counter[int] = Counter()
        self.count = 0
        self.max = 0.0

    def add(self, ms: float) -> None:
        """Counts one value."""
        ms = max(clamp_ms(ms), _FLOOR_MS)  # one record out of range must not break a view
        self.bins[int(math.log(ms / _FLOOR_MS) / _LOG_RATIO)] += 1
        self.count += 1
        self.max = max(self.max, ms)

    def merge(self, other: Histogram) -> None:
        """Adds ``other``'s counts."""
        self.bins.update(other.bins)
        self.count += other.count
        self.max = max(self.max, other.max)

    def quantile(self, q: float) -> float | None:
        """The upper edge of the bin holding quantile ``q`` (capped at the largest value)."""
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for index in sorted(self.bins):
            seen += self.bins[index]
            if seen >= rank:
                return round(min(self.max, _FLOOR_MS * _RATIO ** (index + 1)), 3)
        return round(self.max, 3)

    def to_dict(self) -> dict[str, Any]:
        """``count``, ``p50``, ``p90``, ``p99`` and ``max`` in milliseconds."""
        return {
            "count": self.count,
            "p50": self.quantile(0.5),
            "p90": self.quantile(0.9),
            "p99": self.quantile(0.99),
            "max": round(self.max, 3) if self.count else None,
        }


def merge_totals(into: Totals, other: Totals) -> None:
    """Adds ``other`` to ``into`` (every field, the private spend over priced requests too)."""
    into.requests += other.requests
    into.capable_requests += other.capable_requests
    into.answer_usd += other.answer_usd
    into.router_usd += other.router_usd
    into.feature_usd += other.feature_usd
    into.experiment_usd += other.experiment_usd
    into.baseline_usd += other.baseline_usd
    into.priced_requests += other.priced_requests
    into._spent_priced += other._spent_priced


@dataclass(slots=True)
class Reliability:
    """Fallbacks, retries and errors of a set of requests."""

    attempts: int = 0
    retries: int = 0
    fallbacks: int = 0
    failed_requests: int = 0
    router_calls: int = 0
    router_failures: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)

    def add(self, record: DecisionRecord) -> None:
        """Counts one record's attempts and outcome, as the reliability counters of
        ``GET /v1/stats`` count them: attempts and retries of the answer call and of the
        router's own calls; a fallback is a request served by a later candidate than the
        router's first choice (after a failure or a skipped open breaker)."""
        for attempts in (record.attempts, record.router_attempts):
            self.attempts += len(attempts)
            for attempt in attempts:
                if attempt.retry:
                    self.retries += 1
                if not attempt.ok:
                    self.errors[attempt.error_class or "error"] += 1
        if record.attempts and record.status < 400 and record.candidates and record.selected != record.candidates[0]:
            self.fallbacks += 1
        self.router_calls += record.router_cost.calls
        self.router_failures += record.router_cost.failures
        if record.status >= 400:
            self.failed_requests += 1
        self.statuses[f"{record.status // 100}xx"] += 1

    def merge(self, other: Reliability) -> None:
        """Adds ``other``'s counts."""
        self.attempts += other.attempts
        self.retries += other.retries
        self.fallbacks += other.fallbacks
        self.failed_requests += other.failed_requests
        self.router_calls += other.router_calls
        self.router_failures += other.router_failures
        self.errors.update(other.errors)
        self.statuses.update(other.statuses)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts (error classes and status classes most frequent first)."""
        return {
            "attempts": self.attempts,
            "retries": self.retries,
            "fallbacks": self.fallbacks,
            "failed_requests": self.failed_requests,
            "router_calls": self.router_calls,
            "router_failures": self.router_failures,
            "errors": dict(self.errors.most_common()),
            "statuses": dict(sorted(self.statuses.items())),
        }


@dataclass(slots=True)
class Bucket:
    """Everything the views show about the requests of one time bucket."""

    start: float
    total: Totals = field(default_factory=Totals)
    routes: dict[str, Totals] = field(default_factory=dict)
    targets: dict[str, Totals] = field(default_factory=dict)
    sources: Counter[tuple[str, str]] = field(default_factory=Counter)
    reliability: Reliability = field(default_factory=Reliability)
    overhead: Histogram = field(default_factory=Histogram)
    upstream: Histogram = field(default_factory=Histogram)
    duration: Histogram = field(default_factory=Histogram)

    def add(self, record: DecisionRecord) -> None:
        """Folds one record in."""
        share = Share.of(record)
        self.total.add_share(share)
        route = self.routes.get(record.route)
        if route is None:
            route = self.routes[record.route] = Totals()
        route.add_share(share)
        target_name = record.selected or "(none)"
        target = self.targets.get(target_name)
        if target is None:
            target = self.targets[target_name] = Totals()
        target.add_share(share)
        self.sources[(record.route, record.source or "(none)")] += 1
        self.reliability.add(record)
        self.overhead.add(record.overhead_ms)
        self.duration.add(record.duration_ms)
        for attempt in record.attempts:
            if attempt.ok:
                self.upstream.add(attempt.elapsed_ms)

    def merge(self, other: Bucket) -> None:
        """Adds ``other`` (another bucket) to this one."""
        merge_totals(self.total, other.total)
        for name, totals in other.routes.items():
            merge_totals(self.routes.setdefault(name, Totals()), totals)
        for name, totals in other.targets.items():
            merge_totals(self.targets.setdefault(name, Totals()), totals)
        self.sources.update(other.sources)
        self.reliability.merge(other.reliability)
        self.overhead.merge(other.overhead)
        self.upstream.merge(other.upstream)
        self.duration.merge(other.duration)


@dataclass(slots=True)
class SessionSummary:
    """One session of one route (and one tenant), over the records the dashboard has seen."""

    route: str
    session_id: str
    first_ts: float
    key: str = ""
    """:attr:`DecisionRecord.session_key` (``route:session``, the tenant's namespace before the
    session when it has one)."""
    tenant: str | None = None
    last_ts: float = 0.0
    agents: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    last_source: str = ""
    last_tier: str | None = None
    failed: int = 0

    def add(self, record: DecisionRecord) -> None:
        """Folds one turn in."""
        self.last_ts = max(self.last_ts, record.ts)
        agent = record.agent_id
        if agent is not None and agent not in self.agents and len(self.agents) < 8:
            self.agents.append(agent)
        self.totals.add(record)
        self.last_source = record.source
        self.last_tier = record.tier
        if record.status >= 400:
            self.failed += 1

    def to_dict(self) -> dict[str, Any]:
        """The explorer's row."""
        t = self.totals
        return {
            "key": self.key,
            "route": self.route,
            "session_id": self.session_id,
            "tenant": self.tenant,
            "agents": list(self.agents),
            "turns": t.requests,
            "capable_turns": t.capable_requests,
            "escalated": t.capable_requests > 0,
            "total_usd": t.to_dict()["total_usd"],
            "always_capable_usd": t.to_dict()["always_capable_usd"],
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "last_source": self.last_source,
            "last_tier": self.last_tier,
            "failed": self.failed,
        }


class Aggregator:
    """The buckets and sessions folded in from a :class:`~switchyard.server.dashboard.ring.RecordRing`.

    Not thread-safe: the views call it from the server's event loop only.

    Args:
        max_sessions: Sessions kept for the explorer (the least recently active go first).
        max_window_s: Buckets older than this (before the newest record) are dropped.
    """

    def __init__(self, *, max_sessions: int = 1000, max_window_s: float = MAX_WINDOW_S) -> None:
        self.buckets: OrderedDict[int, Bucket] = OrderedDict()
        self.sessions: OrderedDict[str, SessionSummary] = OrderedDict()
        self.max_sessions = max_sessions
        self.max_window_s = max_window_s
        self.seen = 0
        """Sequence number of the last record folded in."""
        self.missed = 0
        """Records that left the ring before any view folded them in."""
        self.first_ts: float | None = None
        """Time of the oldest record folded in."""

    def fold(self, numbered: list[tuple[int, DecisionRecord]]) -> int:
        """Folds in the records newer than the last fold; returns how many."""
        fresh = [(n, r) for n, r in numbered if n > self.seen] if numbered and numbered[-1][0] > self.seen else []
        if not fresh:
            return 0
        if fresh[0][0] > self.seen + 1:
            self.missed += fresh[0][0] - self.seen - 1
        for _, record in fresh:
            self.add(record)
        self.seen = fresh[-1][0]
        self._trim()
        return len(fresh)

    def add(self, record: DecisionRecord) -> None:
        """Folds in one record (out-of-order times land in their own bucket)."""
        key = int(record.ts // BUCKET_S)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = Bucket(start=key * BUCKET_S)
            if len(self.buckets) > 1 and key < next(reversed(self.buckets)):
                self.buckets = OrderedDict(sorted(self.buckets.items()))
        bucket.add(record)
        if self.first_ts is None or record.ts < self.first_ts:
            self.first_ts = record.ts
        skey = record.session_key
        if skey is not None:
            assert record.session_id is not None  # session_key's
            found = self.sessions.get(skey)
            if found is None:
                found = self.sessions[skey] = SessionSummary(
                    record.route, record.session_id, first_ts=record.ts, key=skey, tenant=record.tenant
                )
                while len(self.sessions) > self.max_sessions:
                    self.sessions.popitem(last=False)
            else:
                self.sessions.move_to_end(skey)
            found.add(record)

    def _trim(self) -> None:
        if not self.buckets:
            return
        newest = next(reversed(self.buckets))
        oldest_kept = newest - int(self.max_window_s // BUCKET_S)
        while self.buckets and next(iter(self.buckets)) < oldest_kept:
            self.buckets.popitem(last=False)

    def window(self, start: float, end: float, *, points: int = 60) -> dict[str, Any]:
        """The figures of the records with ``start <= ts < end + BUCKET_S`` and a time series of
        at most ``points`` points over ``[start, end]``."""
        merged = Bucket(start=start)
        step = max(BUCKET_S, math.ceil((end - start) / points / BUCKET_S) * BUCKET_S)
        series: OrderedDict[int, Bucket] = OrderedDict()
        first_key = int(start // BUCKET_S)
        for key, bucket in self.buckets.items():
            if key < first_key or bucket.start > end:
                continue
            merged.merge(bucket)
            slot = int((bucket.start - start) // step)
            found = series.get(slot)
            if found is None:
                found = series[slot] = Bucket(start=start + slot * step)
            merge_totals(found.total, bucket.total)
        routes = {name: t.to_dict() for name, t in sorted(merged.routes.items())}
        targets = {name: t.to_dict() for name, t in sorted(merged.targets.items())}
        sources = [
            {"route": route, "source": source, "requests": n, "share": round(n / merged.total.requests, 6)}
            for (route, source), n in merged.sources.most_common()
        ]
        return {
            "from": start,
            "to": end,
            "step_s": step,
            "total": merged.total.to_dict(),
            "routes": routes,
            "targets": targets,
            "sources": sources,
            "reliability": merged.reliability.to_dict(),
            "latency": {
                "overhead_ms": merged.overhead.to_dict(),
                "upstream_ms": merged.upstream.to_dict(),
                "duration_ms": merged.duration.to_dict(),
            },
            "series": [_point(b) for b in series.values()],
        }


def _point(bucket: Bucket) -> dict[str, Any]:
    totals = bucket.total.to_dict()
    return {
        "t": bucket.start,
        "requests": totals["requests"],
        "total_usd": totals["total_usd"],
        "always_capable_usd": totals["always_capable_usd"],
        "capable_share": totals["capable_share"],
    }


__all__ = ["BUCKET_S", "MAX_WINDOW_S", "Aggregator", "Bucket", "Histogram", "Reliability", "SessionSummary"]
