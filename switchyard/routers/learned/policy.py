"""The λ-utility decision over predicted success, and the per-task decision cache.

Layer: ``routers`` — pure Python.

For targets ``t`` with predicted success ``p_t`` and costs ``c_t`` min-max normalised to
``[0, 1]`` across the route's targets (all equal → all 0)::

    utility_t = λ · p_t - (1 - λ) · normcost_t

Candidates are ordered by utility, ties to the cheaper target. ``λ = 1`` ignores cost, ``λ = 0``
always picks the cheapest. With two targets the normalised costs are 0 (efficient) and 1
(capable), so the rule is "capable iff ``λ · (p_cap - p_eff) > 1 - λ``", i.e. capable iff

    score = (1 + p_cap - p_eff) / 2  >  1 / (2λ)

``score`` (in ``[0, 1]``, "how much more likely the capable model is to succeed") is what
``Decision.score`` carries, so ``switchyard eval --sweep`` and ``calibrate`` can sweep it; a route
that sets ``threshold`` instead of ``lambda`` routes to capable iff ``score >= threshold``.

**Tolerance (the cost-aware policy).** With ``tolerance: τ`` the route serves the *cheapest*
target whose P(success) is within ``τ`` of the best target's::

    first = cheapest t with  p_t >= max_u p_u - τ          (ties: route order)

then the others by P(success), highest first. ``τ = 0`` buys the best predicted quality at any
price; ``τ = 0.05`` accepts five points of predicted success to save money. Because ``τ`` is a
difference of probabilities it means the same on every traffic mix only when the probabilities
are calibrated, so this rule reads the calibrated P(success) (the checkpoint's
``calibration.json``); ``score`` — what thresholds, sweeps and live control rank by — stays the
head's own routing gain.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Sequence

from switchyard._dataclass import dataclass


@dataclass(slots=True, frozen=True)
class Choice:
    """A policy's verdict.

    Attributes:
        candidates: Targets, best first.
        score: ``(1 + p_capable - p_efficient) / 2``.
        utilities: Per target, in route order (empty in threshold and tolerance mode).
        margin: Tolerance mode: how far the nearest other target is from the tolerance's cut
            (the decision flips when it crosses); ``None`` otherwise.
    """

    candidates: tuple[str, ...]
    score: float
    utilities: dict[str, float]
    margin: float | None = None


class UtilityPolicy:
    """Chooses among targets from predicted success probabilities.

    Args:
        targets: Target names in route order.
        costs: Relative cost per target (same order).
        lam: λ in ``[0, 1]`` (ignored when ``threshold`` is set).
        threshold: Two targets only: capable iff ``score >= threshold``.
        capable: The target that counts as capable (default: the costliest, first on ties).
        tolerance: The cost-aware rule: the cheapest target whose P(success) is within this of
            the best (``None``: λ or threshold). Not together with ``threshold``.
    """

    def __init__(
        self,
        targets: Sequence[str],
        costs: Sequence[float],
        *,
        lam: float = 0.75,
        threshold: float | None = None,
        capable: str | None = None,
        tolerance: float | None = None,
    ) -> None:
        if len(targets) != len(costs) or len(targets) < 2:
            raise ValueError("need at least two targets, each with a cost")
        self.targets = tuple(targets)
        lo, hi = min(costs), max(costs)
        span = hi - lo
        self.normcost = tuple(0.0 if span <= 0 else (c - lo) / span for c in costs)
        self.lam = lam
        self.threshold = threshold
        self.tolerance = tolerance
        if tolerance is not None and threshold is not None:
            raise ValueError("tolerance and threshold are two different rules; set one")
        self.capable = capable or self.targets[max(range(len(costs)), key=lambda i: (costs[i], -i))]
        others = [i for i in range(len(costs)) if self.targets[i] != self.capable]
        self.efficient = self.targets[min(others, key=lambda i: (costs[i], i))]
        if threshold is not None and len(self.targets) != 2:
            raise ValueError("threshold works with exactly two targets; use lambda for more")

    def boundary(self) -> float:
        """The score at which a two-target decision flips: ``threshold``, else ``1 / (2λ)``."""
        if self.threshold is not None:
            return self.threshold
        return float("inf") if self.lam <= 0 else 1.0 / (2.0 * self.lam)

    def score(self, probs: Sequence[float]) -> float:
        """``(1 + p_capable - p_efficient) / 2``."""
        p = dict(zip(self.targets, probs, strict=True))
        return 0.5 * (1.0 + float(p[self.capable]) - float(p[self.efficient]))

    def choose(
        self, probs: Sequence[float], *, threshold: float | None = None, calibrated: Sequence[float] | None = None
    ) -> Choice:
        """Orders the targets for predicted success ``probs`` (route order).

        Args:
            probs: Predicted success per target (the head's own: ``score`` reads these).
            threshold: Overrides the configured threshold for this decision (a controlled
                route's current value).
            calibrated: The calibrated probabilities, when the checkpoint has a calibration:
                the λ and tolerance rules read them (default: ``probs``).
        """
        score = self.score(probs)
        threshold = self.threshold if threshold is None else threshold
        if threshold is not None:
            first = self.capable if score >= threshold else self.efficient
            rest = tuple(t for t in self.targets if t != first)
            return Choice((first, *rest), score, {})
        p_use = [float(p) for p in (probs if calibrated is None else calibrated)]
        if self.tolerance is not None:
            return self._within_tolerance(p_use, score, self.tolerance)
        utilities = {
            t: self.lam * p - (1.0 - self.lam) * c for t, p, c in zip(self.targets, p_use, self.normcost, strict=True)
        }
        order = sorted(range(len(self.targets)), key=lambda i: (-utilities[self.targets[i]], self.normcost[i], i))
        return Choice(tuple(self.targets[i] for i in order), score, utilities)

    def _within_tolerance(self, p: list[float], score: float, tolerance: float) -> Choice:
        """The cheapest target within ``tolerance`` of the best P(success), then the rest by P."""
        cut = max(p) - tolerance
        n = len(self.targets)
        first = min((i for i in range(n) if p[i] >= cut), key=lambda i: (self.normcost[i], i))
        rest = sorted((i for i in range(n) if i != first), key=lambda i: (-p[i], self.normcost[i], i))
        margin = min(abs(p[i] - cut) for i in range(n) if i != first) if n > 1 else 0.0
        return Choice(tuple(self.targets[i] for i in (first, *rest)), score, {}, margin)

    def fail_open(self) -> tuple[str, ...]:
        """Capable first, then the rest in route order."""
        return (self.capable, *(t for t in self.targets if t != self.capable))


class TaskCache:
    """A bounded LRU from task text to predicted probabilities.

    Keys are keyed BLAKE2b digests with a per-process random key, so no task text is retained
    and digests mean nothing outside this process. Capacity 0 disables caching.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._salt = os.urandom(16)
        self._items: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()

    def key(self, text: str) -> bytes:
        """The digest ``text`` is stored under."""
        return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), key=self._salt, digest_size=16).digest()

    def get(self, key: bytes) -> tuple[float, ...] | None:
        """Cached probabilities (refreshing their recency), or ``None``."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: bytes, probs: tuple[float, ...]) -> None:
        """Stores ``probs``, evicting the least recently used entry beyond capacity."""
        if self.capacity <= 0:
            return
        self._items[key] = probs
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
