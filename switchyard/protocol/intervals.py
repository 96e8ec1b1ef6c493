"""Quantiles and 95 % intervals: the one place the package computes them.

Layer: ``protocol`` — pure Python, imports nothing of ours, so routers (a threshold's quantile),
the engine (routed vs control) and eval (bootstrap intervals) share it.

Two estimators of a bootstrap interval live here on purpose, because they give different numbers
on the same draws and each is pinned by what reads it:

* :func:`percentile_interval` interpolates linearly between order statistics (numpy's default
  ``np.percentile``): the suite scorers (latch, counterfactual) report it.
* :func:`rank_interval` reads two order statistics without interpolating (the lower at the
  floored rank, the upper at the rounded rank): ``switchyard tune`` on a decision log decides
  "too few sessions to tell" by whether these intervals overlap, so moving it to interpolation
  would move that verdict on small logs. Kept as it was, not merged.

And one normal-approximation pair for means of independent sessions (:func:`mean_interval`,
:func:`difference_interval`, Welch), which the routed-vs-control view reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Z95 = 1.959964
"""The normal quantile of a two-sided 95 % interval."""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linearly interpolated between neighbours.

    Args:
        sorted_values: Ascending, at least one value.
        q: In ``[0, 1]`` (clamped).
    """
    n = len(sorted_values)
    pos = min(max(q, 0.0), 1.0) * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    # ``a + (b - a) * t`` for every t: numpy's lerp switches to ``b - (b - a) * (1 - t)`` above
    # t = 0.5, which can differ in the last bit; the threshold controller has always used this form.
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentile_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of ``values`` (any order, at least one), interpolated."""
    ordered = sorted(values)
    return quantile(ordered, 0.025), quantile(ordered, 0.975)


def rank_interval(values: Sequence[float]) -> tuple[float, float]:
    """The order statistics at ranks ``floor(0.025 (n-1))`` and ``round(0.975 (n-1))`` of
    ``values`` (any order, at least one): no interpolation (see the module docstring)."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered[int(0.025 * (n - 1))], ordered[round(0.975 * (n - 1))]


def _var(values: Sequence[float], mean: float) -> float:
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """``{n, mean, low, high}``: the mean of ``values`` and its normal-approximation 95 % interval
    (``None`` bounds below two values)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None}
    mean = sum(values) / n
    if n < 2:
        return {"n": n, "mean": mean, "low": None, "high": None}
    half = Z95 * math.sqrt(_var(values, mean) / n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


def difference_interval(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """``{diff, low, high}``: mean(a) - mean(b) and its 95 % (Welch) interval; ``None`` bounds
    unless both sides have two values or more."""
    if not a or not b:
        return {"diff": None, "low": None, "high": None}
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    diff = ma - mb
    if len(a) < 2 or len(b) < 2:
        return {"diff": diff, "low": None, "high": None}
    half = Z95 * math.sqrt(_var(a, ma) / len(a) + _var(b, mb) / len(b))
    return {"diff": diff, "low": diff - half, "high": diff + half}


__all__ = ["Z95", "difference_interval", "mean_interval", "percentile_interval", "quantile", "rank_interval"]
