"""The loop on a log the engine itself wrote (issue 48): a trajectory route with a control share
serves sessions through a real fake upstream, reports go in through ``Switchyard.feedback``, and
``switchyard tune --decision-log`` reads that log — the record fields it relies on (``score``,
``source``, ``selected``, ``baseline_cost_usd``, ``details.arm``) are the ones the engine writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from switchyard import Switchyard
from switchyard.cli import main

TRACEBACK = "Traceback (most recent call last):\n  File 'app.py', line 3\nValueError: bad input"
ROUTE = {
    "type": "trajectory",
    "capable": "capable",
    "efficient": "efficient",
    "threshold": 0.9,
    "experiment": {"control_share": 0.5},
}


async def test_tune_reads_the_log_the_engine_wrote(
    config: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.jsonl"
    cfg = {**config, "routes": {"agent": ROUTE}}
    async with Switchyard.from_config({**cfg, "decision_log": str(log)}) as sy:
        for s in range(30):
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"fix the failing test in module {s}"}]
            for _ in range(3):
                await sy.complete(model="agent", messages=messages, session_id=f"s{s}")
                messages += [{"role": "assistant", "content": "ran pytest"}, {"role": "user", "content": TRACEBACK}]
            await sy.feedback(session_id=f"s{s}", resolved=s % 3 != 0)
        await sy.feedback(session_id="never-served", resolved=True)
    sy.close()
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    arms = {x["session_id"]: x["details"]["arm"] for x in lines if x.get("object") is None}
    control = sum(1 for arm in arms.values() if arm == "control")
    assert 10 <= control <= 20  # a hash of the session id: about half
    scored = [x for x in lines if x.get("source") == "trajectory"]
    assert scored and all(isinstance(x["score"], float) and x["baseline_cost_usd"] > 0 for x in scored)
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(cfg))
    argv = ["tune", "-c", str(path), "--route", "agent", "--decision-log", str(log), "--json"]
    assert main([*argv, "--grid", "threshold=-1,0.5", "--min-sessions", "5", "--folds", "3", "--bootstrap", "50"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["sessions"] == 30 - control and found["capable_sessions"] == control
    assert found["unmatched_reports"] == 1 and found["without_outcome"] == 0
    rows = {r["value"]: r for r in found["rows"]}
    # At -1 every routed session switches on its first turn: all cost is the capable one's.
    assert rows[-1.0]["cost_saved"] == pytest.approx(0.0, abs=1e-9)
    assert found["verdict"].startswith(("kept", "changed"))
