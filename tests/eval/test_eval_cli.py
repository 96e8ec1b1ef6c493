"""``switchyard eval`` end to end on small hand-made datasets (numbers worked out by hand)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import SCORES, WEAK, config_text, rows, write_jsonl

from switchyard.cli import main

ROUTES = """\
  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}
  mix: {type: random, targets: [efficient, capable], seed: 3}
  cheap: {type: passthrough, target: efficient}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    return cfg, write_jsonl(tmp_path / "data.jsonl", rows())


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json", "--no-progress"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_json_metrics_of_a_scored_route(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    res = run_json(capsys, "eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data))
    for key in ("apgr", "cpt50", "cpt80", "quality", "capable_share", "cost_usd"):
        assert key in res
    # Threshold .5 sends the first four to capable: quality 6/8, share .5, PGR (.75-.5)/.375.
    assert res["quality"] == pytest.approx(0.75)
    assert res["capable_share"] == pytest.approx(0.5)
    assert res["pgr"] == pytest.approx(2 / 3)
    # Curve PGR 0 1/3 1/3 2/3 2/3 2/3 2/3 2/3 1 at k/8 -> APGR 4.5/8; CPT50 .3125; CPT80 .925
    assert res["apgr"] == pytest.approx(0.5625)
    assert res["cpt50"] == pytest.approx(0.3125)
    assert res["cpt80"] == pytest.approx(0.925)
    # Cost: 4 x $0.01 capable + 4 x (100 in x $0.1 + 100 out x $0.4 per Mtok) efficient.
    assert res["cost_usd"] == pytest.approx(0.04 + 4 * 0.00005)
    assert res["tiers"] == {"capable": "capable", "efficient": "efficient", "from": "route"}
    assert res["mapping"] == {"capable": "strong-m", "efficient": "weak-m"}
    names = {b["name"]: b for b in res["baselines"]}
    assert names["random (same share)"]["apgr"] == 0.5
    # Every item but q6 has a right answer; the oracle sends the three gains (q0 q2 q7) to capable.
    assert names["oracle"]["quality"] == pytest.approx(7 / 8)
    assert names["oracle"]["capable_share"] == pytest.approx(3 / 8)
    assert names["always capable"]["cost_usd"] == pytest.approx(0.08)
    assert res["swept"] is True and res["skipped"] == 0


def test_table_output(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    assert main(["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "route scored (test_score) on data.jsonl: 8 item(s) decided, 0 skipped" in out
    for name in ("route scored", "always efficient", "always capable", "random (same share)", "oracle"):
        assert name in out
    assert "APGR" in out and "CPT50" in out
    assert "0.562" in out  # APGR


def test_sweep_writes_curve_and_plot(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, data = files
    out_dir = tmp_path / "out"
    argv = ["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--sweep", "--out", str(out_dir)]
    assert main([*argv, "--no-progress"]) == 0
    with (out_dir / "curve.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 9  # t = inf, then one point per distinct score
    assert table[0]["threshold"] == "inf" and table[0]["capable_share"] == "0.000000"
    assert [float(r["threshold"]) for r in table[1:]] == SCORES
    assert float(table[-1]["quality"]) == pytest.approx(7 / 8)
    assert (out_dir / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    decisions = [json.loads(line) for line in (out_dir / "decisions.jsonl").read_text().splitlines()]
    assert [d["selected"] for d in decisions] == ["capable"] * 4 + ["efficient"] * 4
    assert decisions[0]["score"] == 0.95 and decisions[0]["quality"] == 1.0
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["apgr"] == pytest.approx(0.5625) and len(metrics["curve"]) == 9
    assert "wrote" in capsys.readouterr().out


def test_sweep_needs_scores(files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    argv = ["eval", "-c", str(cfg), "--route", "mix", "--dataset", str(data), "--sweep", "--out", str(tmp_path / "o")]
    assert main([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "route 'mix' (type random) gave no score for any item" in err


def test_random_route_tiers_from_prices(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    res = run_json(capsys, "eval", "-c", str(cfg), "--route", "mix", "--dataset", str(data))
    assert res["tiers"]["from"] == "prices" and res["tiers"]["capable"] == "capable"
    assert res["swept"] is False
    share = res["capable_share"]
    assert sum(res["shares"].values()) == pytest.approx(1.0)
    names = {b["name"]: b for b in res["baselines"]}
    # Random baseline at the route's share: q_weak + share * gap, exactly.
    assert names["random (same share)"]["quality"] == pytest.approx(0.5 + share * 0.375)


def test_passthrough_with_tier_flags(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    argv = ["eval", "-c", str(cfg), "--route", "cheap", "--dataset", str(data)]
    res = run_json(capsys, *argv, "--capable", "capable", "--efficient", "efficient")
    assert (res["quality"], res["capable_share"], res["pgr"], res["apgr"]) == (0.5, 0.0, 0.0, 0.5)
    assert res["tiers"]["from"] == "flags"
    # Without tiers: a plain table of targets.
    res = run_json(capsys, *argv)
    assert res["tiers"] is None and res["apgr"] is None
    assert res["shares"] == {"efficient": 1.0}
    assert {b["name"] for b in res["baselines"]} == {"always efficient", "random (uniform)", "oracle"}


def test_filters_and_limit(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    res = run_json(capsys, "eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--limit", "3")
    assert res["n"] == 3


def test_missing_mapped_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    data = write_jsonl(tmp_path / "data.jsonl", rows(("strong-m",)))
    assert main(["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "target 'efficient' (model 'weak-m') has no outcomes in data.jsonl" in err
    assert "--map efficient=DATASET_MODEL" in err and "models in the dataset: strong-m" in err
    # --map to a model the dataset lacks, and a later line that lacks a mapped model
    argv = ["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--no-progress"]
    assert main([*argv, "--map", "efficient=nope"]) == 1
    assert "has no model 'nope'; models in the dataset: strong-m" in capsys.readouterr().err
    mixed = rows()
    del mixed[5]["models"]["weak-m"]
    mixed[2]["models"]["weak-m"] = {"cost_usd": 0.001}  # present, but no outcome value
    write_jsonl(data, mixed)
    # real logs have gaps: the two items are skipped and counted with their reasons
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["skipped"] == 2 and res["n"] == len(mixed) - 2
    assert res["skipped_reasons"] == {
        "no outcome for model 'weak-m': not in the item": 1,
        "no outcome for model 'weak-m': no correct/resolved/score value": 1,
    }
    assert main(argv) == 0
    assert "1 x no outcome for model 'weak-m': not in the item (e.g. q5)" in capsys.readouterr().out
    # --strict stops at the first gap, naming file, line and mapping
    assert main([*argv, "--strict"]) == 1
    err = capsys.readouterr().err
    assert "data.jsonl:3: models.weak-m has no outcome" in err


def test_map_and_cost_per_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTES))
    renamed = [
        {
            "id": r["id"],
            "prompt": r["prompt"],
            "models": {"A": {"correct": r["models"]["strong-m"]["correct"]}},
        }
        for r in rows()
    ]
    for r, w in zip(renamed, WEAK, strict=True):
        r["models"]["B"] = {"correct": bool(w)}
    data = write_jsonl(tmp_path / "d.jsonl", renamed)
    argv = ["eval", "-c", str(cfg), "--route", "scored", "--dataset", str(data), "--map", "capable=A"]
    res = run_json(capsys, *argv, "--map", "efficient=B")
    assert res["cost_usd"] is None and any("--cost-per-call" in n for n in res["notes"])
    res = run_json(
        capsys, *argv, "--map", "efficient=B", "--cost-per-call", "capable=0.02", "--cost-per-call", "efficient=0.001"
    )
    assert res["cost_usd"] == pytest.approx(4 * 0.02 + 4 * 0.001)
    assert res["capable_cost_usd"] == pytest.approx(0.16)


def test_bad_arguments(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, data = files
    base = ["eval", "-c", str(cfg), "--dataset", str(data), "--no-progress"]
    assert main([*base, "--route", "ghost"]) == 1
    assert "no route 'ghost'" in capsys.readouterr().err
    assert main([*base, "--route", "mix", "--capable", "capable"]) == 1
    assert "give both --capable and --efficient" in capsys.readouterr().err
    assert main([*base, "--route", "mix", "--map", "capable"]) == 1
    assert "--map takes KEY=VALUE" in capsys.readouterr().err
    assert main([*base, "--route", "mix", "--where", "x"]) == 1
    assert "--where takes KEY=VALUE" in capsys.readouterr().err
