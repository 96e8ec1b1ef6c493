"""The suite's scoring (switchyard.eval.latch) on hand-built run tables.

Three tasks, one run each; the route switches run a at turn 2 of 4 and run c at turn 1 of 2,
never run b (3 turns). Values (resolve, USD) per switch turn are made up so that every turn
differs: the null must follow the runs' own positions, not an average cost.
"""

from __future__ import annotations

import math
import random

import pytest

from switchyard.eval.counterfactual import Run, TaskOutcome
from switchyard.eval.latch import score_suite
from switchyard.eval.suite import PairSpec
from switchyard.eval.suite_runs import PairData, RunTable

E, C = "efficient", "capable"


def pair() -> tuple[PairData, list[Run]]:
    data = PairData(PairSpec(dataset="d", efficient="e", capable="c"), "p", "cache")
    tables = {
        "a": RunTable((0.0, 1.0), [(1.0, 10.0), (1.0, 12.0), (1.0, 15.0), (1.0, 19.0)]),
        "b": RunTable((1.0, 2.0), [(0.0, 20.0), (0.0, 23.0), (0.0, 27.0)]),
        "c": RunTable((0.0, 0.5), [(1.0, 5.0), (1.0, 6.5)]),
    }
    runs = [Run("a", "A", (E, C, E, C)), Run("b", "B", (E, E, E)), Run("c", "C", (C, E))]
    for run_id, task in (("a", "A"), ("b", "B"), ("c", "C")):
        t = tables[run_id]
        data.outcomes[task] = TaskOutcome(task, t.never[0], t.switched[0][0], t.never[1], t.switched[0][1])
    data.tables = tables
    return data, runs


def test_route_and_baseline_rows() -> None:
    score = score_suite([pair()], resamples=0)
    (p,) = score.pairs
    route = p.row("route")
    # a at k=2 (1, 12), b never (1, 2), c at k=1 (1, 5)
    assert (route.resolve, route.cost_usd) == pytest.approx((1.0, 19 / 3))
    cap = p.row("always-capable")
    assert (cap.resolve, cap.cost_usd) == pytest.approx((2 / 3, 35 / 3))
    assert route.points_lost == pytest.approx(-100 / 3)
    assert route.cost_saved == pytest.approx(1 - 19 / 35)
    assert route.run_share == pytest.approx(2 / 3) and route.first_switch_turn == 1.5
    assert p.row("always-efficient").cost_usd == pytest.approx(3.5 / 3)
    assert score.pooled == []  # one pair: nothing to pool


def test_the_null_is_the_expectation_of_a_random_latch_with_the_routes_share_and_positions() -> None:
    data, runs = pair()
    null = score_suite([(data, runs)], resamples=0).pairs[0].row("random latch")
    # Monte Carlo of the definition: each run switched with p = 2/3, at f drawn from {1/4, 0}.
    rng = random.Random(7)
    fs = [1 / 4, 0.0]
    n = {"a": 4, "b": 3, "c": 2}
    draws = 60_000
    total = [0.0, 0.0]
    for _ in range(draws):
        for run_id in ("a", "b", "c"):
            t = data.tables[run_id]
            if rng.random() < 2 / 3:
                k = min(n[run_id], math.floor(rng.choice(fs) * n[run_id] + 1e-9) + 1)
                v = t.switched[k - 1]
            else:
                v = t.never
            total[0] += v[0] / 3
            total[1] += v[1] / 3
    assert null.resolve == pytest.approx(total[0] / draws, abs=0.01)
    assert null.cost_usd == pytest.approx(total[1] / draws, rel=0.01)
    # Exactly: a: 2/3 * mean(k=2 -> 12, k=1 -> 10) + 1/3 * 1; b: k=1 both (f=1/4 -> 1) ...
    a = 2 / 3 * (12 + 10) / 2 + 1 / 3 * 1
    b = 2 / 3 * 20 + 1 / 3 * 2
    c = 2 / 3 * 5 + 1 / 3 * 0.5
    assert null.cost_usd == pytest.approx((a + b + c) / 3)


def test_pairs_of_one_dataset_pool_and_their_intervals_hold_the_point() -> None:
    one, two = pair(), pair()
    two[0].name = "q"
    score = score_suite([one, two], resamples=300, seed=3)
    (group,) = score.pooled
    assert group.name == "d pooled" and group.pairs == ["p", "q"]
    assert group.row("route").points_lost == pytest.approx(score.pairs[0].row("route").points_lost)
    iv = group.intervals["points_lost"]
    assert iv.low <= group.row("route").points_lost <= iv.high
    # Same tasks drawn for both pairs: identical pairs give identical draws, so the pooled
    # interval equals each pair's.
    assert iv == score.pairs[0].intervals["points_lost"]
