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
        utilities: Per target, in route order (empty in threshold mode).
    """

    candidates: tuple[str, ...]
    score: float
    utilities: dict[str, float]


class UtilityPolicy:
    """Chooses among targets from predicted success probabilities.

    Args:
        targets: Target names in route order.
        costs: Relative cost per target (same order).
        lam: λ in ``[0, 1]`` (ignored when ``threshold`` is set).
        threshold: Two targets only: capable iff ``score >= threshold``.
        capable: The target that counts as capable (default: the costliest, first on ties).
    """

    def __init__(
        self,
        targets: Sequence[str],
        costs: Sequence[float],
        *,
        lam: float = 0.75,
        threshold: float | None = None,
        capable: str | None = None,
    ) -> None:
        if len(targets) != len(costs) or len(targets) < 2:
            raise ValueError("need at least two targets, each with a cost")
        self.targets = tuple(targets)
        lo, hi = min(costs), max(costs)
        span = hi - lo
        self.normcost = tuple(0.0 if span <= 0 else (c - lo) / span for c in costs)
        self.lam = lam
        self.threshold = threshold
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

    def choose(self, probs: Sequence[float], *, threshold: float | None = None) -> Choice:
        """Orders the targets for predicted success ``probs`` (route order).

        Args:
            probs: Predicted success per target.
            threshold: Overrides the configured threshold for this decision (a controlled
                route's current value).
        """
        score = self.score(probs)
        threshold = self.threshold if threshold is None else threshold
        if threshold is not None:
            first = self.capable if score >= threshold else self.efficient
            rest = tuple(t for t in self.targets if t != first)
            return Choice((first, *rest), score, {})
        utilities = {
            t: self.lam * float(p) - (1.0 - self.lam) * c
            for t, p, c in zip(self.targets, probs, self.normcost, strict=True)
        }
        order = sorted(range(len(self.targets)), key=lambda i: (-utilities[self.targets[i]], self.normcost[i], i))
        return Choice(tuple(self.targets[i] for i in order), score, utilities)

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
