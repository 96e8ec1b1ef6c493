"""Choosing a router's threshold for a target capable share or a budget.

Layer: ``eval`` — pure functions; the CLI feeds them scores from a dataset run or a decision log.

Convention: a router with a threshold sends a request to the capable tier exactly when
``score >= threshold`` (see :meth:`~switchyard.routers.base.RouterSpec.threshold_key`). Requests
the router decided without a score (overrides, fall-open …) keep their recorded choice and count
towards the share and the cost as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from switchyard._dataclass import dataclass


class CalibrationError(ValueError):
    """No threshold can satisfy the request; the message says why."""


@dataclass(slots=True, frozen=True)
class Calibration:
    """A chosen threshold and what it gives on the calibration data.

    Attributes:
        threshold: Send to capable iff ``score >= threshold``.
        share: Capable share it gives on the calibration data (unscored requests included).
        n: Requests in the calibration data.
        scored: Requests that carried a score.
        cost_usd: Total cost at this threshold, when costs were given.
    """

    threshold: float
    share: float
    n: int
    scored: int
    cost_usd: float | None = None


def _split(
    scores: Sequence[float | None], fixed: Sequence[bool] | None
) -> tuple[list[tuple[float, int]], list[int], int]:
    if fixed is not None and len(fixed) != len(scores):
        raise ValueError("scores and fixed differ in length")
    scored: list[tuple[float, int]] = []
    unscored: list[int] = []
    for i, s in enumerate(scores):
        if s is None:
            unscored.append(i)
        elif math.isnan(s):
            raise CalibrationError(f"score {i} is NaN")
        else:
            scored.append((s, i))
    if not scored:
        raise CalibrationError("no request carries a score: the router exposes none, so there is nothing to calibrate")
    scored.sort(key=lambda x: -x[0])
    fixed_capable = sum(1 for i in unscored if fixed is not None and fixed[i])
    return scored, unscored, fixed_capable


def _boundaries(ordered: Sequence[tuple[float, int]]) -> list[int]:
    """Numbers of top-scored requests a threshold can select (ties move together)."""
    out = [0]
    for b in range(1, len(ordered)):
        if ordered[b - 1][0] > ordered[b][0]:
            out.append(b)
    out.append(len(ordered))
    return out


def threshold_between(above: float | None, below: float | None) -> float:
    """A short decimal ``t`` with ``below < t <= above`` (the midpoint, rounded as far as allowed).

    ``above``: lowest score that must reach capable (``None``: none must); ``below``: highest
    score that must not (``None``: none must not).
    """
    if above is None and below is None:
        raise ValueError("need a bound")
    if above is None:
        assert below is not None
        return math.nextafter(below, math.inf) if below >= 1.0 else _shortest(below, 1.0, (below + 1.0) / 2)
    if below is None:
        return above
    return _shortest(below, above, (above + below) / 2)


def _shortest(low: float, high: float, mid: float) -> float:
    """The shortest decimal ``t`` with ``low < t <= high`` within a quarter of the gap of ``mid``
    (short enough to read, central enough to hold on unseen scores)."""
    tol = (high - low) / 4
    for digits in range(1, 17):
        t = round(mid, digits)
        if low < t <= high and abs(t - mid) <= tol:
            return t
    return mid if low < mid <= high else high


def calibrate_share(
    scores: Sequence[float | None], share: float, *, fixed: Sequence[bool] | None = None
) -> Calibration:
    """The threshold whose capable share on ``scores`` is closest to ``share``.

    Args:
        scores: Per request, the router's score (``None``: decided without one).
        share: Wanted fraction of requests on the capable tier (0-1).
        fixed: Per request, whether an unscored request went to capable.

    Raises:
        CalibrationError: No scores, or ``share`` outside 0-1.
    """
    if not 0.0 <= share <= 1.0:
        raise CalibrationError(f"capable share must be between 0 and 1, got {share}")
    ordered, _, fixed_capable = _split(scores, fixed)
    n = len(scores)
    want = share * n - fixed_capable
    best = min(_boundaries(ordered), key=lambda b: (abs(b - want), b))
    return Calibration(_threshold_at(ordered, best), (fixed_capable + best) / n, n, len(ordered))


def calibrate_budget(
    scores: Sequence[float | None],
    capable_cost: Sequence[float],
    efficient_cost: Sequence[float],
    budget_usd: float,
    *,
    fixed: Sequence[bool] | None = None,
) -> Calibration:
    """The threshold that sends the most requests to capable while the total stays within budget.

    Args:
        scores: Per request, the router's score (``None``: decided without one).
        capable_cost: Per request, its cost on the capable tier.
        efficient_cost: Per request, its cost on the efficient tier.
        budget_usd: Total spend allowed over these requests.
        fixed: Per request, whether an unscored request went to capable.

    Raises:
        CalibrationError: No scores, or even the cheapest threshold exceeds the budget.
    """
    n = len(scores)
    if len(capable_cost) != n or len(efficient_cost) != n:
        raise ValueError("scores and costs differ in length")
    ordered, unscored, _ = _split(scores, fixed)
    base = math.fsum(efficient_cost[i] for _, i in ordered) + math.fsum(
        capable_cost[i] if fixed is not None and fixed[i] else efficient_cost[i] for i in unscored
    )
    fixed_capable = sum(1 for i in unscored if fixed is not None and fixed[i])
    spend = [base]
    for _, i in ordered:
        spend.append(spend[-1] + capable_cost[i] - efficient_cost[i])
    fits = [b for b in _boundaries(ordered) if spend[b] <= budget_usd + 1e-9]
    if not fits:
        cheapest = min(spend[b] for b in _boundaries(ordered))
        raise CalibrationError(
            f"budget ${budget_usd:g} is below the cheapest threshold's cost (${cheapest:.4f} over {n} requests)"
        )
    best = max(fits)
    return Calibration(_threshold_at(ordered, best), (fixed_capable + best) / n, n, len(ordered), spend[best])


def _threshold_at(ordered: Sequence[tuple[float, int]], b: int) -> float:
    above = ordered[b - 1][0] if b > 0 else None
    below = ordered[b][0] if b < len(ordered) else None
    return threshold_between(above, below)


def share_at(scores: Sequence[float | None], threshold: float, *, fixed: Sequence[bool] | None = None) -> float:
    """Capable share that ``threshold`` gives on ``scores`` (to check a threshold on held-out data)."""
    if not scores:
        raise ValueError("no scores")
    hits = sum(
        1
        for i, s in enumerate(scores)
        if (s is not None and s >= threshold) or (s is None and fixed is not None and fixed[i])
    )
    return hits / len(scores)


@dataclass(slots=True)
class GroupDrift:
    """How one threshold lands on one group (benchmark) of the calibration data.

    Attributes:
        group: The group's name.
        n: Requests in it.
        share: Capable share the global threshold gives in this group.
        threshold: The group's own threshold for the requested share (``None`` without a share).
    """

    group: str
    n: int
    share: float
    threshold: float | None


def drift_by_group(
    scores: Sequence[float | None],
    fixed: Sequence[bool],
    groups: Sequence[str],
    threshold: float,
    share: float | None,
) -> list[GroupDrift]:
    """Per group: the share the global ``threshold`` gives, and the group's own threshold for
    ``share`` (per-benchmark thresholds); empty with fewer than two groups."""
    names = sorted(set(groups))
    if len(names) < 2:
        return []
    out: list[GroupDrift] = []
    for name in names:
        idx = [i for i, g in enumerate(groups) if g == name]
        sc = [scores[i] for i in idx]
        fx = [fixed[i] for i in idx]
        own = None
        if share is not None and any(s is not None for s in sc):
            own = calibrate_share(sc, share, fixed=fx).threshold
        out.append(GroupDrift(name, len(idx), share_at(sc, threshold, fixed=fx), own))
    return out
