"""``benchmarks/agent_replay_check.py``, the independent counterfactual: hand-computed cases."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from agent_replay_check import Run, TaskOutcome, evaluate, runs_from_turns

OUTCOMES = {"A": TaskOutcome(0.2, 0.6, 0.1, 1.0), "B": TaskOutcome(0.5, 0.5, 0.2, 0.4)}
RUNS = [
    Run("a1", "A", n=4, k=3, capable_calls=2, first_source="persistent_errors"),  # f = 0.5
    Run("a2", "A", n=5, k=None, capable_calls=0, first_source=None),
    Run("b1", "B", n=2, k=1, capable_calls=2, first_source="override"),  # f = 0
]


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return evaluate(RUNS, OUTCOMES, budget=6.0, resamples=200, seed=1)


def test_base_case(result: dict[str, Any]) -> None:
    base = result["cases"]["base"]
    # A: run a1 switched at f = 0.5 -> (0.6, 0.05 + 1.0); a2 -> (0.2, 0.1); task A = (0.4, 0.575)
    # B: switched at f = 0 -> (0.5, 0.4).  Always capable: resolve 0.55, cost 1.4 in all.
    assert base["policy"]["resolve"] == pytest.approx(0.45)
    assert base["policy"]["points_lost"] == pytest.approx(10.0)
    assert base["policy"]["cost_saved"] == pytest.approx(1 - 0.975 / 1.4)
    # the null: s = 2/3 of the runs, f in {0.5, 0}
    # A: 2/3 * 0.6 + 1/3 * 0.2; cost 2/3 * 1.025 + 1/3 * 0.1.  B: 0.5; cost 2/3 * 0.45 + 1/3 * 0.2
    null_resolve = (2 / 3 * 0.6 + 1 / 3 * 0.2 + 0.5) / 2
    null_cost = 2 / 3 * 1.025 + 1 / 3 * 0.1 + 2 / 3 * 0.45 + 1 / 3 * 0.2
    assert base["null"]["points_lost"] == pytest.approx(100 * (0.55 - null_resolve))
    assert base["null"]["cost_saved"] == pytest.approx(1 - null_cost / 1.4)
    # the oracle drops B (no points to lose) and keeps A (20 points > 6)
    assert base["oracle_capable_tasks"] == ["A"]
    assert base["oracle"]["cost_saved"] == pytest.approx(1 - 1.2 / 1.4)
    assert base["always_efficient"]["points_lost"] == pytest.approx(20.0)


def test_bounds(result: dict[str, Any]) -> None:
    opt, pess = result["cases"]["optimistic"], result["cases"]["pessimistic"]
    # optimistic: a1 -> (max(0.2, 0.6), 0.05 + 0.5 * 1.0); b1 -> (0.5, 0.4); always capable 0.55
    assert opt["policy"]["resolve"] == pytest.approx(((0.6 + 0.2) / 2 + 0.5) / 2)
    assert opt["policy"]["cost_usd"] == pytest.approx(((0.55 + 0.1) / 2 + 0.4) / 2)
    # pessimistic: a1 -> min(0.6, 0.2 + 0.5 * 0.4) = 0.4
    assert pess["policy"]["resolve"] == pytest.approx(((0.4 + 0.2) / 2 + 0.5) / 2)
    assert pess["policy"]["cost_usd"] == pytest.approx(((1.05 + 0.1) / 2 + 0.4) / 2)


def test_shares_and_intervals(result: dict[str, Any]) -> None:
    assert result["share_runs_switched"] == pytest.approx(2 / 3)
    assert result["share_tasks_switched"] == pytest.approx((0.5 + 1.0) / 2)
    assert result["share_calls_capable"] == pytest.approx(4 / 11)
    lo, hi = result["cases"]["base"]["intervals"]["pl"]
    assert lo <= 10.0 <= hi


def test_first_switch_from_replay_lines() -> None:
    lines = [
        {"trajectory": "r", "turn": 1, "selected": "cheap", "source": "fall_open"},
        {"trajectory": "r", "turn": 0, "selected": "cheap", "source": "fall_open"},
        {"trajectory": "r", "turn": 2, "selected": "big", "source": "persistent_errors"},
        {"trajectory": "r", "turn": 3, "selected": "cheap", "source": "tests_passed"},
    ]
    (run,) = runs_from_turns(lines, "big", {"r": "T"})
    assert (run.task, run.n, run.k, run.f, run.capable_calls, run.first_source) == (
        "T",
        4,
        3,
        0.5,
        1,
        "persistent_errors",
    )
