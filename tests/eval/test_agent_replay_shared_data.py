"""The counterfactual agent replay on the recorded Terminal-Bench data (skipped when absent).

The stage router of examples/stage-router.yaml replays the 90 mini-SWE-agent runs; the numbers
are recomputed here from the per-run table and the outcomes file, task by task.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import data_dir

from switchyard.cli import main

DATA = data_dir()
RUNS = DATA / "terminal-bench-trajectories" / "terminal_bench_trajectories_dev.jsonl" if DATA else None
TASKS = DATA / "terminal-bench-paired" / "terminal_bench_paired_tasks.jsonl" if DATA else None
CONFIG = Path(__file__).resolve().parents[2] / "examples" / "stage-router.yaml"
MODELS = ["--efficient-model", "qwen-3-coder-480B", "--capable-model", "claude-4-sonnet"]

needs_data = pytest.mark.skipif(
    RUNS is None or TASKS is None or not RUNS.is_file() or not TASKS.is_file(),
    reason="shared data not found (set SWITCHYARD_DATA_DIR)",
)


def replay(tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: Path, *extra: str) -> dict[str, Any]:
    argv = ["replay", "-c", str(CONFIG), "--route", "agent", "--trajectories", str(runs), "--outcomes", str(TASKS)]
    argv += [*MODELS, "--out", str(tmp_path / "turns.jsonl"), "--runs-out", str(tmp_path / "runs.jsonl")]
    assert main([*argv, *extra, "--json", "--no-progress", "--bootstrap", "200"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@needs_data
def test_stage_router_on_terminal_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert RUNS is not None and TASKS is not None
    res = replay(tmp_path, capsys, RUNS)
    assert (res["runs"], res["tasks"], res["skipped"]) == (90, 23, 0)
    outcomes = {}
    for line in TASKS.read_text().splitlines():
        row = json.loads(line)
        m = row["models"]
        q, s = m["qwen-3-coder-480B"], m["claude-4-sonnet"]
        outcomes[row["task_id"]] = (q["score"], s["score"], q["cost_usd"], s["cost_usd"])
    by_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
    turns = 0
    for line in (tmp_path / "runs.jsonl").read_text().splitlines():
        run = json.loads(line)
        pe, pc, ce, cc = outcomes[run["task"]]
        turns += run["n_turns"]
        k = run["first_switch_turn"]
        if k is None:
            by_task[run["task"]].append((pe, ce))
        else:
            f = (k - 1) / run["n_turns"]
            by_task[run["task"]].append((pc, f * ce + cc))
    assert turns == 1560
    resolve = statistics.fmean(statistics.fmean(v[0] for v in runs) for runs in by_task.values())
    cost = statistics.fmean(statistics.fmean(v[1] for v in runs) for runs in by_task.values())
    cap_resolve = statistics.fmean(outcomes[t][1] for t in by_task)
    cap_cost = statistics.fmean(outcomes[t][3] for t in by_task)
    rows = {r["name"].split(" (")[0]: r for r in res["cases"]["base"]["rows"]}
    route = rows["route"]
    assert route["resolve"] == pytest.approx(resolve) and route["cost_usd"] == pytest.approx(cost)
    assert route["points_lost"] == pytest.approx(100 * (cap_resolve - resolve))
    assert route["cost_saved"] == pytest.approx(1 - cost / cap_cost)
    assert rows["always-capable"]["resolve"] == pytest.approx(cap_resolve)
    assert rows["always-efficient"]["resolve"] == pytest.approx(statistics.fmean(outcomes[t][0] for t in by_task))
    iv = res["cases"]["base"]["intervals"]["points_lost"]
    assert iv["low"] < route["points_lost"] < iv["high"]


@needs_data
def test_task_level_on_the_paired_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert TASKS is not None
    res = replay(tmp_path, capsys, TASKS)
    rows = {r["name"].split(" (")[0]: r for r in res["cases"]["base"]["rows"]}
    # PROVENANCE.md: qwen resolves 17.0 % of the 200 trials, Sonnet 4 36.0 % (40 tasks x 5).
    assert res["runs"] == 40 and res["tasks"] == 40
    assert rows["always-efficient"]["resolve"] == pytest.approx(0.17)
    assert rows["always-capable"]["resolve"] == pytest.approx(0.36)
    assert rows["always-capable"]["cost_usd"] * 40 * 5 == pytest.approx(92.19, abs=0.01)
