"""The share operating point of the trajectory router: ranking within a group, timing, the run
rule, the training-fold choice and the AUC diagnostic."""

from __future__ import annotations

import math

import pytest

from switchyard.eval.counterfactual import TaskOutcome
from switchyard.eval.trajectory_share import (
    ScoredRun,
    ShareError,
    as_runs,
    choose_share,
    rank_auc,
    switch_points,
    value,
)


def test_the_share_is_taken_within_each_group_not_over_all_runs() -> None:
    # group b's scores are all higher: a global cut would switch only b's runs
    runs = [
        ScoredRun("a1", "t1", "a", (0.1,)),
        ScoredRun("a2", "t2", "a", (0.2,)),
        ScoredRun("b1", "t3", "b", (0.8,)),
        ScoredRun("b2", "t4", "b", (0.9,)),
    ]
    assert switch_points(runs, 0.5) == {"a1": None, "a2": 0, "b1": None, "b2": 0}
    assert switch_points(runs, 0.0) == dict.fromkeys(("a1", "a2", "b1", "b2"))
    assert switch_points(runs, 1.0) == dict.fromkeys(("a1", "a2", "b1", "b2"), 0)


def test_turn0_ranks_by_the_task_text_and_crossing_switches_where_the_cut_is_reached() -> None:
    runs = [
        ScoredRun("late", "t1", "g", (0.1, 0.2, 0.9)),
        ScoredRun("early", "t2", "g", (0.5, 0.5)),
    ]
    # turn 0: "early" ranks first (0.5 > 0.1) and switches at 0
    assert switch_points(runs, 0.5, "turn0") == {"late": None, "early": 0}
    # crossing: "late" has the highest score (0.9) and switches where it reaches it
    assert switch_points(runs, 0.5, "crossing") == {"late": 2, "early": None}


def test_a_fired_rule_switches_no_later_and_ties_at_the_cut_switch_together() -> None:
    runs = [
        ScoredRun("r1", "t1", "g", (0.1, 0.1, 0.1), (False, True, True)),
        ScoredRun("r2", "t2", "g", (0.3,)),
        ScoredRun("r3", "t3", "g", (0.3,)),
        ScoredRun("r4", "t4", "g", (0.0,)),
    ]
    assert switch_points(runs, 0.25) == {"r1": 1, "r2": 0, "r3": 0, "r4": None}


def test_bad_input_is_named() -> None:
    run = ScoredRun("r", "t", "g", (0.1,))
    with pytest.raises(ShareError, match="share"):
        switch_points([run], 1.5)
    with pytest.raises(ShareError, match="timing"):
        switch_points([run], 0.5, "sometimes")
    with pytest.raises(ShareError, match="'empty'"):
        switch_points([ScoredRun("empty", "t", "g", ())], 0.5)
    with pytest.raises(ShareError, match="no training pairs"):
        choose_share([])


def outcomes() -> dict[str, TaskOutcome]:
    """Four tasks: the capable model rescues t0 and t1 only; every capable run costs 1, efficient 0."""
    return {f"t{i}": TaskOutcome(f"t{i}", 0.0 if i < 2 else 1.0, 1.0, 0.0, 1.0) for i in range(4)}


def test_value_counts_points_lost_and_saved_against_always_capable() -> None:
    runs = [ScoredRun(f"r{i}", f"t{i}", "g", (1.0 - 0.1 * i, 0.0)) for i in range(4)]
    # the top half by turn-0 score are the two rescued tasks: nothing lost, half the cost saved
    lost, eff, saved = value(as_runs(runs, switch_points(runs, 0.5)), outcomes())
    assert (lost, eff, saved) == (0.0, 50.0, 0.5)
    # switched at the second of two points instead: the first half of each run paid on efficient (cost 0)
    late = as_runs(runs, {"r0": 1, "r1": 1, "r2": None, "r3": None})
    assert late[0].tiers == ("efficient", "capable")
    assert value(late, outcomes()) == (0.0, 50.0, 0.5)


def test_the_share_chosen_saves_most_within_the_points_allowed() -> None:
    good = [ScoredRun(f"r{i}", f"t{i}", "g", (1.0 - 0.1 * i,)) for i in range(4)]
    # a ranking that finds a rescued task first: one run of four switched (the smallest share that
    # switches one) loses 25 points, half of always-efficient's 50: allowed, and saves the most
    assert choose_share([(good, outcomes())]) == 0.05
    # a ranking that puts the rescued tasks last must switch three runs to reach one of them
    bad = [ScoredRun(f"r{i}", f"t{i}", "g", (0.1 * i,)) for i in range(4)]
    assert choose_share([(bad, outcomes())]) == 0.55
    assert choose_share([(bad, outcomes())], recover=0.0) == 0.8
    # nothing within the points allowed: the whole share
    assert choose_share([(bad, outcomes())], recover=-1.0) == 1.0


def test_rank_auc() -> None:
    assert rank_auc([(0.9, True), (0.1, False)]) == 1.0
    assert rank_auc([(0.1, True), (0.9, False)]) == 0.0
    assert rank_auc([(0.5, True), (0.5, False)]) == 0.5
    assert math.isnan(rank_auc([(0.5, True)]))
