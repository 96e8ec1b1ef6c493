"""Feedback and experiment arms under ``switchyard serve --workers 2`` on a real Redis (issue 48's
"done when"): every request opens a new connection, so the kernel spreads them over both
workers; a report matches its session's decisions whichever worker served them, and a repeat
says it replaced the report another worker kept. The control arm of each session is the sticky
draw, whichever worker decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _configs import skeleton_config
from _redis import RedisServer
from _waits import wait_until
from _workers import serve_workers

from switchyard.routers.experiment import control_draw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = [f"w-{i}" for i in range(8)]


def test_reports_and_arms_hold_across_workers_on_redis(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path).start()
    config = skeleton_config(9)  # no upstream is called: decisions only
    config["routes"]["trial"] = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],
        "experiment": {"control_share": 0.5, "baseline": "capable"},
    }
    config["state"] = {"backend": "redis", "url": redis.url, "timeout_s": 5.0}
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        with serve_workers(path, tmp_path) as port:
            url = f"http://127.0.0.1:{port}"
            body = {"model": "trial", "messages": [{"role": "user", "content": "hello workers"}]}
            for session in SESSIONS:
                for _ in range(2):  # a new connection each time: either worker decides
                    headers = {"x-switchyard-session-id": session}
                    decided = httpx.post(f"{url}/v1/decision", json=body, headers=headers, timeout=30).json()
                    expected = "control" if control_draw(None, session) < 0.5 else "random"
                    assert decided["source"] == expected, (session, decided)

            def report(session: str) -> dict[str, Any]:
                answer = httpx.post(f"{url}/v1/feedback", json={"session_id": session, "resolved": True}, timeout=30)
                return dict(answer.json())

            for session in SESSIONS:
                # The index entry of a decision is written to Redis just after its answer: a report
                # racing it to the other worker may come first (answered unmatched, and kept).
                wait_until(lambda s=session: report(s)["matched"], 30, f"a matched report on {session}")
                again = [report(session) for _ in range(2)]
                assert [(a["matched"], a["replaced"]) for a in again] == [(True, True), (True, True)], again
    finally:
        redis.stop()
