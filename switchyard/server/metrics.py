"""Prometheus ``/metrics`` for the proxy, fed by decision records.

Layer: ``server``. Needs ``prometheus_client`` (the ``metrics`` extra), imported only when a
:class:`Metrics` is built. Nothing in the engine calls this module: every number comes from the
:class:`~switchyard.engine.records.DecisionRecord` each request writes (:meth:`Metrics.observe`
is a decision sink), plus a few live values read at scrape time (breaker states, the state
backend's degraded flag, the capable share).

**Several worker processes.** When ``PROMETHEUS_MULTIPROC_DIR`` names a directory (set it before
the workers start, empty it between runs), prometheus_client keeps counters and histograms in
files there and :meth:`Metrics.render` aggregates every process's values. The live gauges then
describe the worker that answered the scrape.

The metric names are listed in :data:`METRIC_NAMES` and documented in docs/deployment.md.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from switchyard._dataclass import dataclass

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from switchyard.api import Switchyard
    from switchyard.engine.records import DecisionRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Every metric family this module exports (the names Prometheus shows, without suffixes).
METRIC_NAMES = (
    "switchyard_decisions",
    "switchyard_router_calls",
    "switchyard_router_call_failures",
    "switchyard_router_call_seconds",
    "switchyard_router_usd",
    "switchyard_upstream_attempts",
    "switchyard_upstream_retries",
    "switchyard_fallbacks",
    "switchyard_mid_stream_failures",
    "switchyard_model_mismatches",
    "switchyard_overhead_seconds",
    "switchyard_request_duration_seconds",
    "switchyard_tokens",
    "switchyard_cost_usd",
    "switchyard_spent_usd",
    "switchyard_always_capable_usd",
    "switchyard_saved_usd",
    "switchyard_capable_share",
    "switchyard_route_threshold",
    "switchyard_breaker_state",
    "switchyard_state_backend_degraded",
    "switchyard_state_backend_outages",
)

_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_BREAKER_STATES = ("closed", "open", "half_open")
_TOKEN_KINDS = tuple((k, f"{k}_tokens") for k in ("input", "output", "cache_read", "cache_creation", "reasoning"))


@dataclass(frozen=True, slots=True)
class _Common:
    """What every request of one (route, router, source, tier, status, target) label set counts
    in: the ``inc`` of its counter children and its histogram children (:func:`_adder`,
    :class:`_Histogram`)."""

    decisions: Callable[[float], None]
    overhead: _Histogram
    duration: _Histogram
    tokens: tuple[tuple[str, Callable[[float], None]], ...]
    cost: Callable[[float], None] | None


def _adder(child: Any) -> Callable[[float], None]:
    """``child.inc`` for a labelled counter child, without the checks prometheus_client makes on
    every call (that the child is labelled, that the amount is not negative: these amounts never
    are): the ``inc`` of the value it keeps in ``_value``. A client without one gets ``inc``."""
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return inc if callable(inc) else child.inc  # type: ignore[no-any-return]


class _Histogram:
    """A labelled histogram child's ``observe``: the bucket found by bisection, not a Python loop
    over the bounds, into the same values prometheus_client's ``observe`` adds to (its sum and
    one bucket; exposition makes the buckets cumulative). A client that keeps them otherwise
    gets ``observe``."""

    __slots__ = ("_bounds", "_buckets", "_child", "_sum")

    def __init__(self, child: Any) -> None:
        self._child = child
        bounds: Any = getattr(child, "_upper_bounds", None)
        buckets: Any = getattr(child, "_buckets", None)
        self._sum: Any = getattr(child, "_sum", None)
        usable = isinstance(bounds, list) and isinstance(buckets, list) and len(bounds) == len(buckets)
        self._bounds: list[float] | None = bounds if usable and self._sum is not None else None
        self._buckets: list[Any] = buckets if self._bounds is not None else []

    def observe(self, amount: float) -> None:
        bounds = self._bounds
        if bounds is None:
            self._child.observe(amount)
            return
        self._sum.inc(amount)
        i = bisect_left(bounds, amount)
        if i < len(bounds) and amount <= bounds[i]:  # NaN: no bucket, as prometheus_client does
            self._buckets[i].inc(1)


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when it names a directory (multiprocess mode), else ``None``."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return path if path and os.path.isdir(path) else None


class Metrics:
    """The proxy's Prometheus metrics.

    Args:
        live: Returns the live values at scrape time: ``{"breakers": {target: state},
            "state": state-backend status, "capable_share": {route: share}, "thresholds": {route: threshold}}``.
    """

    def __init__(self, live: Callable[[], dict[str, Any]] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self._live = live
        self._children: dict[tuple[Any, ...], Any] = {}
        self._bundles: dict[tuple[Any, ...], _Common] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter(
            "switchyard_decisions",
            "Requests by route, router, decision source, tier served and status class",
            ["route", "router", "source", "tier", "status"],
            registry=r,
        )
        self.router_calls = Counter(
            "switchyard_router_calls",
            "The router's own work per request: judge model calls and feature extractions",
            ["route", "kind"],
            registry=r,
        )
        self.router_failures = Counter(
            "switchyard_router_call_failures", "Judge model calls that failed", ["route"], registry=r
        )
        self.router_seconds = Histogram(
            "switchyard_router_call_seconds",
            "Time spent in the router's own calls per request",
            ["route", "kind"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.router_usd = Counter(
            "switchyard_router_usd",
            "USD spent by the router itself (judges, feature extraction)",
            ["route", "kind"],
            registry=r,
        )
        self.attempts = Counter(
            "switchyard_upstream_attempts",
            "Upstream attempts of the answer call by target, outcome and error class",
            ["target", "outcome", "error_class"],
            registry=r,
        )
        self.retries = Counter(
            "switchyard_upstream_retries",
            "Retries on the same target by the error class that caused them",
            ["target", "error_class"],
            registry=r,
        )
        self.fallbacks = Counter(
            "switchyard_fallbacks",
            "Moves to the next candidate target by the error class that caused them",
            ["route", "error_class"],
            registry=r,
        )
        self.mid_stream = Counter(
            "switchyard_mid_stream_failures",
            "Streams that failed after content reached the caller",
            ["route", "error_class"],
            registry=r,
        )
        self.mismatches = Counter(
            "switchyard_model_mismatches",
            "Answers whose upstream named another model than the target's (dated snapshots tolerated)",
            ["route", "target"],
            registry=r,
        )
        self.overhead = Histogram(
            "switchyard_overhead_seconds",
            "Routing overhead per request (everything before the answer call)",
            ["route"],
            buckets=_OVERHEAD_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "switchyard_request_duration_seconds",
            "Whole request time",
            ["route"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.tokens = Counter("switchyard_tokens", "Answer tokens by target and kind", ["target", "kind"], registry=r)
        self.cost = Counter("switchyard_cost_usd", "USD of answer calls by target", ["target"], registry=r)
        self.spent = Counter(
            "switchyard_spent_usd",
            "USD spent per route (answers + the router's own calls), on requests with a baseline",
            ["route"],
            registry=r,
        )
        self.baseline = Counter(
            "switchyard_always_capable_usd",
            "USD the same requests would have cost on the route's capable target",
            ["route"],
            registry=r,
        )
        # A gauge: savings go down when routing overhead costs more than it saved.
        self.saved = Gauge(
            "switchyard_saved_usd",
            "USD saved against always-capable (always_capable - spent), running total",
            ["route"],
            multiprocess_mode="sum",
            registry=r,
        )
        if live is not None and multiprocess_dir() is None:
            self.registry.register(_LiveCollector(live))

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered: prometheus_client keeps one child per label
        set for good, and looking it up again (validating and joining the labels under a lock)
        was a third of :meth:`observe`'s cost on every request."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _common(self, record: DecisionRecord) -> _Common:
        """The children every request of this label set counts in, looked up once per set."""
        key = (record.route, record.router, record.source, record.tier, record.status // 100, record.selected)
        found = self._bundles.get(key)
        if found is None:
            route, target = record.route, record.selected
            decisions = self._child(
                self.decisions,
                route,
                record.router,
                record.source or "none",
                record.tier or "other",
                f"{record.status // 100}xx",
            )
            tokens = (
                ()
                if target is None
                else tuple((a, _adder(self._child(self.tokens, target, k))) for k, a in _TOKEN_KINDS)
            )
            cost = None if target is None else _adder(self._child(self.cost, target))
            overhead = _Histogram(self._child(self.overhead, route))
            duration = _Histogram(self._child(self.duration, route))
            found = _Common(_adder(decisions), overhead, duration, tokens, cost)
            self._bundles[key] = found
        return found

    def observe(self, record: DecisionRecord) -> None:
        """Counts one finished request (a decision sink)."""
        route = record.route
        common = self._common(record)
        common.decisions(1)
        rc = record.router_cost
        if rc.calls:
            self._child(self.router_calls, route, "judge").inc(rc.calls)
            self._child(self.router_seconds, route, "judge").observe(rc.elapsed_ms / 1000)
            self._child(self.router_usd, route, "judge").inc(rc.cost_usd)
            if rc.failures:
                self._child(self.router_failures, route).inc(rc.failures)
        feature_ms = record.feature_ms
        if feature_ms is not None:
            self._child(self.router_calls, route, "features").inc()
            self._child(self.router_seconds, route, "features").observe(feature_ms / 1000)
            self._child(self.router_usd, route, "features").inc(record.feature_cost_usd)
        self._attempts(record)
        if record.details.get("mid_stream_failure"):
            cls = record.details.get("mid_stream_error_class")
            self._child(self.mid_stream, route, str(cls or "unknown")).inc()
        if record.model_mismatch:
            self._child(self.mismatches, route, record.selected or "none").inc()
        common.overhead.observe(record.overhead_ms / 1000)
        common.duration.observe(record.duration_ms / 1000)
        for attr, add in common.tokens:
            count = getattr(record, attr)
            if count:
                add(count)
        if common.cost is not None and record.cost_usd:  # the child exists (0 until priced)
            common.cost(record.cost_usd)
        if record.baseline_cost_usd is not None:
            spent = record.total_cost_usd
            self._child(self.spent, route).inc(spent)
            self._child(self.baseline, route).inc(record.baseline_cost_usd)
            self._child(self.saved, route).inc(record.baseline_cost_usd - spent)

    def _attempts(self, record: DecisionRecord) -> None:
        previous = None
        for attempt in record.attempts:
            cls = attempt.error_class or ("none" if attempt.ok else "unknown")
            self._child(self.attempts, attempt.target, "ok" if attempt.ok else "error", cls).inc()
            if previous is not None and not previous.ok:
                cause = previous.error_class or "unknown"
                if attempt.target == previous.target and attempt.retry > 0:
                    self._child(self.retries, attempt.target, cause).inc()
                elif attempt.target != previous.target:
                    self._child(self.fallbacks, record.route, cause).inc()
            previous = attempt

    def render(self) -> bytes:
        """The exposition text (every worker's values in multiprocess mode)."""
        from prometheus_client import CollectorRegistry, generate_latest

        path = multiprocess_dir()
        if path is None:
            return bytes(generate_latest(self.registry))
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
        if self._live is not None:
            registry.register(_LiveCollector(self._live))
        return bytes(generate_latest(registry))


class _LiveCollector:
    """Values read at scrape time rather than counted per request."""

    def __init__(self, live: Callable[[], dict[str, Any]]) -> None:
        self._live = live

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        live = self._live()
        breaker = GaugeMetricFamily(
            "switchyard_breaker_state",
            "Circuit-breaker state per target (1 for the current state)",
            labels=["target", "state"],
        )
        for target, state in sorted(live.get("breakers", {}).items()):
            for name in _BREAKER_STATES:
                breaker.add_metric([target, name], 1.0 if state == name else 0.0)
        yield breaker
        state = live.get("state", {})
        backend = str(state.get("backend", "memory"))
        degraded = GaugeMetricFamily(
            "switchyard_state_backend_degraded",
            "1 while session state is served from this process's own copy (Redis unreachable)",
            labels=["backend"],
        )
        degraded.add_metric([backend], 1.0 if state.get("degraded") else 0.0)
        yield degraded
        outages = GaugeMetricFamily(
            "switchyard_state_backend_outages", "State backend outages seen by this process", labels=["backend"]
        )
        outages.add_metric([backend], float(state.get("outages", 0)))
        yield outages
        share = GaugeMetricFamily(
            "switchyard_capable_share",
            "Share of this process's requests served by the route's capable target",
            labels=["route"],
        )
        for route, value in sorted(live.get("capable_share", {}).items()):
            share.add_metric([route], float(value))
        yield share
        threshold = GaugeMetricFamily(
            "switchyard_route_threshold",
            "The score threshold a route with live threshold control uses now (this process's)",
            labels=["route"],
        )
        for route, value in sorted(live.get("thresholds", {}).items()):
            threshold.add_metric([route], float(value))
        yield threshold


class DeferredMetrics:
    """:class:`Metrics` wired to ``sy`` — counted from its decision records, live values from its
    stats — and built at the first decision record or scrape.

    Importing prometheus_client and building the registry (~15 to 20 ms on this project's CI
    machine) is then no part of the server's start-up, and the first answer does not wait for it
    either: the server writes a request's record after the reply's last byte
    (``SwitchyardApp(records_after_reply=True)``). Every record is counted, the first included.

    Raises:
        ImportError: prometheus_client is not installed (checked without importing it).
    """

    __slots__ = ("_metrics", "_sy")

    def __init__(self, sy: Switchyard) -> None:
        from importlib.util import find_spec

        if find_spec("prometheus_client") is None:
            raise ImportError("prometheus_client is not installed")
        self._sy = sy
        self._metrics: Metrics | None = None
        sy.on_decision(self.observe)

    def built(self) -> Metrics:
        """The metrics, built now if they were not."""
        metrics = self._metrics
        if metrics is None:
            metrics = self._metrics = Metrics(_live(self._sy))
        return metrics

    def observe(self, record: DecisionRecord) -> None:
        """Counts one finished request (a decision sink)."""
        self.built().observe(record)

    def render(self) -> bytes:
        """The exposition text (see :meth:`Metrics.render`)."""
        return self.built().render()


def _live(sy: Switchyard) -> Callable[[], dict[str, Any]]:
    """The live values of ``sy`` read at scrape time (``Metrics``' ``live``)."""

    def live() -> dict[str, Any]:
        stats = sy.stats()
        routes = sy.ledger.snapshot(sessions=0)["routes"]
        return {
            "breakers": {name: t.get("state", "closed") for name, t in stats.get("targets", {}).items()},
            "state": sy.state_status(),
            "capable_share": {name: t["capable_share"] for name, t in routes.items()},
            "thresholds": {name: t["threshold"] for name, t in sy.threshold_control().items()},
        }

    return live
