"""Router reports and baseline rows built on the curve math of :mod:`switchyard.eval.curves`.

Layer: ``eval`` — pure functions over plain sequences; no I/O, no numpy.

The terms (quality, capable share, PGR, APGR, CPT) are defined in :mod:`switchyard.eval.curves`;
this module scores a two-tier router (:func:`evaluate_scores`, :func:`evaluate_decisions`), builds
the baseline rows (:func:`two_tier_baselines`, :func:`target_baselines`) and scores choices among
any number of targets (:func:`evaluate_choices`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.curves import (
    EPS,
    Point,
    apgr,
    cheapest_at,
    check_lengths,
    cpt,
    mean,
    oracle_curve,
    pgr,
    polyline,
    threshold_curve,
    total,
)


@dataclass(slots=True)
class Row:
    """One line of an evaluation table (a router or a baseline).

    Attributes:
        name: What the row is (``route mix``, ``random``, ``oracle``, ``always capable`` …).
        n: Items.
        quality: Mean outcome.
        cost_usd: Total cost (``None`` when unknown).
        shares: Fraction of items per target.
        capable_share: Fraction sent to the capable tier (two-tier only).
        pgr: Performance gap recovered at this point (two-tier only).
        apgr: Average PGR of the row's curve (two-tier only; ``None`` for fixed points).
        cpt50: CPT(50%) of the row's curve.
        cpt80: CPT(80%) of the row's curve.
    """

    name: str
    n: int
    quality: float
    cost_usd: float | None = None
    shares: dict[str, float] = field(default_factory=dict)
    capable_share: float | None = None
    pgr: float | None = None
    apgr: float | None = None
    cpt50: float | None = None
    cpt80: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass(slots=True)
class TwoTierReport:
    """A two-tier router scored against its two models.

    Attributes:
        n: Items.
        quality: Quality at the operating point (``None`` for a bare sweep).
        capable_share: Capable share at the operating point.
        cost_usd: Total cost at the operating point.
        pgr: PGR at the operating point.
        apgr: APGR of the curve.
        cpt50: CPT(50%) of the curve (a share, 0-1).
        cpt80: CPT(80%) of the curve.
        capable_quality: Quality of always-capable.
        efficient_quality: Quality of always-efficient.
        capable_cost_usd: Cost of always-capable.
        efficient_cost_usd: Cost of always-efficient.
        at95: The cheapest point of the curve (operating point only, for a fixed router) with at
            least 95% of always-capable's quality; ``None`` if there is none.
        usd_saved_at_95: Always-capable's cost minus ``at95``'s cost.
        curve: Points by increasing share.
        swept: Whether the curve comes from a score sweep.
    """

    n: int
    quality: float | None
    capable_share: float | None
    cost_usd: float | None
    pgr: float | None
    apgr: float | None
    cpt50: float | None
    cpt80: float | None
    capable_quality: float
    efficient_quality: float
    capable_cost_usd: float | None
    efficient_cost_usd: float | None
    at95: Point | None
    usd_saved_at_95: float | None
    curve: list[Point]
    swept: bool

    def to_dict(self, *, curve: bool = False) -> dict[str, Any]:
        """JSON-ready (``inf`` thresholds become ``None``); the curve only when asked."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("curve", "at95")}
        out["share_at_95"] = None if self.at95 is None else self.at95.share
        out["quality_at_95"] = None if self.at95 is None else self.at95.quality
        if curve:
            out["curve"] = [_point_dict(p) for p in self.curve]
        return out


def _point_dict(p: Point) -> dict[str, Any]:
    t = p.threshold
    return {
        "share": p.share,
        "quality": p.quality,
        "cost_usd": p.cost_usd,
        "threshold": None if t is None or math.isinf(t) else t,
    }


# -- reports ---------------------------------------------------------------------------------


def _fixed_point(
    choose_strong: Sequence[bool],
    strong: Sequence[float],
    weak: Sequence[float],
    strong_cost: Sequence[float] | None,
    weak_cost: Sequence[float] | None,
    extra_cost_usd: float,
) -> Point:
    n = len(choose_strong)
    q = math.fsum(strong[i] if s else weak[i] for i, s in enumerate(choose_strong))
    c: float | None = None
    if strong_cost is not None and weak_cost is not None:
        c = extra_cost_usd + math.fsum(strong_cost[i] if s else weak_cost[i] for i, s in enumerate(choose_strong))
    return Point(sum(1 for s in choose_strong if s) / n, q / n, c)


def _report(
    op: Point | None,
    curve: list[Point],
    strong: Sequence[float],
    weak: Sequence[float],
    strong_cost: Sequence[float] | None,
    weak_cost: Sequence[float] | None,
    *,
    swept: bool,
) -> TwoTierReport:
    qs, qw = mean(strong), mean(weak)
    cs, cw = total(strong_cost), total(weak_cost)
    if swept:
        at95 = cheapest_at(curve, 0.95 * qs)
    else:
        at95 = op if op is not None and op.quality >= 0.95 * qs - EPS else None
    saved = None if at95 is None or at95.cost_usd is None or cs is None else cs - at95.cost_usd
    return TwoTierReport(
        n=len(strong),
        quality=None if op is None else op.quality,
        capable_share=None if op is None else op.share,
        cost_usd=None if op is None else op.cost_usd,
        pgr=None if op is None else pgr(op.quality, qw, qs),
        apgr=apgr(curve, qw, qs),
        cpt50=cpt(curve, 0.5, qw, qs),
        cpt80=cpt(curve, 0.8, qw, qs),
        capable_quality=qs,
        efficient_quality=qw,
        capable_cost_usd=cs,
        efficient_cost_usd=cw,
        at95=at95,
        usd_saved_at_95=saved,
        curve=curve,
        swept=swept,
    )


def evaluate_scores(
    scores: Sequence[float | None],
    strong_correct: Sequence[float],
    weak_correct: Sequence[float],
    *,
    strong_cost: Sequence[float] | None = None,
    weak_cost: Sequence[float] | None = None,
    threshold: float | None = None,
    choose_strong: Sequence[bool] | None = None,
    extra_cost_usd: float = 0.0,
) -> TwoTierReport:
    """Scores a router that outputs "probability the capable model is needed", over all thresholds.

    Args:
        scores: Per-item score (``None``: no score; the item keeps ``choose_strong[i]``).
        strong_correct: Per-item outcome of the capable model (bools or numbers).
        weak_correct: Per-item outcome of the efficient model.
        strong_cost: Per-item cost of the capable model, when known.
        weak_cost: Per-item cost of the efficient model, when known.
        threshold: Operating point to report (capable iff ``score >= threshold``).
        choose_strong: The router's actual per-item choice: the operating point when no
            ``threshold`` is given, and the choice for unscored items.
        extra_cost_usd: Cost added everywhere (the router's own model calls).

    Returns:
        APGR/CPT from the full curve; quality, share and cost at the operating point (``None``
        when neither ``threshold`` nor ``choose_strong`` is given); ``usd_saved_at_95`` at the
        curve's cheapest point with >= 95% of always-capable's quality.

    Example:
        >>> r = evaluate_scores([0.9, 0.2], [1, 1], [0, 1])
        >>> r.apgr, r.cpt50
        (0.75, 0.25)
    """
    strong = [float(x) for x in strong_correct]
    weak = [float(x) for x in weak_correct]
    curve = threshold_curve(
        scores,
        strong,
        weak,
        strong_cost=strong_cost,
        weak_cost=weak_cost,
        fixed=choose_strong,
        extra_cost_usd=extra_cost_usd,
    )
    op: Point | None = None
    if threshold is not None:
        picks = [
            (s >= threshold) if s is not None else bool(choose_strong[i]) if choose_strong is not None else False
            for i, s in enumerate(scores)
        ]
        op = _fixed_point(picks, strong, weak, strong_cost, weak_cost, extra_cost_usd)
        op = Point(op.share, op.quality, op.cost_usd, threshold)
    elif choose_strong is not None:
        op = _fixed_point(choose_strong, strong, weak, strong_cost, weak_cost, extra_cost_usd)
    return _report(op, curve, strong, weak, strong_cost, weak_cost, swept=True)


def evaluate_decisions(
    choose_strong: Sequence[bool],
    strong_correct: Sequence[float],
    weak_correct: Sequence[float],
    *,
    strong_cost: Sequence[float] | None = None,
    weak_cost: Sequence[float] | None = None,
    extra_cost_usd: float = 0.0,
) -> TwoTierReport:
    """Scores a router's fixed per-item choices (``True`` = capable).

    APGR and CPT use the polyline always-efficient → this point → always-capable (see module
    docs); ``usd_saved_at_95`` is set only when the point itself keeps >= 95% of
    always-capable's quality.
    """
    strong = [float(x) for x in strong_correct]
    weak = [float(x) for x in weak_correct]
    check_lengths(len(choose_strong), strong, weak, strong_cost, weak_cost)
    op = _fixed_point(choose_strong, strong, weak, strong_cost, weak_cost, extra_cost_usd)
    lo = Point(0.0, mean(weak), total(weak_cost))
    hi = Point(1.0, mean(strong), total(strong_cost))
    return _report(op, polyline(op, lo, hi), strong, weak, strong_cost, weak_cost, swept=False)


def two_tier_baselines(
    strong_correct: Sequence[float],
    weak_correct: Sequence[float],
    *,
    capable: str = "capable",
    efficient: str = "efficient",
    strong_cost: Sequence[float] | None = None,
    weak_cost: Sequence[float] | None = None,
    share: float = 0.5,
) -> list[Row]:
    """Always-efficient, always-capable, random (at ``share``, analytic) and oracle rows.

    Random's quality and cost are the exact expectation of sending each item to the capable
    model with probability ``share``: PGR = ``share``, APGR 0.5, CPT(50%) 0.5, CPT(80%) 0.8.
    The oracle row is the cheapest point of best quality; its APGR/CPT come from
    :func:`oracle_curve`.
    """
    strong = [float(x) for x in strong_correct]
    weak = [float(x) for x in weak_correct]
    n = len(strong)
    check_lengths(n, weak, strong_cost, weak_cost)
    qs, qw = mean(strong), mean(weak)
    cs, cw = total(strong_cost), total(weak_cost)
    rows = [
        Row(f"always {efficient}", n, qw, cw, {efficient: 1.0, capable: 0.0}, 0.0, pgr(qw, qw, qs)),
        Row(f"always {capable}", n, qs, cs, {efficient: 0.0, capable: 1.0}, 1.0, pgr(qs, qw, qs)),
    ]
    rq = qw + share * (qs - qw)
    rc = None if cs is None or cw is None else share * cs + (1 - share) * cw
    positive = qs - qw > EPS
    rows.append(
        Row(
            "random (same share)",
            n,
            rq,
            rc,
            {efficient: 1 - share, capable: share},
            share,
            pgr(rq, qw, qs),
            0.5 if positive else None,
            0.5 if positive else None,
            0.8 if positive else None,
        )
    )
    curve = oracle_curve(strong, weak, strong_cost=strong_cost, weak_cost=weak_cost)
    best = next(p for p in curve if p.quality >= curve[-1].quality - EPS)
    rows.append(
        Row(
            "oracle",
            n,
            best.quality,
            best.cost_usd,
            {efficient: 1 - best.share, capable: best.share},
            best.share,
            pgr(best.quality, qw, qs),
            apgr(curve, qw, qs),
            cpt(curve, 0.5, qw, qs),
            cpt(curve, 0.8, qw, qs),
        )
    )
    return rows


# -- any number of targets --------------------------------------------------------------------


def evaluate_choices(
    choices: Sequence[str],
    quality: Mapping[str, Sequence[float]],
    cost: Mapping[str, Sequence[float] | None] | None = None,
    *,
    name: str = "router",
    extra_cost_usd: float = 0.0,
) -> Row:
    """Quality, share per target and cost of per-item choices among any number of targets.

    Args:
        choices: Per item, the chosen target.
        quality: Per target, per-item outcome.
        cost: Per target, per-item cost (``None`` or missing: unknown, so the total is unknown
            whenever that target is chosen).
        name: The row's name.
        extra_cost_usd: Cost added to the total (the router's own model calls).

    Raises:
        KeyError: A choice names a target without outcomes.
    """
    n = len(choices)
    check_lengths(n)
    cost = cost or {}
    q = 0.0
    c: float | None = extra_cost_usd
    counts: dict[str, int] = {t: 0 for t in quality}
    for i, t in enumerate(choices):
        if t not in quality:
            raise KeyError(f"no outcomes for target {t!r}")
        counts[t] += 1
        q += float(quality[t][i])
        tc = cost.get(t)
        c = None if c is None or tc is None else c + tc[i]
    return Row(name, n, q / n, c, {t: k / n for t, k in counts.items()})


def target_baselines(
    quality: Mapping[str, Sequence[float]],
    cost: Mapping[str, Sequence[float] | None] | None = None,
) -> list[Row]:
    """Always-each-target, uniform random (expected) and oracle rows for any number of targets.

    The oracle picks, per item, the best outcome; among equal outcomes the cheapest target
    (when costs are known), else the first in ``quality``'s order.
    """
    targets = list(quality)
    if not targets:
        raise ValueError("no targets")
    n = len(quality[targets[0]])
    check_lengths(n, *quality.values())
    cost = cost or {}
    rows = [evaluate_choices([t] * n, quality, cost, name=f"always {t}") for t in targets]
    costs = [r.cost_usd for r in rows]
    rows.append(
        Row(
            "random (uniform)",
            n,
            math.fsum(r.quality for r in rows) / len(rows),
            None if any(c is None for c in costs) else math.fsum(c for c in costs if c is not None) / len(rows),
            {t: 1 / len(targets) for t in targets},
        )
    )
    picks: list[str] = []
    for i in range(n):

        def key(t: str, i: int = i) -> tuple[float, float, int]:
            tc = cost.get(t)
            return (-float(quality[t][i]), tc[i] if tc is not None else 0.0, targets.index(t))

        picks.append(min(targets, key=key))
    rows.append(evaluate_choices(picks, quality, cost, name="oracle"))
    return rows
