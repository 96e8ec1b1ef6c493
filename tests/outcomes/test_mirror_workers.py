"""Shadow mode's mirror under ``switchyard serve --workers 2`` on a real Redis (issue 48's "done
when"): every request opens a new connection, so the kernel spreads a session's requests over
both workers; whichever worker serves, a session is mirrored exactly when its sticky draw (the
SHA-256 of :func:`mirror_draw`, computed here in another process) is below ``mirror_share``.
Every mirrored record carries its usage and cost, the spend is booked as
``experiment_cost_usd``, and ``switchyard stats --experiment`` on the workers' joined decision
log corrects the prediction with the mirrors (``basis: mirrors``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _redis import RedisServer
from _waits import wait_until
from _workers import serve_workers

from switchyard.routers.experiment import mirror_draw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = [f"m-{i}" for i in range(8)]
REQUESTS = 2  # per session: a new connection each, so either worker may serve it


def decisions(log: Path) -> list[dict[str, Any]]:
    """The decision records written so far (feedback lines and a half-written last line left out)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("route") == "exp":
            found.append(entry)
    return found


def test_the_sticky_mirror_draw_and_its_correction_hold_across_workers_on_redis(
    config: dict[str, Any], tmp_path: Path
) -> None:
    expected = {s: mirror_draw(None, s) < 0.5 for s in SESSIONS}
    assert set(expected.values()) == {True, False}  # both kinds among these ids
    redis = RedisServer(tmp_path).start()
    config = {**config, "routes": dict(config["routes"])}
    config["routes"]["exp"] = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "experiment": {"mode": "shadow", "mirror_share": 0.5},  # capable serves; efficient is mirrored
    }
    config["state"] = {"backend": "redis", "url": redis.url, "timeout_s": 5.0}
    path, log = tmp_path / "router.yaml", tmp_path / "decisions.jsonl"
    path.write_text(yaml.safe_dump(config))
    try:
        with serve_workers(path, tmp_path, "--decision-log", str(log)) as port:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            body = {"model": "exp", "messages": [{"role": "user", "content": "hello workers"}]}
            for session in SESSIONS:
                for _ in range(REQUESTS):
                    headers = {"x-switchyard-session-id": session}
                    answer = httpx.post(url, json=body, headers=headers, timeout=30)
                    assert answer.status_code == 200, answer.text
                    assert answer.headers["x-switchyard-selected-model"] == "capable"  # the baseline served
            # A mirrored record reaches the log when its mirror ends, a moment after the answer.
            wait_until(lambda: len(decisions(log)) == len(SESSIONS) * REQUESTS, 60, "every record logged")
    finally:
        redis.stop()

    records = decisions(log)
    for record in records:
        details = record["details"]
        assert (details["arm"], details["would_select"]) == ("shadow", "efficient"), record
        assert ("mirror" in details) == expected[record["session_id"]], record
        if "mirror" in details:
            mirror = details["mirror"]
            assert mirror["target"] == "efficient" and "error" not in mirror and "skipped" not in mirror, mirror
            assert mirror["input_tokens"] > 0 and mirror["output_tokens"] > 0 and mirror["cost_usd"] > 0
            assert record["experiment_cost_usd"] == pytest.approx(mirror["cost_usd"])
        else:
            assert record["experiment_cost_usd"] == 0
    mirrored = [r for r in records if "mirror" in r["details"]]
    assert len(mirrored) == REQUESTS * sum(expected.values())

    stats = subprocess.run(
        [sys.executable, "-m", "switchyard", "stats", str(log), "--experiment", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    view = json.loads(stats.stdout)["experiment"]["exp"]["shadow"]
    assert view["basis"] == "mirrors", view
    assert view["mirrored_sessions"] == sum(expected.values())
    assert view["mirrored_requests"] == len(mirrored)
    assert view["mirror_cost_usd"] == pytest.approx(sum(r["experiment_cost_usd"] for r in mirrored))
    assert view["predicted_saving_per_session"]["n"] == len(SESSIONS)
