"""``switchyard replay --suite`` on a tiny synthetic suite written here.

Route ``scored`` (test_score) sends a turn to capable when the latest user message says
``score=X`` with X >= 0.5. Efficient model ``weak-m``'s runs: task A scores .2, .6, .95 (first
switch at turn 2 of 3, unresolved), B .1 (resolved), C .3, .1 (unresolved); capable model
``strong-m``'s runs: A (resolved), B (unresolved), C (resolved). Prices come from the config's
targets (no caching discount there); the cache arithmetic itself is pinned in test_cache_cost.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import config_text, write_jsonl

from switchyard.cli import main
from switchyard.eval.cache_cost import CachePrice, price_turns, switched_cost, turn_tokens
from switchyard.eval.suite import SuiteError, load_suite

ROUTE = "  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}\n"
PRICES = {"weak-m": CachePrice(0.1, 0.4, 0.1, 0.1), "strong-m": CachePrice(10, 30, 10, 10)}


def conv(*scores: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for s in scores:
        out += [{"role": "user", "content": f"score={s} go on"}, {"role": "assistant", "content": "ok " * 20}]
    return out


RUNS = {
    ("weak-m", "A"): (conv(0.2, 0.6, 0.95), False),
    ("weak-m", "B"): (conv(0.1), True),
    ("weak-m", "C"): (conv(0.3, 0.1), False),
    ("strong-m", "A"): (conv(0.1, 0.1), True),
    ("strong-m", "B"): (conv(0.1), False),
    ("strong-m", "C"): (conv(0.2), True),
}
SUITES = {"A": "s1", "B": "s2", "C": "s1"}

SUITE = """\
data_dir: .
datasets:
  toy: {trajectories: runs.jsonl, outcomes: runs, runs_field: model}
pairs:
  - {dataset: toy, name: weak-strong, efficient: weak-m, capable: strong-m}
splits:
  s1: {where: {suite: [s1]}}
  half: {hash: {buckets: 2, keep: [0], salt: t}}
  empty: {where: {suite: [s9]}}
"""


def files(tmp_path: Path, suite: str = SUITE) -> tuple[Path, Path]:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTE))
    rows = [
        {"id": f"{m}/{t}", "task_id": t, "model": m, "suite": SUITES[t], "is_resolved": ok, "messages": msgs}
        for (m, t), (msgs, ok) in RUNS.items()
    ]
    write_jsonl(tmp_path / "runs.jsonl", rows)
    path = tmp_path / "suite.yaml"
    path.write_text(suite)
    return cfg, path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["replay", *argv, "--json"]) == 0, capsys.readouterr().err
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def rows(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"].split(" (")[0]: r for r in entry["rows"]}


def never(task: str) -> tuple[float, float]:
    msgs, ok = RUNS[("weak-m", task)]
    turns = turn_tokens(msgs)
    return float(ok), price_turns(turns, ["weak-m"] * len(turns), PRICES)


def switched(task: str, k: int) -> tuple[float, float]:
    eff, cap = turn_tokens(RUNS[("weak-m", task)][0]), turn_tokens(RUNS[("strong-m", task)][0])
    return float(RUNS[("strong-m", task)][1]), switched_cost(eff, cap, k, PRICES, ("weak-m", "strong-m"))


def test_suite_rows_are_the_latch_on_the_efficient_models_own_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, suite = files(tmp_path)
    res = run_json(capsys, "-c", str(cfg), "--route", "scored", "--suite", str(suite), "--bootstrap", "200")
    (pair,) = res["pairs"]
    assert (pair["tasks"], pair["runs"], pair["pricing"]) == (3, 3, "cache")
    r = rows(pair)
    route = [switched("A", 2), never("B"), never("C")]
    cap = [switched(t, 1) for t in "ABC"]
    assert r["route"]["resolve"] == pytest.approx(2 / 3)  # A by strong-m, B by weak-m
    assert r["route"]["cost_usd"] == pytest.approx(sum(v[1] for v in route) / 3)
    assert r["always-capable"]["cost_usd"] == pytest.approx(sum(v[1] for v in cap) / 3)
    assert r["always-efficient"]["cost_usd"] == pytest.approx(sum(never(t)[1] for t in "ABC") / 3)
    assert r["always-capable"]["resolve"] == pytest.approx(2 / 3)
    assert r["always-efficient"]["points_lost"] == pytest.approx(100 * (2 / 3 - 1 / 3))
    assert r["route"]["points_lost"] == pytest.approx(0.0)
    assert r["route"]["run_share"] == pytest.approx(1 / 3) and r["route"]["first_switch_turn"] == 2
    # The null: each run switched with p = 1/3 at f = 1/3 of its length (A: turn 2, B: 1, C: 1).
    null = [
        tuple(s / 3 + 2 * n / 3 for s, n in zip(switched(t, k), never(t), strict=True))
        for t, k in (("A", 2), ("B", 1), ("C", 1))
    ]
    assert r["random latch"]["resolve"] == pytest.approx(sum(v[0] for v in null) / 3)
    assert r["random latch"]["cost_usd"] == pytest.approx(sum(v[1] for v in null) / 3)
    iv = pair["intervals"]
    assert iv["points_lost"]["low"] <= r["route"]["points_lost"] <= iv["points_lost"]["high"]
    # A switch pays for the handed-over context: dearer than the capable run alone.
    assert switched("A", 2)[1] > switched("A", 1)[1]


def test_a_split_scores_only_its_tasks_and_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, suite = files(tmp_path)
    base = ["-c", str(cfg), "--route", "scored", "--suite", str(suite), "--bootstrap", "0"]
    res = run_json(capsys, *base, "--split", "s1")
    assert res["split"] == "s1" and res["pairs"][0]["tasks"] == 2
    assert main(["replay", *base, "--split", "s1", "--list-split"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == {"toy": ["A", "C"]}
    spec = load_suite(suite).split("half")
    assert spec is not None and spec.hash is not None
    assert [spec.hash.bucket(t) for t in "ABC"] == [spec.hash.bucket(t) for t in "ABC"]  # deterministic
    assert main(["replay", *base, "--split", "nope"]) == 1
    assert "defines no such split; splits: s1, half, empty" in capsys.readouterr().err
    assert main(["replay", *base, "--split", "empty"]) == 1
    assert "no pair has tasks in split 'empty'" in capsys.readouterr().err


def test_the_text_table_and_the_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, suite = files(tmp_path)
    argv = ["-c", str(cfg), "--route", "scored", "--suite", str(suite), "--bootstrap", "50"]
    sweep = ["--sweep", "threshold=0.5,0.99", "--sweep-out", str(tmp_path / "sw")]
    outs = ["--runs-out", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "turns.jsonl")]
    assert main(["replay", *argv, *sweep, *outs]) == 0
    out = capsys.readouterr().out
    assert "weak-strong" in out and "always-efficient" in out and "sweep of threshold" in out
    with (tmp_path / "runs.csv").open() as fh:
        per_run = {r["run"]: r for r in csv.DictReader(fh)}
    assert per_run["weak-m/A"]["first_switch_turn"] == "2" and per_run["weak-m/B"]["first_switch_turn"] == ""
    assert float(per_run["weak-m/A"]["cost_usd"]) == pytest.approx(switched("A", 2)[1])
    assert float(per_run["weak-m/A"]["switch_score"]) == 0.6 and float(per_run["weak-m/A"]["max_score"]) == 0.95
    turns = [json.loads(x) for x in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert [(t["pair"], t["session_id"], t["score"]) for t in turns[:3]] == [
        ("weak-strong", "weak-m/A", 0.2),
        ("weak-strong", "weak-m/A", 0.6),
        ("weak-strong", "weak-m/A", 0.95),
    ]
    assert len(turns) == 6  # the sweep's replays are not written
    lines = (tmp_path / "sw.csv").read_text().splitlines()
    assert lines[0].startswith("key,value,pair") and len(lines) == 3
    assert lines[2].split(",")[1] == "0.99" and lines[2].split(",")[8] == "0.000000"  # no run escalated


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("datasets: {}\npairs: []\n", "datasets: "),
        (
            "datasets:\n  toy: {trajectories: r.jsonl, outcomes: runs}\npairs:\n"
            "  - {dataset: toy, efficient: a, capable: b}\n",
            "datasets.toy: outcomes: runs needs runs_field",
        ),
        (
            "datasets:\n  toy: {trajectories: r.jsonl, outcomes: runs, runs_field: model}\npairs:\n"
            "  - {dataset: other, efficient: a, capable: b}\n",
            "pairs[0].dataset 'other' is not a dataset",
        ),
        (
            "datasets:\n  toy: {trajectories: r.jsonl, outcomes: runs, runs_field: model}\npairs: []\n"
            "splits:\n  x: {hash: {buckets: 2, keep: [2]}}\n",
            "splits.x.hash: keep [2] outside 0..1",
        ),
    ],
)
def test_bad_suite_files_name_the_yaml_path(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_suite(path)


def test_a_model_without_a_price_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, suite = files(tmp_path, SUITE.replace("capable: strong-m", "capable: other-m"))
    rows_ = [{"id": "o/A", "task_id": "A", "model": "other-m", "is_resolved": True, "messages": conv(0.1)}]
    with (tmp_path / "runs.jsonl").open("a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows_))
    assert main(["replay", "-c", str(cfg), "--route", "scored", "--suite", str(suite)]) == 1
    assert "no price for model 'other-m': add prices.other-m" in capsys.readouterr().err


def test_the_shipped_suite_names_the_issue_pairs_and_prices_every_own_run_model() -> None:
    suite = load_suite(Path(__file__).resolve().parents[2] / "examples" / "eval" / "agent-suite.yaml")
    pairs = {(p.efficient, p.capable): p for p in suite.spec.pairs}
    assert ("meta-llama_Llama-3.3-70B-Instruct", "claude-3-7-sonnet-20250219") in pairs
    assert ("qwen-3-coder-480B", "claude-4-sonnet") in pairs
    assert pairs[("gpt-4o-mini-2024-07-18", "gpt-4o-2024-05-13")].pooled is False
    for p in suite.spec.pairs:
        if suite.spec.datasets[p.dataset].own_runs:
            assert {p.efficient, p.capable} <= set(suite.spec.prices)
    assert {"dev", "test", "banking", "not-banking"} <= set(suite.spec.splits)
