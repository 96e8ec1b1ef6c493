"""The example Grafana dashboard only uses metrics Switchyard exports, and METRIC_NAMES is complete."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from switchyard.engine.records import Attempt, DecisionRecord
from switchyard.server.metrics import METRIC_NAMES, Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "switchyard.json"
_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def exported() -> set[str]:
    """Metric families a scrape shows once every kind of event has happened."""
    live = {
        "breakers": {"capable": "open"},
        "state": {"backend": "redis", "degraded": True},
        "capable_share": {"r": 1},
        "thresholds": {"r": 0.5},
    }
    metrics = Metrics(lambda: live)
    record = DecisionRecord(request_id="1", route="r", router="knn", source="probe", selected="capable")
    record.tier, record.input_tokens, record.output_tokens, record.cost_usd = "capable", 10, 5, 0.01
    record.model_mismatch = True
    record.baseline_cost_usd, record.feature_cost_usd = 0.02, 0.001
    record.router_cost.calls, record.router_cost.failures, record.router_cost.cost_usd = 2, 1, 0.003
    record.details |= {
        "feature_ms": 3.0,
        "probe_ms": 0.2,
        "mid_stream_failure": True,
        "mid_stream_error_class": "timeout",
    }
    record.attempts = [
        Attempt("efficient", ok=False, elapsed_ms=1, error_class="rate_limited"),
        Attempt("efficient", ok=False, elapsed_ms=1, error_class="rate_limited", retry=1),
        Attempt("capable", ok=True, elapsed_ms=1),
    ]
    metrics.observe(record)
    return {
        family.name.removesuffix("_total")
        for family in text_string_to_metric_families(metrics.render().decode())
        if family.samples and not family.name.endswith("_created")  # prometheus_client's creation times
    }


def test_metric_names_lists_exactly_what_is_exported() -> None:
    assert exported() == set(METRIC_NAMES)


def test_dashboard_is_valid_json_using_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["panels"] and dashboard["title"] == "Switchyard"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = set()
    for expr in exprs:
        for name in re.findall(r"\bswitchyard_[a-z_]+", expr):
            for suffix in _SUFFIXES:
                if name.endswith(suffix) and name.removesuffix(suffix) in METRIC_NAMES:
                    name = name.removesuffix(suffix)
            used.add(name)
    assert used <= set(METRIC_NAMES), used - set(METRIC_NAMES)
    # The dashboard covers the headline numbers of docs/deployment.md.
    assert used >= {
        "switchyard_decisions",
        "switchyard_overhead_seconds",
        "switchyard_always_capable_usd",
        "switchyard_spent_usd",
        "switchyard_state_backend_degraded",
        "switchyard_breaker_state",
        "switchyard_fallbacks",
    }
