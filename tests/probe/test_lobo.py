"""``benchmarks/lobo.py``: the pieces the leave-one-benchmark-out table rests on."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import lobo


def test_fold_pca_keeps_the_spectrum_of_pca_columns_and_whitens() -> None:
    # Columns like lobo_features.py's: PCA components with very different variances. The fold's
    # PCA must find the large-variance directions (a standardising PCA would treat all alike).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 6)) * np.array([10.0, 5.0, 1.0, 0.1, 0.1, 0.1])
    t = lobo._no_scaler_pca(x, 2, 0)
    z = t.apply(x.astype(np.float32)).astype(np.float64)
    np.testing.assert_allclose(np.cov(z.T), np.eye(2), atol=1e-3)
    loadings = np.abs(t.pca_components)
    assert loadings[0].argmax() == 0 and loadings[1].argmax() == 1


def test_centred_removes_each_benchmark_mean_and_keeps_differences_within_it() -> None:
    rng = np.random.default_rng(1)
    z = rng.standard_normal((8, 3)) + np.repeat(np.array([[5.0, 0, 0], [0, -5.0, 0]]), 4, axis=0)
    bench = np.array(["a"] * 4 + ["b"] * 4)
    file = np.array(["f"] * 8)
    c = lobo.centred(z, bench, file)
    for b in ("a", "b"):
        np.testing.assert_allclose(c[bench == b].mean(0), 0.0, atol=1e-12)
        np.testing.assert_allclose(c[bench == b] - c[bench == b][0], z[bench == b] - z[bench == b][0])
    # The same benchmark name in another file is its own group.
    c2 = lobo.centred(z, bench, np.array(["f"] * 6 + ["g"] * 2))
    np.testing.assert_allclose(c2[6:].mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(c2[4:6].mean(0), 0.0, atol=1e-12)
    assert not np.allclose(c2[4:], c[4:])


def test_irt_difficulty_ranks_harder_items_higher() -> None:
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(2)
    n = 3000
    x = rng.standard_normal((n, 40))
    difficulty = x[:, 0]
    abilities = np.array([-1.0, 0.0, 1.0])
    p = 1.0 / (1.0 + np.exp(-(abilities[None, :] - 2.0 * difficulty[:, None])))
    outcomes = (rng.random(p.shape) < p).astype(np.float64)
    d = lobo.head_irt(x[:2000], outcomes[:2000], x[2000:])
    assert np.corrcoef(d, difficulty[2000:])[0, 1] > 0.8
