"""``eval`` with the real ``llm_classifier`` router and a simulated judge on a real fake upstream.

The judge forecasts ``p_solve = 1 - s`` for a prompt that says ``score=s``, so the router's
``Decision.score`` (``1 - p_solve``) is ``s`` and the numbers match the hand-computed ones of
``test_eval_cli.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import rows, write_jsonl

from switchyard.cli import main
from switchyard.testing import FakeModel, FakeUpstream, serve_fake
from switchyard.testing.judges import capability_brain


def _p_solve(view: str) -> float:
    found = re.search(r"score=([0-9.]+)", view)
    return 1.0 - float(found.group(1)) if found else 0.5


@pytest.fixture(scope="module")
def judge_server() -> Iterator[Any]:
    server = serve_fake(FakeUpstream([FakeModel("judge-m", brain=capability_brain(_p_solve))]))
    try:
        yield server
    finally:
        server.stop()


def classifier_config(tmp_path: Path, port: int) -> Path:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(
        f"""\
llm_clients:
  local: {{format: openai_chat, base_url: "http://127.0.0.1:{port}/v1"}}
targets:
  capable: {{client: local, model: strong-m, price: {{input_per_mtok: 10, output_per_mtok: 30}}}}
  efficient: {{client: local, model: weak-m, price: {{input_per_mtok: 0.1, output_per_mtok: 0.4}}}}
  judge: {{client: local, model: judge-m, price: {{input_per_mtok: 0.1, output_per_mtok: 0.4}}}}
routes:
  agent:
    type: llm_classifier
    mode: capability
    classifier_target: judge
    strong_target: capable
    weak_target: efficient
    base_threshold: 0.5
"""
    )
    return cfg


def test_sweep_over_the_classifier_scores(
    tmp_path: Path, judge_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = classifier_config(tmp_path, judge_server.port)
    data = write_jsonl(tmp_path / "data.jsonl", rows())
    out = tmp_path / "out"
    argv = ["eval", "-c", str(cfg), "--route", "agent", "--dataset", str(data), "--sweep", "--out", str(out)]
    assert main([*argv, "--json", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out)
    # weak iff p_solve >= .5, i.e. capable for the four prompts scored above .5: as hand-computed.
    assert res["n"] == 8 and res["skipped"] == 0
    assert (res["quality"], res["capable_share"]) == (pytest.approx(0.75), pytest.approx(0.5))
    assert res["apgr"] == pytest.approx(0.5625)
    assert res["cpt50"] == pytest.approx(0.3125) and res["cpt80"] == pytest.approx(0.925)
    assert res["router_cost_usd"] > 0  # eight judge calls, priced
    assert res["tiers"]["from"] == "route"  # llm_classifier declares strong/weak as its tiers
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert {d["source"] for d in decisions} == {"llm-classifier"}
    assert [d["score"] for d in decisions] == pytest.approx([0.95, 0.85, 0.75, 0.65, 0.45, 0.35, 0.25, 0.15])
    assert (out / "curve.csv").read_text().count("\n") == 10


def test_unreachable_judge_skips_instead_of_counting_fail_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = classifier_config(tmp_path, 9)  # nothing listens on the discard port
    data = write_jsonl(tmp_path / "data.jsonl", rows())
    assert main(["eval", "-c", str(cfg), "--route", "agent", "--dataset", str(data), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "decided none of the 8 item(s): 8 x every model call of the router failed (fail_open:" in err
    assert "judge gave no verdict" not in err.split("error:")[0]  # router warnings stay quiet


def test_calibrate_refuses_a_stepped_classifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = classifier_config(tmp_path, 9)
    text = cfg.read_text()
    assert "threshold_step" not in text
    cfg.write_text(text.replace("base_threshold: 0.5", "base_threshold: 0.5\n    threshold_step: 0.1"))
    argv = ["calibrate", "-c", str(cfg), "--route", "agent", "--decision-log", "x.jsonl", "--capable-share", "0.3"]
    assert main(argv) == 1
    assert "has no threshold to calibrate" in capsys.readouterr().err


def cascade_config(tmp_path: Path, port: int) -> Path:
    cfg = classifier_config(tmp_path, port)
    text = cfg.read_text()
    head, _, _ = text.partition("routes:\n")
    cfg.write_text(
        head
        + """\
routes:
  agent:
    type: cascade
    stages:
      - {type: stage_router, capable: capable, efficient: efficient}
      - type: llm_classifier
        mode: capability
        classifier_target: judge
        strong_target: capable
        weak_target: efficient
        base_threshold: 0.5
    default: capable
"""
    )
    return cfg


def test_eval_and_calibrate_a_cascade(tmp_path: Path, judge_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = cascade_config(tmp_path, judge_server.port)
    data = write_jsonl(tmp_path / "data.jsonl", rows())
    out = tmp_path / "out"
    argv = ["eval", "-c", str(cfg), "--route", "agent", "--dataset", str(data), "--sweep", "--out", str(out)]
    assert main([*argv, "--json", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out)
    # the stage router has no tool activity to read and abstains; the classifier decides as alone
    assert res["n"] == 8 and res["tiers"]["from"] == "route"
    assert (res["quality"], res["capable_share"]) == (pytest.approx(0.75), pytest.approx(0.5))
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert {d["source"] for d in decisions} == {"cascade:2/llm_classifier"}
    assert [d["score"] for d in decisions] == pytest.approx([0.95, 0.85, 0.75, 0.65, 0.45, 0.35, 0.25, 0.15])
    tuned = tmp_path / "tuned.yaml"
    argv = ["calibrate", "-c", str(cfg), "--route", "agent", "--dataset", str(data), "--capable-share", "0.25"]
    assert main([*argv, "--write", str(tuned), "--json", "--no-progress"]) == 0
    cal = json.loads(capsys.readouterr().out)
    assert cal["key"] == "routes.agent.stages[1].base_threshold"
    assert cal["capable_share"] == pytest.approx(0.25)
    from switchyard.config.load import load_config

    written = load_config(tuned).routes["agent"]
    assert written.stage_spec(1).base_threshold == pytest.approx(cal["threshold"])  # type: ignore[attr-defined]
    assert "stages:" in tuned.read_text() and "type: stage_router" in tuned.read_text()
