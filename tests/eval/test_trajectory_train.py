"""Training the trajectory router on a tiny synthetic corpus: pair labels, determinism, the latch
and the held-out threshold choice."""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")

from switchyard.eval.trajectory_data import Corpus, Outcome, Run, training_pairs
from switchyard.eval.trajectory_heldout import choose_threshold, latch, oob_sets
from switchyard.eval.trajectory_train import TrainConfig, fit, rows_for
from switchyard.routers.trajectory.features import DENSE

ERR = DENSE.index("log_errors")
CFG = TrainConfig(dims=8, members=3, steps=200, seed=1)


def corpus() -> Corpus:
    """Six tasks; the cheap model fails (with errors in its run) on the three the strong one solves."""
    runs, outcomes = [], {}
    for i in range(6):
        hard = i % 2 == 0
        task = f"t{i}"
        points = [{0: 1.0}, {ERR: 0.8 if hard else 0.0, 1: 0.3}]
        runs.append(Run(f"cheap/{task}", "AgentDojo", "s", task, "cheap", not hard, points))
        runs.append(Run(f"strong/{task}", "AgentDojo", "s", task, "strong", True, [{0: 1.0}]))
        outcomes[task] = {"cheap": Outcome(0.0 if hard else 1.0, 0.01), "strong": Outcome(1.0, 0.2)}
    return Corpus(runs, {"AgentDojo": outcomes}, {"cheap": 0.1, "strong": 3.0})


def test_pairs_need_a_price_gap_and_labels_follow_the_outcomes() -> None:
    c = corpus()
    assert training_pairs(c, "AgentDojo") == [("cheap", "strong")]
    rows = rows_for(c)
    # only the cheap model's runs are rows (it is the efficient side of the one pair): 6 runs x 2 points
    assert len(rows.x) == 12
    assert rows.gain == [1.0, 1.0, 0.0, 0.0] * 3
    assert rows.loss == [0.0] * 12
    assert sum(rows.weight) == pytest.approx(1.0)  # one benchmark weighs 1 in total
    assert rows_for(c, exclude_models=["strong"]).x == []


def test_training_is_deterministic_and_learns_the_error_signal() -> None:
    c = corpus()
    a, b = fit(rows_for(c), CFG), fit(rows_for(c), CFG)
    assert a.to_dict() == b.to_dict()
    failing = a.estimate({ERR: 0.8, 1: 0.3}).gain
    clean = a.estimate({1: 0.3}).gain
    assert failing > clean


def test_the_latch_switches_at_the_first_crossing_and_stays() -> None:
    assert latch([0.1, 0.3, 0.1], 0.2) == ("efficient", "capable", "capable")
    assert latch([0.1, 0.1], 0.2) == ("efficient", "efficient")


def test_the_threshold_is_chosen_on_training_runs_only() -> None:
    c = corpus()
    rows = rows_for(c)
    model = fit(rows, CFG)
    oob = oob_sets(rows.task, CFG)
    t = choose_threshold(c, model, oob, lambda r: True, set(), recover=0.5)
    # the latch at t recovers at least half of always-efficient's 50 points on the training runs
    gains = {r.task: [model.estimate(x).gain for x in r.points] for r in c.runs if r.model == "cheap"}
    recovered = sum(1 for task, g in gains.items() if int(task[1:]) % 2 == 0 and max(g) >= t)
    assert recovered >= 2
