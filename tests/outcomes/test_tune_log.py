"""``switchyard tune --decision-log`` (issue 48): a trajectory route's threshold fitted on a
hand-built log of sessions joined with their feedback.

Constructed case: 40 routed sessions of 4 turns each, threshold 0.5. Half are *hard*: their
second turn scores 0.3 (below 0.5, so the log never switched) and the efficient model failed
them. The other half score 0.0 throughout and resolved. 20 control sessions (capable model
whole) all resolved. Lowering the threshold to 0.2 switches exactly the hard sessions at their
second turn: scored with the control outcome, they resolve — points lost 50 -> 0. 0.8 changes
nothing. Within 2 points lost only 0.2 qualifies, and every session of a kind is alike, so the
intervals are tight and the change is made.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from switchyard.cli import main
from switchyard.engine.joined_log import join_log
from switchyard.eval.log_tune import holds_up, sessions_from, tune_log

CONFIG = """\
llm_clients:
  up: {format: openai_chat, base_url: http://127.0.0.1:9/v1}
targets:
  efficient: {client: up, model: small, price: {input_per_mtok: 0.1, output_per_mtok: 0.4}}
  capable: {client: up, model: big, price: {input_per_mtok: 3, output_per_mtok: 15}}
routes:
  agent:
    type: trajectory
    capable: capable
    efficient: efficient
    threshold: 0.5  # the shipped gain threshold
"""


def log_lines(routed: int = 40, control: int = 20) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for n in range(routed):
        hard = n % 2 == 0
        for turn, s in enumerate([0.0, 0.3 if hard else 0.0, 0.0, 0.0]):
            lines.append(
                {
                    "route": "agent",
                    "request_id": f"r{n}-{turn}",
                    "session_id": f"s{n}",
                    "source": "trajectory",
                    "score": s,
                    "selected": "efficient",
                    "cost_usd": 0.01,
                    "baseline_cost_usd": 0.2,
                    "details": {"arm": "routed", "threshold": 0.5},
                }
            )
        lines.append({"object": "switchyard.feedback", "session_id": f"s{n}", "resolved": not hard, "ts": 1.0})
    for n in range(control):
        for turn in range(4):
            lines.append(
                {
                    "route": "agent",
                    "request_id": f"c{n}-{turn}",
                    "session_id": f"c{n}",
                    "source": "control",
                    "selected": "capable",
                    "cost_usd": 0.2,
                    "baseline_cost_usd": 0.2,
                    "details": {"arm": "control"},
                }
            )
        lines.append({"object": "switchyard.feedback", "session_id": f"c{n}", "resolved": True, "ts": 1.0})
    return lines


def test_chooses_the_threshold_that_catches_the_hard_sessions() -> None:
    data = sessions_from(join_log(log_lines()), capable_target="capable")
    found = tune_log(data, [0.2, 0.8], 0.5, max_points_lost=2.0, resamples=200)
    assert found["verdict"] == "changed" and found["chosen"] == 0.2
    rows = {r["value"]: r for r in found["rows"]}
    assert rows[0.5]["points_lost"] == pytest.approx(50.0)
    assert rows[0.2]["points_lost"] == pytest.approx(0.0) and rows[0.2]["moved"] == 20
    assert rows[0.8]["points_lost"] == pytest.approx(50.0) and rows[0.8]["moved"] == 0
    now, tuned = found["held_out"]
    assert tuned["points_lost"] == pytest.approx(0.0) and now["points_lost"] == pytest.approx(50.0)
    assert found["fold_choices"] == [0.2]


def test_refuses_with_too_few_sessions_and_keeps_the_config(tmp_path: Path, capsys: Any) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(CONFIG)
    log = tmp_path / "decisions.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in log_lines(routed=10)))
    out = tmp_path / "tuned.yaml"
    argv = ["tune", "-c", str(cfg), "--route", "agent", "--decision-log", str(log), "--grid", "threshold=0.2,0.8"]
    assert main([*argv, "--bootstrap", "100", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kept: too few sessions to tell" in text and "10 routed sessions with feedback" in text
    assert not out.exists()


def test_writes_the_chosen_threshold_with_comments(tmp_path: Path, capsys: Any) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(CONFIG)
    log = tmp_path / "decisions.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in log_lines()))
    out = tmp_path / "tuned.yaml"
    argv = ["tune", "-c", str(cfg), "--route", "agent", "--decision-log", str(log), "--grid", "threshold=0.2,0.8"]
    assert main([*argv, "--bootstrap", "100", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "- routes.agent.threshold: 0.5" in text and "+ routes.agent.threshold: 0.2" in text
    assert "threshold: 0.2  # the shipped gain threshold" in out.read_text()


def test_refuses_without_capable_served_sessions(tmp_path: Path, capsys: Any) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(CONFIG)
    log = tmp_path / "decisions.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in log_lines(control=0)))
    argv = ["tune", "-c", str(cfg), "--route", "agent", "--decision-log", str(log), "--grid", "threshold=0.2"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "0 control/shadow session(s)" in err and "keeping routes.agent.threshold: 0.5" in err


def test_help_teaches_the_log_mode(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = capsys.readouterr().out
    assert "--decision-log LOG" in text and "--folds K" in text and "control/shadow" in text


def test_the_same_sessions_in_another_log_order_give_the_same_numbers() -> None:
    # Concurrent sessions reach a log interleaved in any order; folds and resamples must not care.
    lines = log_lines()
    for i, line in enumerate(lines):
        if "cost_usd" in line and line["source"] == "trajectory":
            line["cost_usd"] = 0.01 * (1 + i % 7)  # sessions unlike each other, so order would show
    blocks: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        blocks.setdefault(line["session_id"], []).append(line)
    order = list(blocks)
    random.Random(3).shuffle(order)
    shuffled = [line for sid in order for line in blocks[sid]]

    def run(log: list[dict[str, Any]]) -> dict[str, Any]:
        data = sessions_from(join_log(log), capable_target="capable")
        return tune_log(data, [0.2, 0.8], 0.5, max_points_lost=60.0, folds=3, resamples=200)

    a, b = run(lines), run(shuffled)
    assert a["rows"] == b["rows"] and a["held_out"] == b["held_out"]
    assert a["held_out_difference"] == b["held_out_difference"]


@pytest.mark.parametrize(
    ("lost", "saved", "holds"),
    [
        ((-5.8, 16.6), (-0.278, -0.013), False),  # pays cost, no sure gain in points (issue 48's Terminal-Bench run)
        ((-19.0, -1.0), (-0.30, -0.10), True),  # pays cost for points it surely gains
        ((0.5, 9.0), (-0.05, 0.20), False),  # loses points, no sure saving
        ((0.5, 9.0), (0.05, 0.20), True),  # loses points for a sure saving (the budget decides that)
        ((-3.0, 4.0), (-0.05, 0.10), True),  # nothing sure either way: the rule's choice stands
    ],
)
def test_a_change_is_kept_only_when_it_holds_up_on_held_out_folds(
    lost: tuple[float, float], saved: tuple[float, float], holds: bool
) -> None:
    assert holds_up({"intervals": {"points_lost": lost, "cost_saved": saved}}) is holds
