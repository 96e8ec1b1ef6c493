"""Operating points that travel: thresholds picked on the training rows, checked on every slice.

Layer: ``probe``.

A threshold is only useful if the capable share it gives on new data is near the share it gave
where it was chosen. For each wanted capable share this module picks the score threshold on
the training rows (one global threshold, and one per benchmark when the rows name benchmarks),
then reports on every held-out slice and every benchmark in it the share that threshold really
sends to the capable model and the quality it keeps — the drift a user should expect. It also
prints the curve (capable share → quality, PGR) so the user picks a point instead of trusting a
default λ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.calibrate import calibrate_share

SHARES = (0.2, 0.3, 0.4, 0.5)
"""Capable shares whose thresholds are reported."""


@dataclass(slots=True)
class Scored:
    """Scores and outcomes of one slice (``strong``/``weak`` may hold NaN for unknown)."""

    scores: Any
    groups: list[str]
    strong: Any
    weak: Any


@dataclass(slots=True)
class PointCheck:
    """A threshold applied to one slice (or one group of it)."""

    slice: str
    group: str
    n: int
    share: float
    quality_ratio: float | None
    pgr: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "slice": self.slice,
            "group": self.group,
            "n": self.n,
            "share": self.share,
            "quality_ratio": self.quality_ratio,
            "pgr": self.pgr,
        }


@dataclass(slots=True)
class OperatingPoint:
    """One wanted capable share, its thresholds and what they give on each slice."""

    target_share: float
    threshold: float
    per_group: dict[str, float] = field(default_factory=dict)
    checks: list[PointCheck] = field(default_factory=list)
    group_checks: list[PointCheck] = field(default_factory=list)

    def drift(self, per_group: bool = False) -> float:
        """Largest |share - target| over the benchmarks of every slice."""
        checks = self.group_checks if per_group else self.checks
        rows = [c for c in checks if c.group != "*"] or checks
        return max((abs(c.share - self.target_share) for c in rows), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "target_share": self.target_share,
            "threshold": self.threshold,
            "per_benchmark_thresholds": self.per_group,
            "drift": self.drift(),
            "drift_per_benchmark_thresholds": self.drift(per_group=True) if self.per_group else None,
            "checks": [c.to_dict() for c in self.checks],
            "per_benchmark_checks": [c.to_dict() for c in self.group_checks],
        }


def threshold_for(scores: Any, share: float) -> float:
    """The threshold sending ``share`` of ``scores`` to capable (capable iff score >= threshold).

    The same choice ``switchyard calibrate --capable-share`` makes on these scores (ties kept
    together, the threshold between two scores), so a printed operating point and a calibrated
    route agree.
    """
    values = [float(v) for v in scores]
    return calibrate_share(values, share).threshold if values else 1.0


def _check(name: str, group: str, picks: Any, strong: Any, weak: Any) -> PointCheck:
    import numpy as np

    keep = ~(np.isnan(strong) | np.isnan(weak))
    p, s, w = picks[keep], strong[keep], weak[keep]
    n = int(keep.sum())
    if n == 0:
        return PointCheck(name, group, 0, 0.0, None, None)
    quality = float(np.where(p, s, w).mean())
    qs, qw = float(s.mean()), float(w.mean())
    return PointCheck(
        name,
        group,
        n,
        float(p.mean()),
        quality / qs if qs else None,
        (quality - qw) / (qs - qw) if qs > qw else None,
    )


def operating_points(
    train: Scored, slices: dict[str, Scored], shares: Sequence[float] = SHARES
) -> list[OperatingPoint]:
    """Thresholds for ``shares`` picked on ``train``, applied to every slice and its groups."""
    import numpy as np

    groups = sorted(set(train.groups))
    out: list[OperatingPoint] = []
    for share in shares:
        t = threshold_for(train.scores, share)
        per_group = (
            {g: threshold_for(train.scores[np.asarray(train.groups) == g], share) for g in groups}
            if len(groups) > 1
            else {}
        )
        point = OperatingPoint(share, t, per_group)
        for name, sc in slices.items():
            picks = np.asarray(sc.scores) >= t
            point.checks.append(_check(name, "*", picks, sc.strong, sc.weak))
            labels = np.asarray(sc.groups)
            group_t = np.array([per_group.get(g, t) for g in sc.groups]) if per_group else None
            for g in sorted(set(sc.groups)):
                mask = labels == g
                if len(set(sc.groups)) > 1:
                    point.checks.append(_check(name, g, picks[mask], sc.strong[mask], sc.weak[mask]))
                if group_t is not None:
                    own = np.asarray(sc.scores)[mask] >= group_t[mask]
                    point.group_checks.append(_check(name, g, own, sc.strong[mask], sc.weak[mask]))
        out.append(point)
    return out


def curve_lines(sc: Scored, steps: int = 10) -> list[str]:
    """``capable share → quality ratio, PGR`` at ``1/steps`` intervals of the wanted share.

    Each row's threshold is :func:`threshold_for`'s (ties kept together), and its share and
    quality are what that threshold really gives, so a row can be copied into a route as is.
    """
    import numpy as np

    keep = ~(np.isnan(sc.strong) | np.isnan(sc.weak))
    s, strong, weak = np.asarray(sc.scores)[keep], sc.strong[keep], sc.weak[keep]
    if not len(s):
        return []
    lines = [f"  {'capable':>8} {'threshold':>10} {'quality':>9} {'PGR':>7}"]
    for i in range(steps + 1):
        t = threshold_for(s, i / steps) if i else float("inf")
        c = _check("", "", s >= t, strong, weak)
        lines.append(
            f"  {c.share:>8.0%} {t:>10.3f} {c.quality_ratio or 0:>9.3f} {'-' if c.pgr is None else f'{c.pgr:.3f}':>7}"
        )
    return lines


def render_points(points: list[OperatingPoint]) -> list[str]:
    """The operating-point table: threshold, then per slice and benchmark the share it gives."""
    lines: list[str] = []
    for p in points:
        lines.append(
            f"target capable share {p.target_share:.0%}: threshold {p.threshold:.3f} "
            f"(drift across benchmarks {p.drift():.0%}"
            + (f"; with per-benchmark thresholds {p.drift(per_group=True):.0%})" if p.per_group else ")")
        )
        for c in p.checks:
            where = c.slice if c.group == "*" else f"{c.slice}/{c.group}"
            q = "-" if c.quality_ratio is None else f"{c.quality_ratio:.3f}"
            lines.append(f"    {where:<24} n={c.n:<6} capable {c.share:>6.1%}  quality/always-capable {q}")
    return lines
