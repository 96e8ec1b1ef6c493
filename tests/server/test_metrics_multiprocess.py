"""Prometheus multiprocess mode: counts of several worker processes add up in one scrape."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import sys
    from switchyard.engine.records import Attempt, DecisionRecord
    from switchyard.server.metrics import Metrics

    metrics = Metrics()
    for n in range(int(sys.argv[1])):
        record = DecisionRecord(request_id=str(n), route="agent", router="stage_router", source="hold")
        record.tier, record.selected, record.input_tokens = "capable", "capable", 10
        record.attempts = [Attempt("capable", ok=True, elapsed_ms=5.0)]
        metrics.observe(record)
    if len(sys.argv) > 2:
        sys.stdout.buffer.write(metrics.render())
    """
)


def run(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_workers_write_to_the_directory_and_a_scrape_sums_them(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    run(env, "3")
    run(env, "4")
    text = run(env, "5", "render")  # the scraped worker adds its own 5
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    key = ("route", "agent"), ("router", "stage_router"), ("source", "hold"), ("status", "2xx"), ("tier", "capable")
    assert samples[("switchyard_decisions_total", key)] == 12
    assert samples[("switchyard_tokens_total", (("kind", "input"), ("target", "capable")))] == 120
    assert samples[("switchyard_overhead_seconds_count", (("route", "agent"),))] == 12
    assert any(p.suffix == ".db" for p in tmp_path.iterdir())
