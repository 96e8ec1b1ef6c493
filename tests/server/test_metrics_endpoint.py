"""``GET /metrics`` (parsed with prometheus_client's own parser) and ``/v1/stats`` USD totals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _configs import skeleton_config
from _convo import Step, bash, render
from prometheus_client.parser import text_string_to_metric_families

from switchyard.api import Switchyard
from switchyard.server.metrics import METRIC_NAMES
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ServerThread]:
    fake = serve_fake(FakeUpstream())
    config = skeleton_config(fake.port)
    config["routes"]["agent"] = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}
    config["accounting"] = {"baseline": {"resilient": "capable"}}
    sy = Switchyard.from_config(config)
    try:
        with ServerThread(sy) as server:
            yield server
    finally:
        sy.close()
        fake.stop()


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: ServerThread) -> tuple[Samples, set[str]]:
    response = httpx.get(f"{server.root_url}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    families = set()
    for family in text_string_to_metric_families(response.text):
        families.add(family.name)
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, families


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= lab)


def ask(server: ServerThread, route: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
    headers = {"x-switchyard-session-id": session} if session else {}
    response = httpx.post(f"{server.base_url}/chat/completions", json={**body, "model": route}, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_metrics_move_as_requests_are_served(proxy: ServerThread) -> None:
    before, _ = scrape(proxy)
    assert value(before, "switchyard_state_backend_degraded", backend="memory") == 0.0
    ask(proxy, "agent", render(QUIET), "m1")
    ask(proxy, "agent", render(OOM), "m1")
    ask(proxy, "resilient", {"messages": [{"role": "user", "content": "hi"}]})
    after, families = scrape(proxy)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("switchyard_decisions_total", route="agent", tier="efficient", source="fall_open") == 1
    assert moved("switchyard_decisions_total", route="agent", tier="capable", source="override") == 1
    assert moved("switchyard_decisions_total", route="resilient", tier="capable", status="2xx") == 1
    assert moved("switchyard_overhead_seconds_count", route="agent") == 2
    assert moved("switchyard_request_duration_seconds_count", route="resilient") == 1
    # The resilient route's first candidate answers 500: attempts, then a fallback by that class.
    assert moved("switchyard_upstream_attempts_total", target="broken", outcome="error") >= 1
    assert moved("switchyard_fallbacks_total", route="resilient") == 1
    assert moved("switchyard_upstream_attempts_total", target="capable", outcome="ok") == 2
    assert moved("switchyard_tokens_total", target="efficient", kind="input") > 0
    assert moved("switchyard_cost_usd_total", target="capable") > 0
    # Savings: the efficient turn cost less than the capable price of the same tokens.
    baseline = moved("switchyard_always_capable_usd_total", route="agent")
    spent = moved("switchyard_spent_usd_total", route="agent")
    assert baseline > spent > 0
    assert moved("switchyard_saved_usd", route="agent") == pytest.approx(baseline - spent)
    assert value(after, "switchyard_capable_share", route="agent") == pytest.approx(0.5)
    assert {f.removesuffix("_total") for f in families} >= set(METRIC_NAMES) - {
        "switchyard_breaker_state",
        "switchyard_mid_stream_failures",
        "switchyard_model_mismatches",
        "switchyard_router_calls",
        "switchyard_router_call_failures",
        "switchyard_router_call_seconds",
        "switchyard_router_usd",
        "switchyard_upstream_retries",
    }
    # The broken target's breaker is reported once it has failed.
    assert value(after, "switchyard_breaker_state", target="broken") == 1


def test_stats_report_usd_per_route_and_session(proxy: ServerThread) -> None:
    ask(proxy, "agent", render(QUIET), "usd-1")
    ask(proxy, "agent", render(OOM), "usd-1")
    stats = httpx.get(f"{proxy.base_url}/stats").json()
    assert stats["state"] == {"backend": "memory", "degraded": False}
    session = stats["usd"]["sessions"]["agent:usd-1"]
    assert session["requests"] == 2 and session["capable_share"] == 0.5
    assert session["always_capable_usd"] > session["total_usd"] > 0
    assert session["saved_usd"] == pytest.approx(session["always_capable_usd"] - session["total_usd"], abs=1e-8)
    route = stats["usd"]["routes"]["agent"]
    assert route["requests"] >= 2 and route["saved_usd"] > 0
    # "fast" has no capable tier and no baseline override: nothing to compare against.
    ask(proxy, "fast", {"messages": [{"role": "user", "content": "hi"}]})
    fast = httpx.get(f"{proxy.base_url}/stats").json()["usd"]["routes"]["fast"]
    assert fast["always_capable_usd"] == 0 and fast["saved_share"] is None
