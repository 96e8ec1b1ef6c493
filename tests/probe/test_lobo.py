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
    t = lobo.no_scaler_pca(x, 2, 0)
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


def test_fast_apgr_is_the_library_apgr_with_ties_and_fractional_outcomes() -> None:
    from switchyard.eval.metrics import evaluate_scores

    rng = np.random.default_rng(3)
    for _ in range(5):
        n = 300
        cap = rng.random(n).round(1)  # fractional scores, as RouterDC's
        eff = (rng.random(n) < 0.4).astype(np.float64)
        score = rng.random(n).round(2)[rng.integers(0, n, n)]  # resampled: many ties
        ref = evaluate_scores(score.tolist(), cap.tolist(), eff.tolist()).apgr
        assert ref is not None
        assert abs(lobo.fast_apgr(score, cap, eff) - ref) < 1e-9


def test_data_cache_round_trips(tmp_path: Path) -> None:
    d = lobo.Data(
        ["a", "b"],
        ["x", "y"],
        np.array(["routerdc", "routellm"]),
        np.array(["mmlu", "gsm8k"]),
        np.array([True, False]),
        np.array([0.0, 1.0]),
        np.array([1.0, 0.5]),
        np.array([True, True]),
        np.array([[1.0, np.nan], [0.0, 1.0]]),
        ["m1", "m2"],
    )
    lobo.save_cache(d, str(tmp_path / "c.npz"))
    back = lobo.load_cache(str(tmp_path / "c.npz"))
    assert back.ids == d.ids and back.model_names == d.model_names and back.texts == ["", ""]
    for f in ("file", "bench", "keep", "eff", "cap", "binary"):
        np.testing.assert_array_equal(getattr(back, f), getattr(d, f))
    np.testing.assert_array_equal(back.models, d.models)


def test_layer_mix_columns_pick_whole_blocks() -> None:
    meta = {"block_dim": 2, "blocks": ["4/mean", "4/last", "20/mean", "20/last"]}
    np.testing.assert_array_equal(lobo.block_columns(meta, "late"), [4, 5, 6, 7])
    np.testing.assert_array_equal(lobo.block_columns(meta, "mean-pool"), [0, 1, 4, 5])


def test_novelty_actions_force_the_tier_at_every_threshold() -> None:
    import lobo_novelty

    score = np.array([0.2, 0.9, 0.5])
    novel = np.array([True, False, False])
    assert lobo_novelty.acted(score, novel, "capable").argmax() == 0
    assert lobo_novelty.acted(score, novel, "efficient").argmin() == 0
    np.testing.assert_array_equal(lobo_novelty.acted(score, novel, "none"), score)
    # A random router needs (0.95 q_s - q_w) / (q_s - q_w) of the capable model; none at all
    # when the efficient model is already within 5 %.
    assert lobo_novelty.random_saved(1.0, 0.96) == pytest.approx(1 - 0.24 / 24.7)
    need = (0.95 - 0.5) / 0.5
    assert lobo_novelty.random_saved(1.0, 0.5) == pytest.approx(1 - (need * 24.7 + (1 - need) * 0.24) / 24.7)
