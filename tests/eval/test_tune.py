"""``switchyard tune`` (issue 48, item 3): the choice rule on hand-built numbers, and the command
on a synthetic suite written here — chosen on the train split, scored on the held-out test split,
``--write`` only when the setting changed.

Route ``scored`` (test_score) sends a turn to capable when its user message says ``score=X`` with
X >= threshold. Every efficient run scores 0.6 on its first turn and resolves its task; every
capable run resolves it too. At threshold 0.5 (the config's) each run switches at once and pays
the capable model; at 0.7 or 0.9 no run switches: the same tasks resolved for a fraction of the
cost. Every task is alike, so the bootstrap intervals are points and the settings are told apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_helpers import config_text, write_jsonl

from switchyard.cli import main
from switchyard.eval.tune import Point, choose

ROUTE = "  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}\n"
SUITE = """\
data_dir: .
datasets:
  toy: {trajectories: runs.jsonl, outcomes: runs, runs_field: model}
pairs:
  - {dataset: toy, name: weak-strong, efficient: weak-m, capable: strong-m}
splits:
  train: {hash: {buckets: 2, keep: [0], salt: tune}}
  test: {hash: {buckets: 2, keep: [1], salt: tune}}
"""


def conv(*scores: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for s in scores:
        out += [{"role": "user", "content": f"score={s} go on"}, {"role": "assistant", "content": "ok " * 20}]
    return out


def files(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTE))
    rows = []
    for i in range(24):
        rows.append(
            {
                "id": f"weak-m/T{i}",
                "task_id": f"T{i}",
                "model": "weak-m",
                "is_resolved": True,
                "messages": conv(0.6, 0.1),
            }
        )
        rows.append(
            {
                "id": f"strong-m/T{i}",
                "task_id": f"T{i}",
                "model": "strong-m",
                "is_resolved": True,
                "messages": conv(0.1, 0.1),
            }
        )
    write_jsonl(tmp_path / "runs.jsonl", rows)
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    return cfg, suite


def point(value: Any, lost: float, saved: float, half: float = 0.05, *, current: bool = False) -> Point:
    intervals = {"points_lost": (lost - 100 * half, lost + 100 * half), "cost_saved": (saved - half, saved + half)}
    return Point(value=value, current=current, group="all", points_lost=lost, cost_saved=saved, intervals=intervals)


def test_the_rule_picks_the_cheapest_setting_within_the_budget() -> None:
    now = point(0.5, 1.0, 0.30, current=True)
    chosen, verdict = choose([now, point(0.7, 1.5, 0.60), point(0.9, 9.0, 0.90)], max_points_lost=2.0)
    assert (chosen.value, verdict) == (0.7, "changed")


def test_the_rule_keeps_the_current_setting_when_the_data_cannot_tell() -> None:
    now = point(0.5, 1.0, 0.30, half=0.2, current=True)
    chosen, verdict = choose([now, point(0.7, 1.5, 0.40, half=0.2)], max_points_lost=2.0)
    assert (chosen.value, verdict) == (0.5, "kept: too few to tell")


def test_the_rule_keeps_the_current_setting_when_it_is_best_or_nothing_fits() -> None:
    now = point(0.5, 1.0, 0.60, current=True)
    assert choose([now, point(0.7, 1.0, 0.50)], max_points_lost=2.0) == (now, "kept: best")
    assert choose([now, point(0.7, 5.0, 0.90)], max_points_lost=0.5) == (now, "kept: none within the budget")


def test_tune_chooses_on_train_scores_on_test_and_writes_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, suite = files(tmp_path)
    out = tmp_path / "tuned.yaml"
    argv = ["tune", "-c", str(cfg), "--route", "scored", "--suite", str(suite), "--train", "train", "--test", "test"]
    argv += ["--grid", "threshold=0.5,0.7,0.9", "--bootstrap", "200", "--write", str(out), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert (data["current"], data["chosen"], data["verdict"]) == (0.5, 0.7, "changed")
    assert [p["value"] for p in data["train"]] == [0.5, 0.7, 0.9]  # the current setting first, once
    now, tuned = data["test"]
    assert (now["value"], tuned["value"]) == (0.5, 0.7)
    assert tuned["cost_saved"] > now["cost_saved"] and tuned["points_lost"] == now["points_lost"] == 0
    written = yaml.safe_load(out.read_text())
    assert written["routes"]["scored"]["threshold"] == 0.7
    assert out.read_text().startswith("# test config")  # the file's comments are kept
    # The text table names the change and the held-out rows.
    assert main([*argv[:-3], "--bootstrap", "200"]) == 0
    text = capsys.readouterr().out
    assert "routes.scored.threshold: 0.5 -> 0.7" in text and "test split 'test' (held out" in text


def test_tune_refuses_to_score_on_its_training_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, suite = files(tmp_path)
    argv = ["tune", "-c", str(cfg), "--route", "scored", "--suite", str(suite), "--train", "train", "--test", "train"]
    assert main([*argv, "--grid", "threshold=0.7"]) == 1
    assert "says nothing" in capsys.readouterr().err
