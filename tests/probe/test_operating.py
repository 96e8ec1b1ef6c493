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
