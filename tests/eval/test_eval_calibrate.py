"""Threshold choice for a capable share or a budget, and writing it into the YAML."""

from __future__ import annotations

import random

import pytest
import yaml

from switchyard.eval.calibrate import CalibrationError, calibrate_budget, calibrate_share, share_at
from switchyard.eval.yaml_edit import YamlEditError, check_route_key, set_route_key

TEN = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]


def test_share_picks_a_round_threshold_between_neighbours() -> None:
    cal = calibrate_share(TEN, 0.3)
    # Top three (.9 .8 .7) go capable: the threshold lies in (.6, .7]; the midpoint, kept short.
    assert cal.threshold == 0.65
    assert cal.share == 0.3
    assert share_at(TEN, cal.threshold) == 0.3
    assert calibrate_share(TEN, 0.0).share == 0.0
    assert share_at(TEN, calibrate_share(TEN, 0.0).threshold) == 0.0
    assert calibrate_share(TEN, 1.0).threshold == 0.0


def test_share_with_ties_takes_the_nearest_reachable_share() -> None:
    scores = [0.5] * 7 + [0.2] * 3
    cal = calibrate_share(scores, 0.6)  # 6 wanted; 7 (all the .5s) is the nearest reachable
    assert cal.share == 0.7
    assert 0.2 < cal.threshold <= 0.5


def test_unscored_requests_count_with_their_choice() -> None:
    scores = [None, None, 0.9, 0.1]
    cal = calibrate_share(scores, 0.5, fixed=[True, False, False, False])
    # One request is already capable without a score: one scored request more makes half.
    assert cal.share == 0.5 and cal.scored == 2
    assert 0.1 < cal.threshold <= 0.9
    assert share_at(scores, cal.threshold, fixed=[True, False, False, False]) == 0.5


def test_no_scores_is_an_error() -> None:
    with pytest.raises(CalibrationError, match="no request carries a score"):
        calibrate_share([None, None], 0.3)
    with pytest.raises(CalibrationError, match="between 0 and 1"):
        calibrate_share([0.1], 1.5)


def test_budget() -> None:
    scores = [0.9, 0.5, 0.1]
    cal = calibrate_budget(scores, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], 2.0)
    assert cal.share == pytest.approx(2 / 3)
    assert cal.cost_usd == pytest.approx(2.0)
    assert 0.1 < cal.threshold <= 0.5
    cal = calibrate_budget(scores, [1.0, 1.0, 1.0], [0.25, 0.25, 0.25], 1.0)
    # .75 base; each capable request adds .75: one fits (1.5 > 1.0, so none)
    assert cal.share == 0.0 and cal.cost_usd == pytest.approx(0.75)
    with pytest.raises(CalibrationError, match="below the cheapest threshold"):
        calibrate_budget(scores, [1.0] * 3, [1.0] * 3, 2.0)


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_share_holds_on_held_out_data(share: float) -> None:
    # Two disjoint samples of one skewed score distribution, 30k each: calibrate on one, check the other
    # (sampling error of a share on 30k is about 0.3 points).
    rng = random.Random(7)
    scores = [rng.random() ** 3 for _ in range(60_000)]
    train, test = scores[:30_000], scores[30_000:]
    cal = calibrate_share(train, share)
    assert abs(cal.share - share) < 1e-3
    assert abs(share_at(test, cal.threshold) - share) < 0.01


CONFIG = """\
# my router
routes:
  agent:
    type: stage_router   # tuned weekly
    capable: big
    confidence_threshold: 0.5  # was 0.6
  flow: {type: x, capable: big}
  flowkey: {type: x, base_threshold: 0.25 }
  other:
    type: random
"""


def test_yaml_replace_existing_key_keeps_comments() -> None:
    out = set_route_key(CONFIG, "agent", "confidence_threshold", 0.4132)
    assert "    confidence_threshold: 0.4132  # was 0.6\n" in out
    assert out.replace("0.4132", "0.5") == CONFIG
    check_route_key(out, "agent", "confidence_threshold", 0.4132)


def test_yaml_add_missing_key_block_and_flow() -> None:
    out = set_route_key(CONFIG, "other", "threshold", 0.3)
    assert "  other:\n    threshold: 0.3\n    type: random\n" in out
    assert yaml.safe_load(out)["routes"]["other"] == {"type": "random", "threshold": 0.3}
    out = set_route_key(CONFIG, "flow", "threshold", 1.0e-05)
    assert "  flow: {type: x, capable: big, threshold: 1.0e-05}\n" in out
    assert yaml.safe_load(out)["routes"]["flow"]["threshold"] == 1.0e-05
    out = set_route_key(CONFIG, "flowkey", "base_threshold", 0.75)
    assert "  flowkey: {type: x, base_threshold: 0.75 }\n" in out


def test_yaml_edit_errors() -> None:
    with pytest.raises(YamlEditError, match=r"routes\.ghost is not in the file"):
        set_route_key(CONFIG, "ghost", "t", 0.5)
    with pytest.raises(YamlEditError, match="not a plain value"):
        set_route_key("routes:\n  a:\n    t: [1, 2]\n", "a", "t", 0.5)
    with pytest.raises(YamlEditError, match=r"expected 0\.5"):
        check_route_key(CONFIG, "agent", "confidence_threshold", 0.5 + 1e-3)


def test_set_route_key_inside_a_cascade_stage_keeps_the_rest() -> None:
    text = (
        "routes:\n"
        "  a:\n"
        "    type: cascade\n"
        "    stages:\n"
        "      - probe            # a named route\n"
        "      - type: prefill_probe   # inline, block style\n"
        "        targets: [e, c]\n"
        "      - {type: knn, targets: [e, c], threshold: 0.5}\n"
        "    default: c\n"
    )
    inserted = set_route_key(text, "a", "stages[1].threshold", 0.42)
    check_route_key(inserted, "a", "stages[1].threshold", 0.42)
    assert "      - threshold: 0.42\n        type: prefill_probe   # inline, block style\n" in inserted
    replaced = set_route_key(text, "a", "stages[2].threshold", 0.3)
    assert "      - {type: knn, targets: [e, c], threshold: 0.3}\n" in replaced
    assert replaced.replace("0.3}", "0.5}") == text
    with pytest.raises(YamlEditError, match=r"routes.a.stages\[7\] is not in the file"):
        set_route_key(text, "a", "stages[7].threshold", 0.1)
    with pytest.raises(YamlEditError, match="is not a mapping"):
        set_route_key(text, "a", "stages[0].threshold", 0.1)
