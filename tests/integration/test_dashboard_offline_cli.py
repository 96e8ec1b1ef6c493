"""``switchyard dashboard --log``: a real decision log, served by the CLI in its own process (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from _configs import skeleton_config
from _redis import free_port
from _waits import serving, stop

from switchyard.api import Switchyard
from switchyard.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_offline_dashboard_shows_what_switchyard_stats_sums(
    tmp_path: Path, module_upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.jsonl"
    sy = Switchyard.from_config(skeleton_config(module_upstream.port), decision_log=str(log))
    try:
        for i in range(6):
            done = sy.complete_sync(
                model="mix" if i % 2 else "resilient",
                messages=[{"role": "user", "content": f"question {i}"}],
                session_id=f"s{i % 3}",
            )
            assert done.record.status == 200  # type: ignore[union-attr]
    finally:
        sy.close()
    assert main(["stats", str(log), "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "switchyard", "dashboard", "--log", str(log), "--port", str(port)]
    output = tmp_path / "dashboard.out"
    with output.open("wb") as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        summary_url = f"http://127.0.0.1:{port}/dashboard/api/summary"
        serving(summary_url, proc, 30, "switchyard dashboard", log=output)
        summary = httpx.get(summary_url, timeout=2)
        data = summary.json()
        assert data["replica"]["mode"] == "offline"
        assert data["since_start"]["usd"]["total"] == expected["total"]
        assert data["since_start"]["usd"]["routes"] == expected["routes"]
        assert data["window"]["total"] == expected["total"]  # the default window spans the log
        sessions = httpx.get(f"http://127.0.0.1:{port}/dashboard/api/sessions", timeout=5).json()["sessions"]
        assert sum(s["turns"] for s in sessions) == 6
        page = httpx.get(f"http://127.0.0.1:{port}/dashboard/", timeout=5)
        assert page.status_code == 200 and b"app.js" in page.content
    finally:
        stop(proc)
