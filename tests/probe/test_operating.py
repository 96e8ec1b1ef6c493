"""Operating points printed by ``train-probe``: thresholds chosen as ``switchyard calibrate`` does."""

from __future__ import annotations

import pytest

from switchyard.eval.calibrate import share_at
from switchyard.probe.operating import threshold_for

pytest.importorskip("numpy")


def test_threshold_lies_between_scores_and_gives_the_share() -> None:
    scores = [0.1, 0.2, 0.3, 0.4, 0.5]
    t = threshold_for(scores, 0.4)
    assert 0.3 < t <= 0.4
    assert share_at(scores, t) == pytest.approx(0.4)


def test_tied_scores_stay_together_at_the_nearest_share() -> None:
    # Three tied scores: 20% and 80% are the only shares near 40%; 20% is the nearer one
    # (taking the tie's score itself as the threshold would send 80% to capable).
    scores = [0.2, 0.6, 0.6, 0.6, 0.9]
    assert share_at(scores, threshold_for(scores, 0.4)) == pytest.approx(0.2)


def test_no_scores_sends_nothing_to_capable() -> None:
    assert threshold_for([], 0.3) == 1.0


def test_curve_rows_keep_ties_together_and_print_the_share_their_threshold_gives() -> None:
    import numpy as np

    from switchyard.probe.operating import Scored, curve_lines

    # kNN-like scores: few distinct values, many ties
    scores = np.array([0.9] * 6 + [0.5] * 8 + [0.1] * 6)
    strong = np.ones(20)
    weak = np.array([0.0] * 6 + [1.0] * 14)
    rows = curve_lines(Scored(scores, ["b"] * 20, strong, weak))[1:]
    assert len(rows) == 11
    for row in rows:
        share, threshold = float(row.split()[0].rstrip("%")) / 100, float(row.split()[1])
        assert share == (scores >= threshold).mean()  # never splits a tie
        assert share in (0.0, 0.3, 0.7, 1.0)
