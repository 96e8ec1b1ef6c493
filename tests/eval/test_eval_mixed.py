"""Mixed datasets: outcome types never pooled raw, metrics per benchmark, model-field filters,
and the success fields ``replay`` reads (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import config_text, write_jsonl

from switchyard.cli import main
from switchyard.eval.dataset import Dataset, parse_filters
from switchyard.eval.replay import succeeded

ROUTES = "  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}\n"


def mixed_rows() -> list[dict[str, Any]]:
    """Four 0/1 rows (capable right on all, efficient on two) and two 1-10 judge rows."""
    rows: list[dict[str, Any]] = []
    for i, (strong, weak) in enumerate([(True, True), (True, False), (True, True), (True, False)]):
        rows.append(
            {
                "id": f"b{i}",
                "prompt": f"score=0.{9 - i}",
                "benchmark": "quiz",
                "outcome_type": "binary_correct",
                "models": {"strong-m": {"correct": strong}, "weak-m": {"correct": weak}},
            }
        )
    for i, (strong, weak) in enumerate([(10.0, 1.0), (4.0, 4.0)]):
        rows.append(
            {
                "id": f"j{i}",
                "prompt": f"score=0.{3 - i}",
                "benchmark": "judge",
                "outcome_type": "judge_1_to_10",
                "models": {"strong-m": {"score": strong}, "weak-m": {"score": weak}},
            }
        )
    return rows


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json", "--no-progress"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_judge_scores_are_not_averaged_with_correctness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    data = write_jsonl(tmp_path / "d.jsonl", mixed_rows())
    res = run_json(capsys, "eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data))
    assert res["normalised"] is True
    # Raw pooling would give always-capable (4*1 + 10 + 4) / 6 = 3.0; the judge scores span 1..10,
    # so they become 1.0 and 1/3 and always-capable is (4 + 1 + 1/3) / 6.
    always = {b["name"]: b for b in res["baselines"]}["always capable"]
    assert always["quality"] == pytest.approx((4 + 1 + 1 / 3) / 6)
    assert 0.0 <= res["quality"] <= 1.0
    assert any("rescaled to 0-1 per type" in n for n in res["notes"])
    groups = {g["group"]: g for g in res["groups"]}
    assert set(groups) == {"quiz", "judge"}
    # Each benchmark in its own units: the quiz's always-capable accuracy is exactly 1.0 and the
    # judge rows keep their 1-10 scale (mean of 10 and 4).
    assert groups["quiz"]["capable_quality"] == pytest.approx(1.0)
    assert groups["quiz"]["efficient_quality"] == pytest.approx(0.5)
    assert groups["judge"]["capable_quality"] == pytest.approx(7.0)
    assert groups["quiz"]["outcome_types"] == ["binary_correct"] and groups["quiz"]["n"] == 4
    # The route sends every quiz item to capable (scores .9-.6 >= .5) and the judge items away.
    assert groups["quiz"]["capable_share"] == pytest.approx(1.0)
    assert groups["judge"]["capable_share"] == pytest.approx(0.0)
    assert main(["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "per benchmark (each in its own units):" in out and "judge_1_to_10" in out


def test_one_outcome_type_keeps_its_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    data = write_jsonl(tmp_path / "d.jsonl", [r for r in mixed_rows() if r["benchmark"] == "judge"])
    res = run_json(capsys, "eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data))
    assert res["normalised"] is False and res["groups"] == []
    always = {b["name"]: b for b in res["baselines"]}["always capable"]
    assert always["quality"] == pytest.approx(7.0)


def test_where_filters_on_model_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = mixed_rows()
    rows[0]["models"]["gpt-4.1"] = {"correct": True, "meta": {"run": "a"}}
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    ids = [i.id for i in Dataset(data, filters=parse_filters(["models.weak-m.correct=false"]))]
    assert ids == ["b1", "b3"]
    # model ids with dots: the longest model id that prefixes the key wins
    ids = [i.id for i in Dataset(data, filters=parse_filters(["models.gpt-4.1.meta.run=a"]))]
    assert ids == ["b0"]
    assert [i.id for i in Dataset(data, filters=parse_filters(["models.nope.correct=true"]))] == []
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    argv = ["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data)]
    res = run_json(capsys, *argv, "--where", "models.strong-m.score=10.0")
    assert res["n"] == 1


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ({"success": True}, True),
        ({"is_resolved": False}, False),
        ({"resolved": True}, True),
        ({"reward": 1.0}, True),
        ({"reward": 0.0}, False),
        ({"reward": 0.0, "is_resolved": True}, True),
        ({}, None),
    ],
)
def test_replay_reads_common_success_fields(outcome: dict[str, Any], expected: bool | None) -> None:
    assert succeeded(outcome) is expected


def test_replay_summary_by_is_resolved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "done"}]
    traj = write_jsonl(
        tmp_path / "t.jsonl",
        [{"id": "tb-1", "messages": msgs, "is_resolved": True}, {"id": "tb-2", "messages": msgs, "is_resolved": False}],
    )
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text("  agent: {type: test_session, capable: capable, efficient: efficient}\n"))
    out = tmp_path / "turns.jsonl"
    argv = ["replay", "-c", str(cfg), "--route", "agent", "--trajectories", str(traj), "--out", str(out)]
    res = run_json(capsys, *argv)
    assert set(res["capable_share_by_success"]) == {"success", "failure"}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["is_resolved"] for x in lines] == [True, False]


def test_calibrate_reports_drift_and_per_benchmark_thresholds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    data = write_jsonl(tmp_path / "d.jsonl", mixed_rows())
    argv = ["calibrate", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--capable-share", "0.5"]
    assert main([*argv, "--json", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out)
    groups = {g["benchmark"]: g for g in res["per_benchmark"]}
    # scores .9 .8 .7 .6 (quiz) and .3 .2 (judge): half of all six requests is three quiz items
    # (threshold .65) and no judge item; each benchmark's own threshold gives it half.
    assert res["capable_share"] == pytest.approx(0.5) and res["threshold"] == pytest.approx(0.65)
    assert groups["quiz"]["capable_share"] == pytest.approx(0.75)
    assert groups["judge"]["capable_share"] == 0.0
    assert groups["quiz"]["threshold"] == pytest.approx(0.75) and groups["judge"]["threshold"] == pytest.approx(0.25)
    assert main([*argv, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "per benchmark (the same threshold; drift up to" in out and "its own threshold for 50.0%" in out
