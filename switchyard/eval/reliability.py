"""Reliability of predicted probabilities: equal-width bins and the expected calibration error.

Layer: ``eval`` — pure Python.

For predictions ``p_i`` of a 0/1 event ``y_i`` put into ``bins`` equal-width bins of ``[0, 1]``
(a prediction of exactly 1 falls in the last bin), the expected calibration error is the
share-weighted gap between each bin's mean prediction and its observed rate::

    ECE = sum_b (n_b / n) * |mean(p in b) - mean(y in b)|

A well-calibrated ``P(success)`` has ECE near 0: of the requests it gives 0.8, about 80 % succeed.
``switchyard eval`` prints the table of bins (the reliability diagram as text) next to APGR, and
``train-probe`` prints it per held-out slice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field

from switchyard._dataclass import dataclass


@dataclass(slots=True, frozen=True)
class Bin:
    """One bin of a reliability diagram.

    Attributes:
        lo: Lower edge.
        hi: Upper edge.
        n: Predictions in the bin.
        mean_p: Their mean prediction (``None`` when empty).
        rate: Their observed success rate (``None`` when empty).
    """

    lo: float
    hi: float
    n: int
    mean_p: float | None
    rate: float | None


@dataclass(slots=True, frozen=True)
class Reliability:
    """A reliability diagram and its summary numbers.

    Attributes:
        n: Predictions scored.
        ece: Expected calibration error (``nan`` when ``n`` is 0).
        mean_p: Mean prediction.
        rate: Observed success rate.
        brier: Mean squared error of the predictions.
        bins: The bins, lowest first.
    """

    n: int
    ece: float
    mean_p: float
    rate: float
    brier: float
    bins: tuple[Bin, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (``switchyard eval --json``)."""
        return {
            "n": self.n,
            "ece": self.ece,
            "mean_p": self.mean_p,
            "rate": self.rate,
            "brier": self.brier,
            "bins": [{"lo": b.lo, "hi": b.hi, "n": b.n, "mean_p": b.mean_p, "rate": b.rate} for b in self.bins],
        }


def reliability(probs: Sequence[float], outcomes: Sequence[float], *, bins: int = 10) -> Reliability:
    """Bins ``probs`` against 0/1 ``outcomes``.

    Args:
        probs: Predicted probabilities in ``[0, 1]``.
        outcomes: What happened (1 success, 0 not), same length.
        bins: Equal-width bins (at least 1).

    Raises:
        ValueError: Lengths differ, ``bins < 1``, a probability outside ``[0, 1]`` or an
            outcome other than 0/1.

    Example:
        >>> r = reliability([0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0], bins=2)
        >>> round(r.ece, 3)
        0.25
    """
    if len(probs) != len(outcomes):
        raise ValueError(f"{len(probs)} probabilities but {len(outcomes)} outcomes")
    if bins < 1:
        raise ValueError("bins must be >= 1")
    count = [0] * bins
    sum_p = [0.0] * bins
    sum_y = [0.0] * bins
    brier = 0.0
    for p, y in zip(probs, outcomes, strict=True):
        p, y = float(p), float(y)
        if not (0.0 <= p <= 1.0) or math.isnan(p):
            raise ValueError(f"probability {p!r} outside [0, 1]")
        if y not in (0.0, 1.0):
            raise ValueError(f"outcome {y!r} is not 0 or 1")
        b = min(int(p * bins), bins - 1)
        count[b] += 1
        sum_p[b] += p
        sum_y[b] += y
        brier += (p - y) ** 2
    n = sum(count)
    table = tuple(
        Bin(
            b / bins,
            (b + 1) / bins,
            count[b],
            sum_p[b] / count[b] if count[b] else None,
            sum_y[b] / count[b] if count[b] else None,
        )
        for b in range(bins)
    )
    if not n:
        return Reliability(0, math.nan, math.nan, math.nan, math.nan, table)
    ece = sum(abs(sum_p[b] - sum_y[b]) for b in range(bins)) / n
    return Reliability(n, ece, sum(sum_p) / n, sum(sum_y) / n, brier / n, table)


def render(rel: Reliability, title: str) -> list[str]:
    """The reliability diagram as text: one line per non-empty bin, then ECE."""
    lines = [
        f"{title}: ECE {rel.ece:.3f}, Brier {rel.brier:.3f} (n {rel.n}; mean P {rel.mean_p:.3f}, rate {rel.rate:.3f})"
    ]
    lines.append("  P(success) bin | n | mean P | observed | gap")
    for b in rel.bins:
        if not b.n or b.mean_p is None or b.rate is None:
            continue
        bar = "#" * round(20 * b.rate)
        lines.append(
            f"  [{b.lo:.1f}, {b.hi:.1f}) | {b.n} | {b.mean_p:.3f} | {b.rate:.3f} | {b.rate - b.mean_p:+.3f} {bar}"
        )
    return lines


__all__ = ["Bin", "Reliability", "reliability", "render"]
