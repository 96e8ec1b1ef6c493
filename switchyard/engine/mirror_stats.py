"""Shadow mode's predicted saving, corrected by what mirrored requests measured.

Layer: ``engine`` — pure Python (no numpy); :mod:`switchyard.engine.experiment_stats` calls it.

A shadow record's ``would_cost_usd`` prices the baseline's tokens at the chosen target's price:
right only when the chosen target writes as much as the baseline. A mirrored request
(``details.mirror``, :mod:`switchyard.engine.mirror`) was also sent to the chosen target, so
for it both the priced estimate and the real cost are known. Per route:

* the **cost ratio** ``R`` = Σ mirrored cost / Σ their priced estimates, over the mirrored
  sessions' requests (a ratio of sums: requests weigh by their cost);
* a session's corrected would-be cost = the requests the baseline would have served anyway
  (``would_select`` is what served: exact) + its routing cost + ``R`` times the priced estimates of
  the requests routed elsewhere;
* predicted saving of a session = what the baseline's answers cost it (its mirrors' cost left
  out: they would not exist once routed) minus its corrected would-be cost.

The 95 % interval is a percentile bootstrap over sessions, stratified (mirrored sessions
resampled among themselves, the rest among themselves, so every resample has as many mirrored
sessions as the log): it carries the ratio's uncertainty — what the few mirrored sessions can
say — and the sessions' own spread. Without a mirrored session, the estimate is the uncorrected
one (``basis: equal_verbosity``) with its normal interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Protocol

from switchyard.protocol.intervals import percentile_interval

RESAMPLES = 1000
"""Bootstrap resamples (fewer, down to 200, when there are so many sessions that 1,000 would
take more than a million session draws: about 0.2 s)."""


class ShadowSession(Protocol):
    """What one shadow session's records add up to (:mod:`switchyard.engine.experiment_stats`)."""

    @property
    def cost(self) -> float:
        """Everything the session spent (answers, routing, mirrors)."""

    @property
    def mirror(self) -> float:
        """What its mirror calls cost."""

    @property
    def would_same(self) -> float:
        """Would-be cost known exactly: requests whose choice is what served, plus routing."""

    @property
    def would_other(self) -> float:
        """Priced estimates of the requests whose choice was another target."""

    @property
    def pair_measured(self) -> float:
        """Real cost of its answered mirrors."""

    @property
    def pair_estimate(self) -> float:
        """Priced estimates of the same requests."""


class _Columns:
    """One stratum's sessions as columns, so that a resample's sums run in C (``itemgetter``)."""

    def __init__(self, sessions: Sequence[ShadowSession]) -> None:
        self.size = len(sessions)
        self.base = [s.cost - s.mirror for s in sessions]  # the baseline's answers (mirrors left out)
        self.fixed = [b - s.would_same for b, s in zip(self.base, sessions, strict=True)]
        self.other = [s.would_other for s in sessions]
        self.measured = [s.pair_measured for s in sessions]
        self.estimate = [s.pair_estimate for s in sessions]

    def sums(self, drawn: list[int] | None = None) -> tuple[float, float, float, float, float]:
        """(Σ base, Σ base - exact would-be part, Σ priced estimates, Σ mirrored cost, Σ their
        estimates) over the ``drawn`` sessions (indices; ``None``: every session once)."""
        columns = (self.base, self.fixed, self.other, self.measured, self.estimate)
        if drawn is None:
            found = [math.fsum(c) for c in columns]
        elif not drawn:
            found = [0.0] * 5
        elif len(drawn) == 1:  # itemgetter of one index returns the item, not a tuple
            found = [c[drawn[0]] for c in columns]
        else:
            pick = itemgetter(*drawn)
            found = [sum(pick(c)) for c in columns]
        return found[0], found[1], found[2], found[3], found[4]


def corrected(sessions: Sequence[ShadowSession], *, seed: int = 0) -> dict[str, Any] | None:
    """The mirror-corrected prediction over a route's shadow sessions, or ``None`` when none of
    them has an answered mirror with a priced estimate.

    Returns:
        ``{predicted_saving_per_session: {n, mean, low, high}, predicted_saved_share,
        predicted_saved_share_interval: {low, high}, cost_ratio: {mean, low, high},
        mirrored_sessions, resamples}``.
    """
    mirrored = _Columns([s for s in sessions if s.pair_estimate > 0])
    rest = _Columns([s for s in sessions if s.pair_estimate <= 0])
    m_base, m_fixed, m_other, measured, estimate = mirrored.sums()
    if estimate <= 0:
        return None
    r_base, r_fixed, r_other, _, _ = rest.sums()
    n = len(sessions)
    ratio = measured / estimate
    saved, base = m_fixed + r_fixed - ratio * (m_other + r_other), m_base + r_base
    resamples = max(200, min(RESAMPLES, 1_000_000 // max(n, 1)))
    rng = random.Random(seed)
    ratios: list[float] = []
    means: list[float] = []
    shares: list[float] = []
    for _ in range(resamples):
        b1, f1, o1, meas, est = mirrored.sums(rng.choices(range(mirrored.size), k=mirrored.size))
        if est <= 0:  # every drawn mirror estimated at zero: no ratio in this resample
            continue
        b2, f2, o2, _, _ = rest.sums(rng.choices(range(rest.size), k=rest.size))
        r = meas / est
        s_saved, s_base = f1 + f2 - r * (o1 + o2), b1 + b2
        ratios.append(r)
        means.append(s_saved / n)
        if s_base > 0:
            shares.append(s_saved / s_base)
    low, high = percentile_interval(means)
    r_low, r_high = percentile_interval(ratios)
    share_low, share_high = percentile_interval(shares) if shares else (None, None)
    return {
        "predicted_saving_per_session": {"n": n, "mean": saved / n, "low": low, "high": high},
        "predicted_saved_share": saved / base if base > 0 else None,
        "predicted_saved_share_interval": {"low": share_low, "high": share_high},
        "cost_ratio": {"mean": ratio, "low": r_low, "high": r_high},
        "mirrored_sessions": mirrored.size,
        "resamples": len(means),
    }


__all__ = ["RESAMPLES", "ShadowSession", "corrected"]
