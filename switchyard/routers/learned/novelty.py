"""How far a request is from a learned router's training data, and what to do beyond a bound.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily.

At training time (:func:`fit`) a sample of the training rows, in the checkpoint's own
standardise → PCA space, is kept as reference points. A request's **novelty** is the mean
Euclidean distance from its projected features to its ``k`` nearest reference points. The
**bound** is a high percentile (default the 99th) of the same measure over held-out training
rows (rows not in the reference sample; leave-one-out when every row is a reference): about 1 %
of prompts like the training data fall beyond it, while prompts of a kind the router never saw
fall beyond it far more often — there the router's score means little.

A route's ``novelty: {action: abstain | capable | efficient}`` says what happens beyond the
bound: ``abstain`` (inside a ``cascade`` the next stage decides; alone the route serves the
router's own choice), or a fixed safe tier. The decision record always carries the distance
and the bound when the checkpoint has them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from switchyard._dataclass import dataclass

NoveltyAction = Literal["abstain", "capable", "efficient"]


class NoveltySpec(BaseModel):
    """The ``novelty:`` block of a learned route.

    Attributes:
        action: Beyond the checkpoint's bound: ``abstain`` (a cascade's next stage decides),
            ``capable`` or ``efficient`` (that tier serves).
        bound_scale: Multiplies the checkpoint's bound (above 1: fire less often).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    action: NoveltyAction = "abstain"
    bound_scale: float = 1.0


@dataclass(slots=True)
class Novelty:
    """Reference points and the bound, as stored in a checkpoint.

    Attributes:
        points: ``[n, P]`` reference rows in the checkpoint's PCA space.
        k: Neighbours the distance averages over.
        bound: The distance beyond which a request counts as novel.
        percentile: The percentile of held-out training distances ``bound`` is.
    """

    points: Any
    k: int
    bound: float
    percentile: float = 99.0

    def distance(self, z: Any) -> Any:
        """Mean distance of each projected row ``[n, P]`` to its ``k`` nearest reference points."""
        return knn_distance(z, self.points, self.k)

    def meta(self) -> dict[str, Any]:
        """What ``router.json`` records."""
        return {
            "k": self.k,
            "bound": self.bound,
            "percentile": self.percentile,
            "n": int(self.points.shape[0]),
            "measure": "mean euclidean distance to the k nearest training rows (PCA space)",
        }


def knn_distance(z: Any, points: Any, k: int, *, exclude_self: bool = False) -> Any:
    """Mean Euclidean distance of rows ``z`` to their ``k`` nearest ``points`` (chunked)."""
    import numpy as np

    z = np.asarray(z, np.float64)
    p = np.asarray(points, np.float64)
    sq = (p * p).sum(axis=1)
    k_eff = max(1, min(k, p.shape[0] - (1 if exclude_self else 0)))
    out = np.empty(z.shape[0])
    for start in range(0, z.shape[0], 512):
        chunk = z[start : start + 512]
        d2 = (chunk * chunk).sum(axis=1, keepdims=True) - 2.0 * chunk @ p.T + sq[None, :]
        d = np.sqrt(np.maximum(d2, 0.0))
        if exclude_self:  # the row itself is its own nearest point at distance ~0
            d[np.arange(len(chunk)), np.arange(start, start + len(chunk))] = np.inf
        near = np.partition(d, k_eff - 1, axis=1)[:, :k_eff]
        out[start : start + len(chunk)] = near.mean(axis=1)
    return out


def fit(
    z: Any, *, k: int = 10, max_points: int = 4096, holdout: float = 0.2, percentile: float = 99.0, seed: int = 0
) -> Novelty:
    """Reference points and bound from the projected training rows ``z`` ``[n, P]``.

    ``holdout`` of the rows (at most 2,000) are held out to set the bound; the reference points
    are a sample of at most ``max_points`` of the rest. With fewer than 50 rows every row is a
    reference and the bound comes from leave-one-out distances.
    """
    import numpy as np

    z = np.asarray(z, np.float32)
    n = z.shape[0]
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    if n < 50:
        bound = float(np.percentile(knn_distance(z, z, k, exclude_self=True), percentile))
        return Novelty(z.copy(), k, bound, percentile)
    n_hold = min(2000, max(10, int(n * holdout)))
    held, ref = order[:n_hold], order[n_hold:][:max_points]
    bound = float(np.percentile(knn_distance(z[held], z[ref], k), percentile))
    return Novelty(z[ref].copy(), k, bound, percentile)
