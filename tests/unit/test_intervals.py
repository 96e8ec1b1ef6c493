"""The shared quantile and interval helpers (switchyard.protocol.intervals)."""

from __future__ import annotations

import math
import random

import pytest

from switchyard.protocol.intervals import (
    Z95,
    difference_interval,
    mean_interval,
    percentile_interval,
    quantile,
    rank_interval,
)


def test_quantile_interpolates_between_neighbours_and_clamps_q() -> None:
    values = [0.0, 10.0, 20.0, 30.0]
    assert quantile(values, 0.5) == 15.0
    assert quantile(values, 0.0) == 0.0
    assert quantile(values, 1.0) == 30.0
    assert quantile(values, -1.0) == 0.0
    assert quantile(values, 2.0) == 30.0
    assert quantile([7.0], 0.3) == 7.0


def test_percentile_interval_agrees_with_numpy_to_rounding() -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(3)
    for n in (1, 2, 40, 999):
        values = [rng.gauss(0.0, 5.0) for _ in range(n)]
        lo, hi = percentile_interval(values)
        want = np.percentile(np.asarray(values), [2.5, 97.5])
        assert lo == pytest.approx(float(want[0]), rel=1e-12, abs=1e-12)
        assert hi == pytest.approx(float(want[1]), rel=1e-12, abs=1e-12)


def test_rank_interval_reads_order_statistics_without_interpolating() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 values, unsorted on purpose
    # floor(0.025 * 99) = 2 -> 3.0; round(0.975 * 99) = round(96.525) = 97 -> 98.0
    assert rank_interval(values) == (3.0, 98.0)
    lo, hi = percentile_interval(values)
    assert (lo, hi) != (3.0, 98.0)  # the interpolating estimator differs on the same draws


def test_welch_intervals() -> None:
    found = mean_interval([1.0, 2.0, 3.0])
    assert found["mean"] == 2.0
    assert found["high"] - found["mean"] == pytest.approx(Z95 * math.sqrt(1 / 3))
    assert mean_interval([5.0]) == {"n": 1, "mean": 5.0, "low": None, "high": None}
    assert mean_interval([]) == {"n": 0, "mean": None, "low": None, "high": None}
    diff = difference_interval([1.0, 3.0], [0.0, 0.0, 0.0])
    assert diff["diff"] == 2.0
    assert diff["high"] - diff["diff"] == pytest.approx(Z95 * math.sqrt(2.0 / 2))
    assert difference_interval([1.0], [2.0, 3.0])["low"] is None
    assert difference_interval([], [1.0])["diff"] is None
