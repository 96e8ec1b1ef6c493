"""``type: knn`` — k nearest training prompts vote on which target succeeds.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily.

The baseline a learned probe must beat: the same features, the same standardise → PCA
transform, the same λ-utility policy, but the success probabilities are the (optionally
distance-weighted) mean outcomes of the ``k`` nearest training prompts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from switchyard.routers.base import BuildContext, Router
from switchyard.routers.learned.base import LearnedSpec


class KnnSpec(LearnedSpec):
    """``type: knn``.

    Attributes:
        k: Neighbours (default: the checkpoint's, tuned by ``train-probe --router knn``).
        weighting: ``distance`` (1/distance) or ``uniform`` (default: the checkpoint's).
    """

    kind = "knn"
    type: Literal["knn"]
    k: int | None = Field(default=None, gt=0)
    weighting: Literal["distance", "uniform"] | None = None

    def build(self, ctx: BuildContext) -> Router:
        extra: dict[str, object] = {}
        if self.k is not None:
            extra["k"] = self.k
        if self.weighting is not None:
            extra["weighting"] = self.weighting
        return self.build_learned(ctx, "knn", "knn", **extra)
