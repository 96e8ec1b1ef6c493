"""Cost-quality curve math for routers, with RouteLLM's definitions (our own implementation).

Layer: ``eval`` — pure functions over plain sequences; no I/O, no numpy.

Terms (two-tier routes: a *capable*/strong and an *efficient*/weak model):

- **quality** — mean per-item outcome (``correct`` as 1/0, or a ``score``).
- **capable share** — fraction of items sent to the capable model (RouteLLM's "% strong calls").
- **PGR** (performance gap recovered) — ``(q - q_weak) / (q_strong - q_weak)``.
- **APGR** — the area under PGR as a function of the capable share, divided by the share range
  the curve covers (RouteLLM: ``(AUC - weak_auc) / (strong_auc - weak_auc)``). For a threshold
  sweep that range is ``[0, 1]``. A random router scores 0.5; the oracle more than 1.
- **CPT(x%)** — the smallest capable share at which the curve first reaches PGR ``x``
  (linear interpolation between curve points); ``None`` when it never does.

A router that exposes a score ("probability the capable model is needed") gives a whole curve:
one point per distinct threshold ``t`` (capable iff ``score >= t``). A router with a fixed
decision gives one point ``(p, q)``; its curve is the polyline ``(0, q_weak) → (p, q) →
(1, q_strong)`` — what mixing it at random with always-efficient or always-capable achieves — so
APGR and CPT stay comparable (a constant or random router scores 0.5).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from switchyard._dataclass import dataclass

EPS = 1e-12
"""Tolerance below which two qualities or costs count as equal."""


@dataclass(frozen=True, slots=True)
class Point:
    """One operating point of a two-tier router.

    Attributes:
        share: Fraction of items sent to the capable model (0-1).
        quality: Mean outcome.
        cost_usd: Total cost over all items (``None`` when costs are unknown).
        threshold: Score threshold that gives this point (capable iff ``score >= threshold``);
            ``inf`` for "nothing scored goes to capable"; ``None`` when not a threshold point.
    """

    share: float
    quality: float
    cost_usd: float | None = None
    threshold: float | None = None


# -- primitives ------------------------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (``ValueError`` for no values)."""
    if not values:
        raise ValueError("no items")
    return math.fsum(values) / len(values)


def total(values: Sequence[float] | None) -> float | None:
    """Sum, or ``None`` when unknown."""
    return None if values is None else math.fsum(values)


def pgr(quality: float, weak: float, strong: float) -> float | None:
    """Performance gap recovered; ``None`` when the capable model is not better than the efficient one."""
    gap = strong - weak
    if gap <= EPS:
        return None
    return (quality - weak) / gap


def apgr(curve: Sequence[Point], weak: float, strong: float) -> float | None:
    """Average PGR over the share range ``curve`` covers (trapezoid rule).

    Returns:
        ``None`` when the gap is not positive or the curve spans no share range.
    """
    if strong - weak <= EPS or len(curve) < 2:
        return None
    pts = sorted(curve, key=lambda p: p.share)
    span = pts[-1].share - pts[0].share
    if span <= EPS:
        return None
    gap = strong - weak
    area = math.fsum(
        (b.share - a.share) * ((a.quality + b.quality) / 2 - weak) / gap for a, b in itertools.pairwise(pts)
    )
    return area / span


def cpt(curve: Sequence[Point], level: float, weak: float, strong: float) -> float | None:
    """Smallest capable share at which ``curve`` reaches PGR ``level`` (e.g. 0.5 for CPT(50%)).

    Returns:
        A share in 0-1, or ``None`` when the curve never reaches the level (or the gap is not
        positive).
    """
    if strong - weak <= EPS or not curve:
        return None
    target = weak + level * (strong - weak)
    pts = sorted(curve, key=lambda p: p.share)
    prev: Point | None = None
    for p in pts:
        if p.quality >= target - EPS:
            if prev is None or p.quality - prev.quality <= EPS:
                return p.share
            return prev.share + (target - prev.quality) * (p.share - prev.share) / (p.quality - prev.quality)
        prev = p
    return None


def interpolate(a: Point, b: Point, quality: float) -> Point:
    """The point between ``a`` and ``b`` (on the segment) whose quality is ``quality``."""
    if abs(b.quality - a.quality) <= EPS:
        return a
    f = (quality - a.quality) / (b.quality - a.quality)
    cost = None if a.cost_usd is None or b.cost_usd is None else a.cost_usd + f * (b.cost_usd - a.cost_usd)
    return Point(a.share + f * (b.share - a.share), quality, cost)


def cheapest_at(curve: Sequence[Point], quality: float) -> Point | None:
    """The cheapest point on the piecewise-linear ``curve`` whose quality is at least ``quality``.

    Cost is USD when every point has one, else the capable share.
    """
    pts = sorted(curve, key=lambda p: p.share)
    cands = [p for p in pts if p.quality >= quality - EPS]
    for a, b in itertools.pairwise(pts):
        if (a.quality - quality) * (b.quality - quality) < 0:
            cands.append(interpolate(a, b, quality))
    if not cands:
        return None
    use_usd = all(p.cost_usd is not None for p in cands)
    return min(cands, key=lambda p: (p.cost_usd if use_usd and p.cost_usd is not None else p.share, p.share))


# -- curves ----------------------------------------------------------------------------------


def check_lengths(n: int, *seqs: Sequence[Any] | None) -> None:
    """Checks that there are items and that every given sequence has ``n`` of them.

    Raises:
        ValueError: No items, or a sequence of another length.
    """
    if n == 0:
        raise ValueError("no items to evaluate")
    for s in seqs:
        if s is not None and len(s) != n:
            raise ValueError(f"sequences differ in length ({len(s)} vs {n})")


def threshold_curve(
    scores: Sequence[float | None],
    strong: Sequence[float],
    weak: Sequence[float],
    *,
    strong_cost: Sequence[float] | None = None,
    weak_cost: Sequence[float] | None = None,
    fixed: Sequence[bool] | None = None,
    extra_cost_usd: float = 0.0,
) -> list[Point]:
    """The cost-quality curve of "capable iff ``score >= t``" over every distinct threshold.

    Args:
        scores: Per item, the probability that the capable model is needed (``None``: the
            router gave no score, the item keeps its ``fixed`` choice at every threshold).
        strong: Per-item outcome of the capable model.
        weak: Per-item outcome of the efficient model.
        strong_cost: Per-item cost of the capable model (``None``: unknown).
        weak_cost: Per-item cost of the efficient model.
        fixed: Per-item choice (``True`` = capable) for items without a score.
        extra_cost_usd: Cost added to every point (e.g. the router's own judge calls).

    Returns:
        Points by increasing share, first the ``t = inf`` point, then one per distinct score.
    """
    n = len(scores)
    check_lengths(n, strong, weak, strong_cost, weak_cost, fixed)
    costs = strong_cost is not None and weak_cost is not None
    q = 0.0
    c = extra_cost_usd
    k = 0
    scored: list[tuple[float, int]] = []
    for i, s in enumerate(scores):
        if s is None:
            to_strong = bool(fixed[i]) if fixed is not None else False
            k += to_strong
            q += strong[i] if to_strong else weak[i]
            if costs:
                assert strong_cost is not None and weak_cost is not None
                c += strong_cost[i] if to_strong else weak_cost[i]
        else:
            if math.isnan(s):
                raise ValueError(f"item {i} has a NaN score")
            scored.append((s, i))
            q += weak[i]
            if costs:
                assert weak_cost is not None
                c += weak_cost[i]
    scored.sort(key=lambda x: -x[0])
    points = [Point(k / n, q / n, c if costs else None, math.inf)]
    j = 0
    while j < len(scored):
        value = scored[j][0]
        while j < len(scored) and scored[j][0] == value:
            i = scored[j][1]
            q += strong[i] - weak[i]
            if costs:
                assert strong_cost is not None and weak_cost is not None
                c += strong_cost[i] - weak_cost[i]
            k += 1
            j += 1
        points.append(Point(k / n, q / n, c if costs else None, value))
    return points


def oracle_curve(
    strong: Sequence[float],
    weak: Sequence[float],
    *,
    strong_cost: Sequence[float] | None = None,
    weak_cost: Sequence[float] | None = None,
) -> list[Point]:
    """Best quality reachable with at most a given capable share (RouteLLM's "optimal" curve).

    The oracle sends to the capable model exactly the items where it does better, largest gain
    first (cheapest first among equal gains), and nothing else; past the last such item the
    curve stays flat up to share 1.
    """
    n = len(strong)
    check_lengths(n, weak, strong_cost, weak_cost)
    costs = strong_cost is not None and weak_cost is not None
    gains = []
    for i in range(n):
        d = strong[i] - weak[i]
        if d > EPS:
            extra = (strong_cost[i] - weak_cost[i]) if costs and strong_cost and weak_cost else 0.0
            gains.append((d, extra))
    gains.sort(key=lambda g: (-g[0], g[1]))
    q = math.fsum(weak)
    c = total(weak_cost) if costs else None
    points = [Point(0.0, q / n, c)]
    for k, (d, extra) in enumerate(gains, start=1):
        q += d
        c = None if c is None else c + extra
        points.append(Point(k / n, q / n, c))
    if points[-1].share < 1.0:
        points.append(Point(1.0, q / n, c))
    return points


def polyline(point: Point, weak_point: Point, strong_point: Point) -> list[Point]:
    """The curve of a fixed router: always-efficient → its point → always-capable."""
    return [weak_point, point, strong_point]
