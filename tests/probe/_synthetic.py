"""Small synthetic training data shared by the probe tests."""

from __future__ import annotations

from typing import Any

from switchyard.protocol.features import FeatureRecipe

RECIPE = FeatureRecipe(source="test", model="toy", layers=(0, 1), pooling=("mean",), hidden_size=12)


def data(n: int = 300, seed: int = 0) -> tuple[Any, Any]:
    """Features ``[n, 24]`` and labels ``[n, 2]`` (efficient, capable) that depend on them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 24)).astype(np.float32)
    x[:, :2] *= 3.0  # the signal directions carry the most variance, so PCA keeps them
    a, b = x[:, 0] / 3.0, x[:, 1] / 3.0
    strong = (rng.random(n) < 1 / (1 + np.exp(-(1.0 + 2 * a)))).astype(np.float32)
    weak = (rng.random(n) < 1 / (1 + np.exp(-(2 * a + b - 0.5)))).astype(np.float32)
    return x, np.stack([weak, strong], axis=1)
