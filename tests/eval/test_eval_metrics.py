"""Metrics on hand-computed cases (the numbers in comments are worked out by hand)."""

from __future__ import annotations

import random

import pytest

from switchyard.eval.metrics import (
    Point,
    apgr,
    cpt,
    evaluate_choices,
    evaluate_decisions,
    evaluate_scores,
    oracle_curve,
    pgr,
    target_baselines,
    threshold_curve,
    two_tier_baselines,
)

# Four items. Capable right on 0, 1, 2; efficient right on 1 only.
# q_strong = 0.75, q_weak = 0.25, gap 0.5; the capable model gains on items 0 and 2.
STRONG = [1, 1, 1, 0]
WEAK = [0, 1, 0, 0]


def test_pgr() -> None:
    assert pgr(0.5, 0.25, 0.75) == 0.5
    assert pgr(0.25, 0.25, 0.75) == 0.0
    assert pgr(0.5, 0.5, 0.5) is None  # no gap
    assert pgr(0.5, 0.6, 0.4) is None  # capable is worse


def test_threshold_curve_points() -> None:
    # Scores put item 0 first (gain), then 1 (no gain), 3 (no gain), 2 (gain).
    curve = threshold_curve([0.9, 0.6, 0.1, 0.3], STRONG, WEAK)
    assert [(p.share, p.quality, p.threshold) for p in curve] == [
        (0.0, 0.25, float("inf")),
        (0.25, 0.5, 0.9),
        (0.5, 0.5, 0.6),
        (0.75, 0.5, 0.3),
        (1.0, 0.75, 0.1),
    ]


def test_evaluate_scores_imperfect_router() -> None:
    # PGR along the curve: 0, .5, .5, .5, 1 at shares 0, .25, .5, .75, 1.
    # APGR = .25*.25 + .25*.5 + .25*.5 + .25*.75 = 0.5
    # CPT50: PGR .5 is first reached at share .25.
    # CPT80: quality .65 lies between (.75, .5) and (1, .75): .75 + .15/.25*.25 = .9
    r = evaluate_scores([0.9, 0.6, 0.1, 0.3], STRONG, WEAK)
    assert r.apgr == pytest.approx(0.5)
    assert r.cpt50 == pytest.approx(0.25)
    assert r.cpt80 == pytest.approx(0.9)
    assert r.quality is None  # no operating point asked for
    assert (r.capable_quality, r.efficient_quality) == (0.75, 0.25)


def test_evaluate_scores_perfect_router_matches_oracle() -> None:
    # Gains first: (0,.25) (.25,.5) (.5,.75) (.75,.75) (1,.75); PGR 0 .5 1 1 1.
    # APGR = .0625 + .1875 + .25 + .25 = .75; CPT80: .25 + (.65-.5)/.25*.25 = .40
    r = evaluate_scores([0.9, 0.1, 0.6, 0.3], STRONG, WEAK, threshold=0.5)
    assert r.apgr == pytest.approx(0.75)
    assert r.cpt50 == pytest.approx(0.25)
    assert r.cpt80 == pytest.approx(0.40)
    # Operating point at t = .5: items 0 and 2 go capable -> share .5, quality .75, PGR 1.
    assert (r.capable_share, r.quality, r.pgr) == (0.5, 0.75, 1.0)
    oracle = oracle_curve(STRONG, WEAK)
    assert [(p.share, p.quality) for p in oracle] == [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (1.0, 0.75)]
    assert apgr(oracle, 0.25, 0.75) == pytest.approx(0.75)


def test_costs_and_savings_at_95() -> None:
    # Capable costs $1 per item, efficient $0.10. Always-capable: $4.00, quality .75.
    # 95% of .75 = .7125, reached between (.75, .5, $3.10) and (1, .75, $4.00) at f = .85:
    # share .9625, cost 3.10 + .85*.90 = $3.865 -> saves $0.135.
    r = evaluate_scores([0.9, 0.6, 0.1, 0.3], STRONG, WEAK, strong_cost=[1.0] * 4, weak_cost=[0.1] * 4)
    assert r.capable_cost_usd == pytest.approx(4.0)
    assert r.efficient_cost_usd == pytest.approx(0.4)
    assert r.at95 is not None
    assert r.at95.share == pytest.approx(0.9625)
    assert r.at95.cost_usd == pytest.approx(3.865)
    assert r.usd_saved_at_95 == pytest.approx(0.135)
    assert [p.cost_usd for p in r.curve] == pytest.approx([0.4, 1.3, 2.2, 3.1, 4.0])


def test_fixed_decisions_use_the_polyline() -> None:
    # Item 0 to capable: point (.25, .5). Polyline (0,.25) (.25,.5) (1,.75), PGR 0, .5, 1.
    # APGR = .25*.25 + .75*.75 = .625; CPT50 = .25; CPT80 = .25 + .15/.25*.75 = .70
    r = evaluate_decisions([True, False, False, False], STRONG, WEAK, strong_cost=[1.0] * 4, weak_cost=[0.1] * 4)
    assert (r.capable_share, r.quality, r.pgr) == (0.25, 0.5, 0.5)
    assert r.apgr == pytest.approx(0.625)
    assert r.cpt50 == pytest.approx(0.25)
    assert r.cpt80 == pytest.approx(0.70)
    assert r.cost_usd == pytest.approx(1.3)
    assert r.at95 is None and r.usd_saved_at_95 is None  # .5 < .7125


def test_constant_router_scores_one_half() -> None:
    # Every item the same score: one step from always-efficient to always-capable.
    r = evaluate_scores([0.5] * 4, STRONG, WEAK)
    assert len(r.curve) == 2
    assert r.apgr == pytest.approx(0.5)
    assert r.cpt50 == pytest.approx(0.5)
    assert r.cpt80 == pytest.approx(0.8)
    always = evaluate_decisions([False] * 4, STRONG, WEAK)
    assert always.apgr == pytest.approx(0.5)


def test_random_scores_average_one_half() -> None:
    rng = random.Random(1)
    n = 20000
    strong = [rng.random() < 0.8 for _ in range(n)]
    weak = [rng.random() < 0.6 for _ in range(n)]
    r = evaluate_scores([rng.random() for _ in range(n)], strong, weak)
    assert r.apgr == pytest.approx(0.5, abs=0.03)


def test_unscored_items_keep_their_choice() -> None:
    # Item 3 has no score and went to capable (gain 0): every curve point counts it as capable.
    curve = threshold_curve([0.9, 0.6, 0.1, None], STRONG, WEAK, fixed=[False, False, False, True])
    assert curve[0].share == 0.25 and curve[-1].share == 1.0
    r = evaluate_scores([0.9, 0.6, 0.1, None], STRONG, WEAK, choose_strong=[True, False, False, True])
    assert r.capable_share == 0.5
    # Range [.25, 1]: PGR .0 -> .5 (at .5) -> .5 (at .75) -> 1 (at 1): area .0625+.125+.1875 = .375, / .75
    assert r.apgr == pytest.approx(0.5)


def test_scores_outcomes_mt_bench_style() -> None:
    # Numeric scores: capable 9 and 8, efficient 7 and 9 -> q_s 8.5, q_w 8, gains +2, -1.
    # Oracle: (0, 8), (.5, 9), (1, 9); PGR 0, 2, 2 -> APGR .5 + 1 = 1.5.
    oracle = oracle_curve([9, 8], [7, 9])
    assert apgr(oracle, 8.0, 8.5) == pytest.approx(1.5)
    assert cpt(oracle, 0.5, 8.0, 8.5) == pytest.approx(0.125)  # q 8.25 at 1/8 of the way to .5


def test_gap_not_positive() -> None:
    r = evaluate_scores([0.9, 0.1], [0, 1], [1, 0])
    assert r.apgr is None and r.cpt50 is None and r.pgr is None


def test_cpt_never_reached() -> None:
    curve = [Point(0.0, 0.25), Point(1.0, 0.5)]
    assert cpt(curve, 0.8, 0.25, 0.75) is None


def test_two_tier_baselines() -> None:
    rows = {
        r.name: r
        for r in two_tier_baselines(
            STRONG, WEAK, capable="big", efficient="small", strong_cost=[1.0] * 4, weak_cost=[0.1] * 4, share=0.25
        )
    }
    assert rows["always small"].quality == 0.25 and rows["always small"].cost_usd == pytest.approx(0.4)
    assert rows["always big"].quality == 0.75 and rows["always big"].cost_usd == pytest.approx(4.0)
    rnd = rows["random (same share)"]
    # .25 + .25*.5 = .375; cost .25*4 + .75*.4 = 1.3
    assert (rnd.quality, rnd.apgr, rnd.cpt50, rnd.cpt80) == (0.375, 0.5, 0.5, 0.8)
    assert rnd.cost_usd == pytest.approx(1.3)
    oracle = rows["oracle"]
    # Items 0 and 2 to capable: quality .75 at share .5, cost 2*1 + 2*.1 = 2.2
    assert (oracle.quality, oracle.capable_share) == (0.75, 0.5)
    assert oracle.cost_usd == pytest.approx(2.2)
    assert oracle.apgr == pytest.approx(0.75)


def test_any_number_of_targets() -> None:
    quality = {"a": [1, 0, 0], "b": [1, 1, 0], "c": [0, 1, 1]}
    cost = {"a": [0.1, 0.1, 0.1], "b": [1.0, 1.0, 1.0], "c": [0.5, 0.5, 0.5]}
    row = evaluate_choices(["a", "b", "c"], quality, cost, name="mine")
    assert row.quality == 1.0
    assert row.cost_usd == pytest.approx(1.6)
    assert row.shares == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    rows = {r.name: r for r in target_baselines(quality, cost)}
    assert rows["always b"].quality == pytest.approx(2 / 3)
    assert rows["random (uniform)"].quality == pytest.approx((1 / 3 + 2 / 3 + 2 / 3) / 3)
    # Oracle: item 0 -> a (a and b right, a cheaper), item 1 -> c (b and c right, c cheaper), item 2 -> c.
    assert rows["oracle"].quality == 1.0
    assert rows["oracle"].cost_usd == pytest.approx(0.1 + 0.5 + 0.5)
    assert evaluate_choices(["a", "a", "a"], quality, {"a": None}).cost_usd is None
    with pytest.raises(KeyError):
        evaluate_choices(["z", "a", "a"], quality)


def test_length_mismatch_and_empty() -> None:
    with pytest.raises(ValueError):
        evaluate_scores([0.1], [1, 0], [0, 0])
    with pytest.raises(ValueError):
        evaluate_scores([], [], [])
