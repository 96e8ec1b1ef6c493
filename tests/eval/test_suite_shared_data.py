"""The agent suite on the recorded data (skipped when ``shared/data`` is absent).

Checks that the per-turn token estimates follow AgentDojo's own rule (they add up to every run's
recorded totals), that list pricing of a never-switched run is the data's own ``cost_usd_est``,
and that the suite's table rows agree with the data (resolve rates of both models per pair,
always-capable = the capable model's own runs, pooled rows = means over the pooled pairs).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import data_dir

from switchyard.cli import main
from switchyard.config.load import load_config
from switchyard.eval.cache_cost import total_tokens, turn_tokens
from switchyard.eval.suite import load_suite
from switchyard.eval.suite_runs import LineCache, build_pair, model_prices

DATA = data_dir()
ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "eval" / "agent-suite.yaml"
TRAJ = DATA / "agentdojo" / "agentdojo_trajectories.jsonl" if DATA else None

needs_data = pytest.mark.skipif(
    TRAJ is None or not TRAJ.is_file(), reason="shared data not found (set SWITCHYARD_DATA_DIR)"
)


def lines() -> list[dict[str, Any]]:
    assert TRAJ is not None
    return [json.loads(x) for x in TRAJ.read_text().splitlines()]


@needs_data
def test_turn_tokens_add_up_to_the_recorded_estimates() -> None:
    rows = lines()
    assert len(rows) == 1029
    for row in rows:
        got = total_tokens(turn_tokens(row["messages"]))
        assert got == (row["input_tokens_est"], row["output_tokens_est"]), row["id"]


@needs_data
def test_list_price_of_an_unswitched_run_is_the_recorded_cost() -> None:
    suite = load_suite(SUITE, data_dir=DATA)
    loaded = load_config(ROOT / "examples" / "coding-agent.yaml", env={})
    recorded = {row["id"]: row["cost_usd_est"] for row in lines()}
    cache = LineCache()
    for pair in suite.spec.pairs:
        if pair.dataset != "agentdojo":
            continue
        data = build_pair(suite, loaded, pair, split=None, lines=cache, pricing="list")
        p = model_prices(suite, loaded, (pair.efficient,))[pair.efficient]
        # The data rounds each total up to a whole token and the USD to 6 decimals.
        tol = (p.input + p.output) / 1e6 + 1e-6
        assert len(data.tables) == 49
        for run_id, table in data.tables.items():
            assert table.never[1] == pytest.approx(recorded[run_id], abs=tol), run_id


@needs_data
def test_the_suite_rows_agree_with_the_data(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "-c", str(ROOT / "examples" / "coding-agent.yaml"), "--route", "agent"]
    argv += ["--suite", str(SUITE), "--data-dir", str(DATA), "--bootstrap", "100", "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    resolved: dict[str, list[bool]] = {}
    for row in lines():
        resolved.setdefault(row["model"], []).append(row["is_resolved"])
    pairs = {p["name"]: p for p in res["pairs"]}
    assert len(pairs) == 6
    for p in pairs.values():
        rows = {r["name"].split(" (")[0]: r for r in p["rows"]}
        if p["dataset"] == "agentdojo":
            assert (p["tasks"], p["runs"], p["skipped"]) == (49, 49, {})
            assert rows["always-efficient"]["resolve"] == pytest.approx(statistics.fmean(resolved[p["efficient"]]))
            assert rows["always-capable"]["resolve"] == pytest.approx(statistics.fmean(resolved[p["capable"]]))
        else:
            assert (p["tasks"], p["runs"], p["stand_in_runs"]) == (23, 90, True)
        iv = p["intervals"]["points_lost"]
        assert iv["low"] <= rows["route"]["points_lost"] <= iv["high"]
    assert not pairs["AgentDojo gpt-4o-mini → gpt-4o"]["pooled"]
    pooled = {g["name"]: g for g in res["pooled"]}
    members = pooled["AgentDojo pooled"]["pairs"]
    assert len(members) == 4
    lost = statistics.fmean(pairs[m]["rows"][0]["points_lost"] for m in members)
    assert pooled["AgentDojo pooled"]["rows"][0]["points_lost"] == pytest.approx(lost)
    assert len(pooled["all pooled"]["pairs"]) == 5
