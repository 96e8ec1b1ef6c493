"""A matrix-factorisation router in the style of RouteLLM's ``mf``, trained on pairwise outcomes.

Layer: ``probe`` — numpy (and scikit-learn for the shared feature transform, lazily).

RouteLLM scores a model ``m`` on a query embedding ``q`` as ``δ(m, q) = v_mᵀ (P q) + b_m`` —
a learned projection ``P`` of the query into a rank-``r`` space, dotted with a per-model vector —
and models "``m`` does better than ``m'``" as ``sigmoid(δ(m, q) - δ(m', q))``, fitted on
comparisons: here the rows whose two outcomes differ (a tie says nothing about which model is
better, so it is left out, as RouteLLM leaves out tied battles). Graded outcomes work as they
are: only their order is used.

For two models the trained factors fold into one linear logit over the whitened PCA features,
``(v_second - v_first)ᵀ P z + (b_second - b_first)``, stored as a ``prefill_probe`` checkpoint
with the ``pairwise_sigmoid`` link, so serving stays numpy-only. The route's score is then
P(capable does better than efficient).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.features import FeatureRecipe
from switchyard.routers.learned.checkpoint import Checkpoint


@dataclass(slots=True)
class MFParams:
    """Settings of :func:`train_mf`.

    Attributes:
        pca_dim: Principal components of the features (whitened) the projection reads.
        rank: Width of the shared query/model space.
        l2: Weight decay on every factor.
        steps: Full-batch Adam steps.
        lr: Adam learning rate.
        seed: Seed of the initialisation and the PCA solver.
    """

    pca_dim: int = 32
    rank: int = 16
    l2: float = 1e-2
    steps: int = 400
    lr: float = 0.05
    seed: int = 0


class MatrixFactorisation:
    """``P(second beats first | q) = sigmoid((v_1 - v_0)ᵀ P q + b_1 - b_0)``, fitted by Adam."""

    def __init__(self, params: MFParams | None = None) -> None:
        self.params = params or MFParams()
        self.p: Any = None
        self.v: Any = None
        self.b: Any = None

    def fit(self, z: Any, second_better: Any) -> MatrixFactorisation:
        """Fits on comparisons: features ``[n, d]`` and 1 where the second model did better."""
        import numpy as np

        prm = self.params
        y = np.asarray(second_better, dtype=np.float64)
        rng = np.random.default_rng(prm.seed)
        d = z.shape[1]
        params = [rng.normal(0, 1 / np.sqrt(d), (prm.rank, d)), rng.normal(0, 0.1, (2, prm.rank)), np.zeros(2)]
        first = [np.zeros_like(t) for t in params]
        second = [np.zeros_like(t) for t in params]
        for step in range(1, prm.steps + 1):
            p, v, b = params
            h = z @ p.T
            dv = v[1] - v[0]
            prob = 1 / (1 + np.exp(-(h @ dv + b[1] - b[0])))
            g = (prob - y) / len(y)  # d(mean log-loss)/d(logit)
            g_dv = h.T @ g
            grads = (
                np.outer(dv, g @ z) + prm.l2 * p,
                np.stack([-g_dv, g_dv]) + prm.l2 * v,
                np.array([-g.sum(), g.sum()]),
            )
            for i, grad in enumerate(grads):
                first[i] = 0.9 * first[i] + 0.1 * grad
                second[i] = 0.999 * second[i] + 0.001 * grad**2
                m_hat = first[i] / (1 - 0.9**step)
                v_hat = second[i] / (1 - 0.999**step)
                params[i] = params[i] - prm.lr * m_hat / (np.sqrt(v_hat) + 1e-8)
        self.p, self.v, self.b = params
        return self

    def folded(self) -> tuple[Any, float]:
        """The logit as one linear map: ``(weight [d], bias)``."""
        dv = self.v[1] - self.v[0]
        return dv @ self.p, float(self.b[1] - self.b[0])

    def score(self, z: Any) -> Any:
        """P(second beats first) for features ``[n, d]``."""
        import numpy as np

        w, b = self.folded()
        return 1 / (1 + np.exp(-(z @ w + b)))


def train_mf(
    x: Any, y: Any, names: Sequence[str], recipe: FeatureRecipe, params: MFParams | None = None
) -> tuple[Checkpoint, dict[str, float]]:
    """Fits the feature transform and the factorisation; returns the checkpoint and its facts.

    Args:
        x: ``[n, D]`` features.
        y: ``[n, 2]`` outcomes (binary or graded), ``NaN`` where unknown.
        names: The two head names; the logit is "the second does better than the first".
        recipe: The features' recipe.
        params: Settings.

    Raises:
        ValueError: Not two heads, or no row where one model did better than the other (each way).
    """
    import numpy as np

    from switchyard.probe.sk_train import fit_whitened_pca, linear_checkpoint

    prm = params or MFParams()
    if len(names) != 2:
        raise ValueError(f"the mf router compares two models, got {len(names)} --map targets")
    y = np.asarray(y, dtype=np.float64)
    differ = ~np.isnan(y).any(axis=1) & (y[:, 0] != y[:, 1])
    second_better = (y[differ, 1] > y[differ, 0]).astype(np.float64)
    wins = int(second_better.sum())
    if wins < 1 or len(second_better) - wins < 1:
        raise ValueError(
            f"the mf router needs rows where each model did better than the other; {names[1]} did better "
            f"on {wins}, {names[0]} on {len(second_better) - wins}"
        )
    transform = fit_whitened_pca(x, prm.pca_dim, prm.seed)
    z = transform.apply(np.asarray(x, dtype=np.float32)).astype(np.float64)
    mf = MatrixFactorisation(prm).fit(z[differ], second_better)
    weight, bias = mf.folded()
    cp = linear_checkpoint(names, recipe, transform, weight[None, :], [bias], "pairwise_sigmoid")
    facts = {"comparisons": float(len(second_better)), f"{names[1]}_better": float(wins), "rank": float(prm.rank)}
    return cp, facts
