"""``switchyard replay --outcomes``: the counterfactual on tiny synthetic runs written here.

The route ``scored`` (test_score) reads ``score=X`` from the latest user message: run t1 of task A
has scores .2, .6, .95 at its three turns, run t2 of task B a single .1, run t3 is of task D
which has no outcomes. Outcomes: A (weak .2 / $1, strong .8 / $4), B (.5 / $1, .5 / $3), C (no runs).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import config_text, write_jsonl

from switchyard.cli import main
from switchyard.engine.records import DecisionRecord, RouterCost

ROUTE = "  scored: {type: test_score, capable: capable, efficient: efficient, threshold: 0.5}\n"


def conv(*scores: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in scores:
        out += [{"role": "user", "content": f"score={s} go on"}, {"role": "assistant", "content": "ok"}]
    return out


def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(config_text(ROUTE))
    runs = write_jsonl(
        tmp_path / "runs.jsonl",
        [
            {"id": "t1", "task_id": "A", "messages": conv(0.2, 0.6, 0.95)},
            {"id": "t2", "task_id": "B", "messages": conv(0.1)},
            {"id": "t3", "task_id": "D", "messages": conv(0.9)},
        ],
    )
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": f"x/{t}",
                "task_id": t,
                "prompt": f"score={p} task {t}",
                "models": {"weak-m": {"score": pe, "cost_usd": ce}, "strong-m": {"score": pc, "cost_usd": cc}},
            }
            for t, p, pe, ce, pc, cc in (("A", 0.9, 0.2, 1, 0.8, 4), ("B", 0.1, 0.5, 1, 0.5, 3), ("C", 0.7, 0, 1, 1, 2))
        ],
    )
    return cfg, runs, tasks


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["replay", *argv, "--json", "--no-progress"]) == 0, capsys.readouterr().err
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def base_rows(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"].split(" (")[0]: r for r in res["cases"]["base"]["rows"]}


def test_counterfactual_replay_table_runs_and_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, runs, tasks = files(tmp_path)
    argv = ["-c", str(cfg), "--route", "scored", "--trajectories", str(runs), "--outcomes", str(tasks)]
    outs = ["--out", str(tmp_path / "turns.jsonl"), "--runs-out", str(tmp_path / "runs.csv")]
    sweep = ["--sweep", "threshold=0.5,0.9", "--sweep-out", str(tmp_path / "sweep"), "--bootstrap", "200"]
    res = run_json(capsys, *argv, *outs, *sweep)
    # Target models strong-m / weak-m are in the outcomes file: mapped without flags.
    assert res["models"] == {"efficient": "weak-m", "capable": "strong-m"}
    assert res["runs"] == 2 and res["tasks"] == 2 and res["outcome_tasks_without_runs"] == 1
    assert res["skipped_reasons"] == {"no outcomes for its task in the outcomes file": 1}
    route = base_rows(res)["route"]
    # t1 switches at turn 2 of 3 (f = 1/3): A = (.8, 1/3*$1 + $4); B never: (.5, $1).
    assert route["resolve"] == pytest.approx(0.65)
    assert route["cost_usd"] == pytest.approx((1 / 3 + 4 + 1) / 2)
    assert route["points_lost"] == pytest.approx(0.0)
    assert route["cost_saved"] == pytest.approx(1 - (1 / 3 + 5) / 2 / 3.5)
    assert route["call_share"] == pytest.approx(2 / 4) and route["first_switch_turn"] == 2
    table = list(csv.DictReader((tmp_path / "runs.csv").read_text().splitlines()))
    assert [(r["run"], r["task"], r["n_turns"], r["first_switch_turn"], r["switch_source"]) for r in table] == [
        ("t1", "A", "3", "2", "test-score"),
        ("t2", "B", "1", "", ""),
    ]
    points = {p["value"]: p["base"]["route"] for p in res["sweep"]["points"]}
    assert points[0.5]["cost_usd"] == pytest.approx(route["cost_usd"])
    assert points[0.9]["cost_usd"] == pytest.approx((2 / 3 + 4 + 1) / 2)  # switches at turn 3
    lines = (tmp_path / "sweep.csv").read_text().splitlines()
    assert lines[0].startswith("key,value,case,runs,resolve,cost_usd") and len(lines) == 1 + 2 * 3
    assert (tmp_path / "sweep.png").stat().st_size > 0
    # The text table names every row and the intervals.
    assert main(["replay", *argv, *outs, "--no-progress", "--bootstrap", "50"]) == 0
    text = capsys.readouterr().out
    for needle in ("random latch (null)", "oracle (≤ 6 points)", "pessimistic bound", "route - null", "left out 1 run"):
        assert needle in text


def test_decision_log_and_replay_output_score_like_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, runs, tasks = files(tmp_path)
    common = ["-c", str(cfg), "--route", "scored", "--outcomes", str(tasks), "--bootstrap", "100"]
    common += ["--runs-out", str(tmp_path / "r.jsonl")]
    replayed = run_json(capsys, *common, "--trajectories", str(runs), "--out", str(tmp_path / "turns.jsonl"))
    again = run_json(capsys, *common, "--decision-log", str(tmp_path / "turns.jsonl"))
    assert again["source"] == "decision log"
    assert again["cases"] == replayed["cases"]
    # Records as the proxy writes them (DecisionRecord.to_json), sessions mapped to tasks by file.
    log = tmp_path / "decisions.jsonl"
    records = [
        DecisionRecord("r1", "scored", "test_score", session_id="s1", selected="efficient", tier="efficient"),
        DecisionRecord("r2", "other", "x", session_id="s1", selected="capable"),  # another route
        DecisionRecord(
            "r3", "scored", "test_score", session_id="s1", selected="capable", tier="capable", source="dims"
        ),
        DecisionRecord("r4", "scored", "test_score", session_id="s1", selected="efficient", status=502),
        DecisionRecord("r5", "scored", "test_score", session_id="s1", selected="capable", tier="capable"),
        DecisionRecord(
            "r6", "scored", "test_score", session_id="s2", selected="efficient", router_cost=RouterCost(1, 10, 2, 0.5)
        ),
        DecisionRecord("r7", "scored", "test_score", selected="capable"),  # no session
    ]
    log.write_bytes(b"".join(r.to_json() + b"\n" for r in records))
    sessions = write_jsonl(
        tmp_path / "s.jsonl", [{"session_id": "s1", "task_id": "A"}, {"session_id": "s2", "task_id": "B"}]
    )
    res = run_json(capsys, *common, "--decision-log", str(log), "--sessions", str(sessions))
    route = base_rows(res)["route"]
    # s1: E C C (k = 2, f = 1/3) on A, like t1; s2: E on B plus $0.50 of router calls.
    assert route["cost_usd"] == pytest.approx((1 / 3 + 4 + 1 + 0.5) / 2)
    assert route["router_cost_usd"] == pytest.approx(0.25)
    assert res["router_calls"] == 1 and res["router_input_tokens"] == 10
    assert res["skipped_reasons"] == {"records without a session id (not part of any run)": 1}
    # Or the task is read from the session id.
    named = [
        DecisionRecord("q1", "scored", "test_score", session_id="A:try-1", selected="capable", tier="capable"),
        DecisionRecord("q2", "scored", "test_score", session_id="B:try-1", selected="efficient", tier="efficient"),
        DecisionRecord("q3", "scored", "test_score", session_id="Z:try-1", selected="efficient", tier="efficient"),
    ]
    log.write_bytes(b"".join(r.to_json() + b"\n" for r in named))
    res = run_json(capsys, *common, "--decision-log", str(log), "--session-task", r"^(\w+):")
    assert res["runs"] == 2 and res["skipped_reasons"] == {"no outcomes for its task in the outcomes file": 1}
    assert base_rows(res)["route"]["resolve"] == pytest.approx((0.8 + 0.5) / 2)


def test_decision_log_joins_its_feedback_by_tenant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Feedback lines are no decisions; sessions are keyed by tenant; the latest report counts."""
    cfg, _, tasks = files(tmp_path)
    common = ["-c", str(cfg), "--route", "scored", "--outcomes", str(tasks), "--bootstrap", "0"]
    common += ["--runs-out", str(tmp_path / "r.jsonl"), "--session-task", r"^(\w+):"]
    records = [
        DecisionRecord("a1", "scored", "test_score", session_id="A:1", selected="capable", tier="capable", tenant="x"),
        DecisionRecord(
            "b1", "scored", "test_score", session_id="A:1", selected="efficient", tier="efficient", tenant="y"
        ),
    ]
    reports = [
        {
            "object": "switchyard.feedback",
            "route": "scored",
            "session_id": "A:1",
            "tenant": "x",
            "resolved": False,
            "ts": 2,
        },
        {
            "object": "switchyard.feedback",
            "route": "scored",
            "session_id": "A:1",
            "tenant": "x",
            "resolved": True,
            "ts": 3,
        },
        {
            "object": "switchyard.feedback",
            "route": "scored",
            "request_id": "b1",
            "tenant": "y",
            "resolved": False,
            "ts": 1,
        },
        {"object": "switchyard.feedback", "route": None, "session_id": "A:1", "tenant": "z", "resolved": True, "ts": 4},
    ]
    log = tmp_path / "decisions.jsonl"
    log.write_bytes(
        b"".join(r.to_json() + b"\n" for r in records) + b"".join(json.dumps(r).encode() + b"\n" for r in reports)
    )
    res = run_json(capsys, *common, "--decision-log", str(log))
    assert res["runs"] == 2  # one run per tenant's session; the reports are not decision steps
    assert base_rows(res)["route"]["resolve"] == pytest.approx((0.8 + 0.2) / 2)
    reported = res["reported"]
    assert reported["sessions"] == 2 and reported["with_feedback"] == 2 and reported["unmatched"] == 1
    assert reported["resolved"]["mean"] == pytest.approx(0.5)  # x: latest True; y: False by request id
    main(["replay", *common, "--decision-log", str(log)])
    assert "2 of 2 sessions reported, 1 report(s) matching no session" in capsys.readouterr().out


def test_task_level_on_the_tasks_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, runs, tasks = files(tmp_path)
    argv = ["-c", str(cfg), "--route", "scored", "--outcomes", str(tasks), "--bootstrap", "0"]
    argv += ["--out", str(tmp_path / "o.jsonl"), "--runs-out", str(tmp_path / "r.csv")]
    # The tasks file as runs: the prompt is the one user message (A .9 and C .7 switch, B .1 not).
    res = run_json(capsys, *argv, "--trajectories", str(tasks))
    rows = base_rows(res)
    assert res["runs"] == 3 and rows["route"]["mean_f"] == 0.0
    assert rows["route"]["resolve"] == pytest.approx((0.8 + 0.5 + 1.0) / 3)
    assert rows["route"]["cost_usd"] == pytest.approx((4 + 1 + 2) / 3)
    # --task-level decides only each run's first turn: t1's first score is .2, so it never switches.
    res = run_json(capsys, *argv, "--trajectories", str(runs), "--task-level")
    assert base_rows(res)["route"]["task_share"] == 0.0
    assert [json.loads(x)["turn"] for x in (tmp_path / "o.jsonl").read_text().splitlines()] == [0, 0, 0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--capable-model", "gpt-9"],
            "--capable-model 'gpt-9': tasks.jsonl has no such model; models in the file: weak-m",
        ),
        (["--sweep", "threshold"], "expected KEY=v1,v2"),
        (["--sweep", "nope.deeper=1"], "routes.scored.nope is not in the config"),
        (["--sweep", "threshold=abc"], "routes.scored.threshold"),
        (["--tier", "capable=frontier"], "the tier must be 'capable' or 'efficient'"),
        (["--decision-log", "x.jsonl"], "not both"),
    ],
)
def test_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    cfg, runs, tasks = files(tmp_path)
    argv = ["replay", "-c", str(cfg), "--route", "scored", "--trajectories", str(runs), "--outcomes", str(tasks)]
    argv += ["--out", str(tmp_path / "o.jsonl"), "--no-progress", *extra]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_unmapped_models_and_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, runs, tasks = files(tmp_path)
    rows = [json.loads(x) for x in tasks.read_text().splitlines()]
    for r in rows:
        r["models"] = {"qwen": r["models"]["weak-m"], "sonnet": r["models"]["strong-m"]}
    write_jsonl(tasks, rows)
    argv = ["replay", "-c", str(cfg), "--route", "scored", "--trajectories", str(runs), "--outcomes", str(tasks)]
    argv += ["--out", str(tmp_path / "o.jsonl"), "--no-progress", "--bootstrap", "0"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "target 'efficient' (model 'weak-m') has no outcomes" in err and "--efficient-model MODEL" in err
    flags = ["--efficient-model", "qwen", "--capable-model", "sonnet"]
    assert main([*argv, *flags, "--runs-out", str(tmp_path / "r.csv")]) == 0
    capsys.readouterr()
    # A third target the route can pick needs a tier.
    cfg.write_text(
        config_text(
            "  scored: {type: test_score, capable: other, efficient: efficient}\n",
            extra_targets="  other: {client: local, model: other-m}\n",
        )
    )
    third = [*argv, *flags, "--capable-target", "capable", "--efficient-target", "efficient"]
    assert main(third) == 1
    assert "give --tier other=capable or --tier other=efficient" in capsys.readouterr().err
    assert main([*third, "--tier", "other=capable", "--runs-out", str(tmp_path / "r.csv")]) == 0


def test_without_outcomes_scoring_flags_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, runs, _ = files(tmp_path)
    argv = ["replay", "-c", str(cfg), "--route", "scored", "--trajectories", str(runs), "--sweep", "threshold=1"]
    assert main(argv) == 1
    assert "--sweep needs --outcomes" in capsys.readouterr().err


JUDGE_TARGET = "  judge: {client: local, model: judge-m, price: {input_per_mtok: 1000, output_per_mtok: 1000}}\n"
JUDGE = "  judged: {type: test_judge, capable: capable, efficient: efficient, judge: judge}\n"


def test_judge_calls_are_made_and_their_cost_added(
    tmp_path: Path, upstream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _, tasks = files(tmp_path)
    cfg.write_text(
        config_text(
            JUDGE,
            base_url=f"http://127.0.0.1:{upstream.port}/v1",
            extra_targets=JUDGE_TARGET,
        )
    )
    prompts = {"A": "a hard task", "B": "an easy one", "C": "hard again"}
    rows = [json.loads(x) for x in tasks.read_text().splitlines()]
    for r in rows:
        r["prompt"] = prompts[r["task_id"]]
    write_jsonl(tasks, rows)
    argv = ["-c", str(cfg), "--route", "judged", "--trajectories", str(tasks), "--outcomes", str(tasks)]
    res = run_json(capsys, *argv, "--out", str(tmp_path / "o.jsonl"), "--runs-out", str(tmp_path / "r.csv"))
    assert len(upstream.app.bodies("judge-m")) == 3 and res["router_calls"] == 3
    route = base_rows(res)["route"]
    # The echoing judge sends the "hard" tasks A and C to capable; its own cost comes on top.
    assert route["router_cost_usd"] > 0
    assert route["cost_usd"] == pytest.approx((4 + 1 + 2) / 3 + route["router_cost_usd"])
    assert route["resolve"] == pytest.approx((0.8 + 0.5 + 1.0) / 3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"strong-m": {"score": 0.8}}, "tasks.jsonl:1: models.strong-m.cost_usd (mean USD per trial) is required"),
        (
            {"strong-m": {"score": 4, "cost_usd": 1}},
            "tasks.jsonl:1: models.strong-m.score must be a resolve rate in [0, 1]",
        ),
        (
            {"strong-m": {"score": "high", "cost_usd": 1}},
            "tasks.jsonl:1: models.strong-m.score must be a finite number",
        ),
    ],
)
def test_bad_outcome_rows_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    cfg, runs, tasks = files(tmp_path)
    rows = [json.loads(x) for x in tasks.read_text().splitlines()]
    rows[0]["models"].update(change)
    write_jsonl(tasks, rows)
    argv = ["replay", "-c", str(cfg), "--route", "scored", "--trajectories", str(runs), "--outcomes", str(tasks)]
    assert main([*argv, "--out", str(tmp_path / "o.jsonl"), "--no-progress"]) == 1
    assert message in capsys.readouterr().err
    rows[0]["models"] = rows[1]["models"]
    rows[1]["task_id"] = rows[0]["task_id"]
    write_jsonl(tasks, rows)
    assert main([*argv, "--out", str(tmp_path / "o.jsonl"), "--no-progress"]) == 1
    assert "tasks.jsonl:2: task 'A' appears twice" in capsys.readouterr().err


def test_sweep_setting_is_a_dotted_path_into_the_route() -> None:
    from switchyard.config.load import ConfigError, load_config
    from switchyard.eval.agent_replay import with_setting
    from switchyard.eval.paired import PairedError

    example = Path(__file__).resolve().parents[2] / "examples" / "stage-router.yaml"
    loaded = load_config(example)
    changed = with_setting(loaded, "agent", "hold_turns.capable", 5)
    assert changed.raw["routes"]["agent"]["hold_turns"] == {"capable": 5}
    assert loaded.raw["routes"]["agent"]["hold_turns"] == {"capable": 2}  # the original is untouched
    assert changed.base_dir == loaded.base_dir and changed.source == loaded.source
    with pytest.raises(PairedError, match=r"routes\.agent\.nothing is not in the config"):
        with_setting(loaded, "agent", "nothing.capable", 1)
    with pytest.raises(ConfigError, match=r"routes\.agent\.confidence_threshold"):
        with_setting(loaded, "agent", "confidence_threshold", "high")


def test_the_scoring_defaults_are_written_once_in_simulate(tmp_path: Path) -> None:
    import argparse
    import inspect

    from switchyard.cli.replay_outcomes import add_outcome_args
    from switchyard.config.load import load_config
    from switchyard.eval.agent_replay import prepare, score_log
    from switchyard.eval.counterfactual import simulate

    keys = ("oracle_points", "resamples", "seed")
    defaults = {k: p.default for k, p in inspect.signature(simulate).parameters.items() if k in keys}
    parser = argparse.ArgumentParser()
    add_outcome_args(parser)
    flags = parser.parse_args([])
    assert {"oracle_points": flags.oracle_points, "resamples": flags.bootstrap, "seed": flags.seed} == defaults
    # Scoring a log without those keywords gets simulate's defaults.
    cfg, _, tasks = files(tmp_path)
    log = tmp_path / "decisions.jsonl"
    log.write_bytes(DecisionRecord("r1", "scored", "test_score", session_id="A", selected="capable").to_json() + b"\n")
    loaded = load_config(cfg)
    report = score_log(loaded, "scored", log, prepare(loaded, "scored", tasks)).report
    assert {"oracle_points": report.oracle_points, "resamples": report.resamples, "seed": report.seed} == defaults
