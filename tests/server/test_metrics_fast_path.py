"""The per-request counters and histograms (server/metrics.py ``_adder``, ``_Histogram``) expose
exactly what prometheus_client's own ``inc`` and ``observe`` would."""

from __future__ import annotations

import math
import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from switchyard.engine.records import DecisionRecord
from switchyard.server.metrics import _DURATION_BUCKETS, _OVERHEAD_BUCKETS, Metrics, _Histogram


def _samples(text: bytes, names: tuple[str, ...]) -> list[str]:
    """The exposition's sample lines of ``names`` (``_created`` lines differ by their time)."""
    return sorted(
        line
        for line in text.decode().splitlines()
        if line.startswith(names) and "_created" not in line and not line.startswith("#")
    )


def test_requests_count_as_prometheus_clients_own_calls_would() -> None:
    rng = random.Random(7)
    metrics = Metrics()
    reference = CollectorRegistry()
    decisions = Counter("switchyard_decisions", "", ["route", "router", "source", "tier", "status"], registry=reference)
    overhead = Histogram("switchyard_overhead_seconds", "", ["route"], buckets=_OVERHEAD_BUCKETS, registry=reference)
    duration = Histogram(
        "switchyard_request_duration_seconds", "", ["route"], buckets=_DURATION_BUCKETS, registry=reference
    )
    tokens = Counter("switchyard_tokens", "", ["target", "kind"], registry=reference)
    cost = Counter("switchyard_cost_usd", "", ["target"], registry=reference)
    # Values on the bucket bounds themselves, between them, past the last and zero.
    edges = [*_OVERHEAD_BUCKETS, *_DURATION_BUCKETS, 0.0, 1e-6, 500.0]
    for n in range(400):
        route = rng.choice(["a", "b"])
        record = DecisionRecord(request_id=str(n), route=route, router="passthrough", source="fixed")
        record.tier, record.selected = "capable", rng.choice(["t1", "t2"])
        record.overhead_ms = rng.choice(edges) * 1000 if n % 3 else rng.uniform(0, 20)
        record.duration_ms = rng.choice(edges) * 1000 if n % 2 else rng.uniform(0, 400_000)
        record.input_tokens, record.output_tokens = rng.randrange(0, 5000), rng.randrange(0, 800)
        record.cost_usd = rng.choice([0.0, rng.uniform(0, 0.05)])
        metrics.observe(record)

        decisions.labels(route, "passthrough", "fixed", "capable", "2xx").inc()
        overhead.labels(route).observe(record.overhead_ms / 1000)
        duration.labels(route).observe(record.duration_ms / 1000)
        counts = {"input": record.input_tokens, "output": record.output_tokens}
        for kind in ("input", "output", "cache_read", "cache_creation", "reasoning"):
            child = tokens.labels(record.selected, kind)  # every kind is exposed, 0 until counted
            if counts.get(kind):
                child.inc(counts[kind])
        if record.cost_usd:
            cost.labels(record.selected).inc(record.cost_usd)
    names = (
        "switchyard_decisions",
        "switchyard_overhead_seconds",
        "switchyard_request_duration_seconds",
        "switchyard_tokens",
        "switchyard_cost_usd",
    )
    ours = _samples(metrics.render(), names)
    assert ours and ours == _samples(generate_latest(reference), names)


def test_a_nan_lands_in_no_bucket_but_in_the_sum_as_prometheus_client_does() -> None:
    registry = CollectorRegistry()
    fast = _Histogram(Histogram("h", "", ["r"], buckets=(1.0, 2.0), registry=registry).labels("x"))
    fast.observe(math.nan)
    fast.observe(1.5)
    text = generate_latest(registry).decode()
    assert 'h_bucket{le="1.0",r="x"} 0.0' in text and 'h_bucket{le="2.0",r="x"} 1.0' in text
    assert 'h_count{r="x"} 1.0' in text and 'h_sum{r="x"} NaN' in text
