"""The counterfactual's arithmetic on small hand-computed cases (switchyard.eval.counterfactual).

Two tasks: A (p_e .2, p_c .6, C_e $1, C_c $5) and B (p_e .6, p_c .4, C_e $2, C_c $4).
Runs: A1 = E E C E (k = 3, n = 4, f = .5), A2 = E E (never), B1 = C (k = 1, f = 0).
"""

from __future__ import annotations

import pytest

from switchyard.eval.counterfactual import (
    CounterfactualError,
    Run,
    TaskOutcome,
    oracle_choice,
    run_value,
    simulate,
    switched,
)

A = TaskOutcome("A", 0.2, 0.6, 1.0, 5.0)
B = TaskOutcome("B", 0.6, 0.4, 2.0, 4.0)
OUTCOMES = {"A": A, "B": B}
E, C = "efficient", "capable"
RUNS = [
    Run("A1", "A", (E, E, C, E), ("fall_open", "fall_open", "dimensions", "hold"), ("", "", "errors", "")),
    Run("A2", "A", (E, E)),
    Run("B1", "B", (C,), ("override",), ("asked",)),
]


def test_run_positions() -> None:
    a1, a2, b1 = RUNS
    assert (a1.n, a1.first_switch, a1.f, a1.capable_calls) == (4, 3, 0.5, 1)
    assert (a2.first_switch, a2.f) == (None, None)
    assert (b1.first_switch, b1.f) == (1, 0.0)


@pytest.mark.parametrize(
    ("case", "f", "expected"),
    [
        ("base", 0.5, (0.6, 5.5)),  # p_c; f*C_e + C_c
        ("optimistic", 0.5, (0.6, 3.0)),  # max; .5*1 + .5*5
        ("pessimistic", 0.5, (0.4, 5.5)),  # min(.6, .2 + .5*.4)
        ("pessimistic", 0.0, (0.6, 5.0)),
        ("pessimistic", 1.0, (0.2, 6.0)),  # a switch at the very end recovers nothing
    ],
)
def test_switched_formulas(case: str, f: float, expected: tuple[float, float]) -> None:
    assert switched(case, A, f) == pytest.approx(expected)


def test_switched_where_capable_is_worse() -> None:
    # p_c < p_e: the optimistic case keeps the better outcome, the pessimistic takes p_c.
    assert switched("optimistic", B, 0.25) == pytest.approx((0.6, 0.25 * 2 + 0.75 * 4))
    assert switched("pessimistic", B, 0.25) == pytest.approx((0.4, 0.5 + 4))


def test_switched_rejects_bad_input() -> None:
    with pytest.raises(CounterfactualError, match="unknown case 'best'"):
        switched("best", A, 0.0)
    with pytest.raises(CounterfactualError, match=r"f must be in \[0, 1\]"):
        switched("base", A, 1.5)


def test_router_cost_is_added_to_every_run() -> None:
    never = Run("x", "A", (E, E), router_cost_usd=0.25)
    assert run_value("base", A, never) == pytest.approx((0.2, 1.25))
    late = Run("y", "A", (E, C), router_cost_usd=0.25)
    assert run_value("base", A, late) == pytest.approx((0.6, 0.5 + 5 + 0.25))


def rows(case: str) -> dict[str, dict[str, object]]:
    report = simulate(RUNS, OUTCOMES, resamples=0)
    return {r.name.split(" (")[0]: r.to_dict() for r in report.case(case).rows}


def test_base_case_rows() -> None:
    r = rows("base")
    route = r["route"]
    # A = mean(A1 (.6, $5.5), A2 (.2, $1)) = (.4, $3.25); B1 = (.4, $4). Tasks weigh the same.
    assert route["resolve"] == pytest.approx(0.4)
    assert route["cost_usd"] == pytest.approx(3.625)  # pooled by run it would be $3.50
    cap = r["always-capable"]
    assert (cap["resolve"], cap["cost_usd"]) == pytest.approx((0.5, 4.5))
    assert route["points_lost"] == pytest.approx(10.0)
    assert route["cost_saved"] == pytest.approx(1 - 3.625 / 4.5)
    assert route["call_share"] == pytest.approx(2 / 7)  # as routed, the de-latched turn included
    assert route["task_share"] == pytest.approx(0.75)  # A: 1 of 2 runs, B: 1 of 1
    assert route["run_share"] == pytest.approx(2 / 3)
    assert route["first_switch_turn"] == 2 and route["mean_f"] == pytest.approx(0.25)
    eff = r["always-efficient"]
    assert (eff["resolve"], eff["cost_usd"], eff["points_lost"]) == pytest.approx((0.4, 1.5, 10.0))
    assert eff["cost_saved"] == pytest.approx(1 - 1.5 / 4.5)


def test_null_model_is_analytic() -> None:
    null = rows("base")["random latch"]
    # s = 2/3, mean f = .25. A: 2/3*(.6, .25*1 + 5) + 1/3*(.2, 1); B: 2/3*(.4, .25*2 + 4) + 1/3*(.6, 2).
    a = (2 / 3 * 0.6 + 1 / 3 * 0.2, 2 / 3 * 5.25 + 1 / 3 * 1)
    b = (2 / 3 * 0.4 + 1 / 3 * 0.6, 2 / 3 * 4.5 + 1 / 3 * 2)
    assert null["resolve"] == pytest.approx((a[0] + b[0]) / 2)
    assert null["cost_usd"] == pytest.approx((a[1] + b[1]) / 2)
    assert null["points_lost"] == pytest.approx(100 * (0.5 - (a[0] + b[0]) / 2))
    assert null["task_share"] == pytest.approx(2 / 3) and null["call_share"] is None


def test_null_model_pessimistic_averages_over_the_f_values() -> None:
    null = rows("pessimistic")["random latch"]
    # The explicit mean over the route's f values {.5, 0}: A's switched resolve is .4 and .6.
    a_switched = (switched("pessimistic", A, 0.5)[0] + switched("pessimistic", A, 0.0)[0]) / 2
    b_switched = (switched("pessimistic", B, 0.5)[0] + switched("pessimistic", B, 0.0)[0]) / 2
    a = 2 / 3 * a_switched + 1 / 3 * 0.2
    b = 2 / 3 * b_switched + 1 / 3 * 0.6
    assert null["resolve"] == pytest.approx((a + b) / 2)


def test_optimistic_and_pessimistic_rows() -> None:
    opt = rows("optimistic")
    # A = mean((.6, $3), (.2, $1)) = (.4, $2); B1 = (max(.6, .4), $4). Always-capable: max per task.
    assert (opt["route"]["resolve"], opt["route"]["cost_usd"]) == pytest.approx((0.5, 3.0))
    assert opt["always-capable"]["resolve"] == pytest.approx(0.6)
    assert opt["route"]["points_lost"] == pytest.approx(10.0)
    assert opt["route"]["cost_saved"] == pytest.approx(1 - 3.0 / 4.5)
    pes = rows("pessimistic")
    # A = mean((min(.6, .4), $5.5), (.2, $1)) = (.3, $3.25); B1 = (.4, $4).
    assert (pes["route"]["resolve"], pes["route"]["cost_usd"]) == pytest.approx((0.35, 3.625))
    assert pes["always-capable"]["resolve"] == pytest.approx(0.5)
    assert pes["route"]["points_lost"] == pytest.approx(15.0)


def test_oracle_budget() -> None:
    base = rows("base")["oracle"]
    # All-efficient loses 10 points > 6: A (the only task the capable model resolves more) switches.
    assert (base["resolve"], base["cost_usd"], base["task_share"]) == pytest.approx((0.6, 3.5, 0.5))
    assert base["points_lost"] == pytest.approx(-10.0)
    assert oracle_choice("base", [A, B], 10.0) == [False, False]  # all-efficient is within 10 points
    # A task where the capable model is better and cheaper switches whatever the budget.
    cheap = TaskOutcome("D", 0.1, 0.9, 3.0, 2.0)
    assert oracle_choice("base", [A, B, cheap], 100.0) == [False, False, True]


def test_oracle_greedy_takes_the_cheapest_points_first() -> None:
    t1 = TaskOutcome("t1", 0.0, 1.0, 1.0, 11.0)  # $10 per resolve recovered
    t2 = TaskOutcome("t2", 0.0, 1.0, 1.0, 3.0)  # $2 per resolve
    t3 = TaskOutcome("t3", 0.0, 0.5, 1.0, 2.0)  # $2 per resolve (ties break by position)
    # All-efficient loses 83.3 points; t2 brings it to 50, t3 to 33.3, t1 to 0.
    assert oracle_choice("base", [t1, t2, t3], 40.0) == [False, True, True]
    assert oracle_choice("base", [t1, t2, t3], 60.0) == [False, True, False]


def test_bootstrap_is_seeded_and_degenerate_on_one_task() -> None:
    one = simulate([RUNS[0], RUNS[1]], OUTCOMES, resamples=200, seed=3)
    iv = one.case("base").intervals
    route = one.case("base").row("route")
    # One task: every resample is that task, so the interval is the point.
    assert (iv["points_lost"].low, iv["points_lost"].high) == pytest.approx((route.points_lost,) * 2)
    many = {f"t{i}": TaskOutcome(f"t{i}", i / 10, 0.9 - i / 20, 1.0 + i, 5.0 + i * i) for i in range(8)}
    runs = [Run(f"r{i}", f"t{i}", (E,) * i + (C,)) for i in range(8)] + [Run("x", "t3", (E, E))]
    a = simulate(runs, many, resamples=40, seed=7).to_dict()
    b = simulate(list(reversed(runs)), many, resamples=40, seed=7).to_dict()
    assert a["cases"] == b["cases"]  # same seed, same draws, whatever the input order
    c = simulate(runs, many, resamples=40, seed=8).to_dict()
    assert c["cases"]["base"]["rows"] == a["cases"]["base"]["rows"]
    assert c["cases"]["base"]["intervals"] != a["cases"]["base"]["intervals"]


def test_bootstrap_interval_spans_the_two_tasks() -> None:
    report = simulate(RUNS, OUTCOMES, resamples=2000, seed=0)
    iv = report.case("base").intervals["points_lost"]
    # Resamples of {A, A}: 100*(.6 - .4) = 20; {B, B}: 0; {A, B}: 10.
    assert iv.low == pytest.approx(0.0) and iv.high == pytest.approx(20.0)
    vs_null = report.case("base").intervals["points_lost_vs_null"]
    assert vs_null.low <= vs_null.high


def test_per_run_table() -> None:
    report = simulate(RUNS, OUTCOMES, resamples=0)
    table = {r.run.id: r.to_dict() for r in report.per_run}
    a1 = table["A1"]
    assert (a1["first_switch_turn"], a1["f"], a1["switch_source"], a1["switch_reason"]) == (
        3,
        0.5,
        "dimensions",
        "errors",
    )
    assert (a1["resolve_base"], a1["cost_base"], a1["resolve_pessimistic"]) == pytest.approx((0.6, 5.5, 0.4))
    assert a1["weight"] == pytest.approx(0.25) and table["B1"]["weight"] == pytest.approx(0.5)
    assert table["A2"]["switch_source"] is None
    # The weighted sum of the runs' contributions is the route's number.
    total = sum(r["weight"] * r["resolve_base"] for r in table.values())
    assert total == pytest.approx(report.case("base").row("route").resolve)


def test_bad_inputs() -> None:
    with pytest.raises(CounterfactualError, match="no outcomes for task 'Z'"):
        simulate([Run("z", "Z", (E,))], OUTCOMES)
    with pytest.raises(CounterfactualError, match="tier 'fast'"):
        simulate([Run("z", "A", ("fast",))], OUTCOMES)
    with pytest.raises(CounterfactualError, match="no decision points"):
        simulate([Run("z", "A", ())], OUTCOMES)
    with pytest.raises(CounterfactualError, match="no runs"):
        simulate([], OUTCOMES)


def test_task_level_runs_have_f_zero() -> None:
    report = simulate([Run("a", "A", (C,)), Run("b", "B", (E,))], OUTCOMES, resamples=0)
    route = report.case("base").row("route")
    assert route.mean_f == 0.0 and route.first_switch_turn == 1
    assert (route.resolve, route.cost_usd) == pytest.approx(((0.6 + 0.6) / 2, (5 + 2) / 2))
