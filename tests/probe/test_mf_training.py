"""The RouteLLM-style ``mf`` router: trained on pairwise outcomes, served from a numpy checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

from switchyard.probe.mf_train import MatrixFactorisation, MFParams, train_mf  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from tests.probe._synthetic import RECIPE, data  # noqa: E402

NAMES = ["efficient", "capable"]


def test_learns_which_model_does_better_and_serves_from_numpy(tmp_path: Path) -> None:
    from switchyard.probe.report import auc

    x, y = data(3000, seed=1)
    cp, facts = train_mf(x, y, NAMES, RECIPE, MFParams(pca_dim=24, rank=4))
    differ = y[:, 0] != y[:, 1]
    assert facts["comparisons"] == float(differ.sum())
    assert cp.link == "pairwise_sigmoid" and cp.members[0].output[0].shape == (1, 24)
    xt, yt = data(3000, seed=9)
    probs = cp.predict(xt)
    assert np.allclose(probs.sum(axis=1), 1.0)
    # on held-out rows where the outcomes differ, P(capable better) ranks the capable wins about
    # as well as the true generating probabilities do (the Bayes ranking)
    held = yt[:, 0] != yt[:, 1]
    a, b = xt[:, 0] / 3.0, xt[:, 1] / 3.0
    p_strong, p_weak = 1 / (1 + np.exp(-(1.0 + 2 * a))), 1 / (1 + np.exp(-(2 * a + b - 0.5)))
    bayes = p_strong * (1 - p_weak) / (p_strong * (1 - p_weak) + p_weak * (1 - p_strong))
    best = auc(bayes[held], yt[held, 1])
    assert best > 0.6
    # ~1,000 noisy comparisons: a logistic regression on the raw features lands at 0.726 too
    assert auc(probs[held, 1], yt[held, 1]) > best - 0.04
    ckpt.save(cp, tmp_path)
    back = ckpt.load(tmp_path, kind="prefill_probe")
    assert back.meta["probability_link"] == "pairwise_sigmoid"
    assert np.allclose(back.predict(xt[:40]), probs[:40], atol=1e-6)


def test_folded_logit_equals_the_factorised_model() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((500, 6))
    better = (z[:, 0] + 0.3 * rng.standard_normal(500) > 0).astype(float)
    mf = MatrixFactorisation(MFParams(rank=3, steps=200)).fit(z, better)
    h = z @ mf.p.T
    direct = 1 / (1 + np.exp(-(h @ mf.v[1] + mf.b[1] - h @ mf.v[0] - mf.b[0])))
    assert np.allclose(mf.score(z), direct)
    assert ((mf.score(z) > 0.5) == better.astype(bool)).mean() > 0.85


def test_graded_outcomes_use_their_order_and_ties_are_left_out() -> None:
    x, y = data(800, seed=2)
    graded = y * 9.0 + 1.0  # 1 or 10, as judge scores
    graded[:50] = 5.0  # ties say nothing
    _, facts = train_mf(x, graded, NAMES, RECIPE, MFParams(pca_dim=4, steps=50))
    assert facts["comparisons"] == float((y[50:, 0] != y[50:, 1]).sum())
    with pytest.raises(ValueError, match="each model did better"):
        train_mf(x, np.stack([y[:, 0], y[:, 0]], axis=1), NAMES, RECIPE)
    with pytest.raises(ValueError, match="compares two models"):
        train_mf(x, np.concatenate([y, y[:, :1]], axis=1), [*NAMES, "x"], RECIPE)
