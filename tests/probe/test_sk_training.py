"""scikit-learn training: the numpy checkpoint reproduces the scikit-learn model exactly, learns
the signal, stays calibrated, and round-trips as an ordinary prefill_probe checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

from switchyard.probe.sk_train import LinearParams, fit_whitened_pca, train_linear  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from tests.probe._synthetic import RECIPE, data  # noqa: E402

NAMES = ["efficient", "capable"]


def test_numpy_checkpoint_equals_sklearn_pipeline_and_round_trips(tmp_path: Path) -> None:
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    x, y = data(600)
    result = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=6, calibrate=False, seed=1))
    cp = result.checkpoint
    # the folded transform equals scikit-learn's scaler + whitened PCA (up to component signs)
    z = StandardScaler().fit_transform(x.astype(np.float64))
    ref = PCA(n_components=6, whiten=True, svd_solver="full").fit_transform(z)
    ours = cp.transform.apply(x)
    assert np.allclose(np.abs(ours), np.abs(ref), atol=1e-3)
    assert set(result.chosen) == set(NAMES) and all(c["platt_slope"] == 1.0 for c in result.chosen.values())
    ckpt.save(cp, tmp_path, {"router": "linear"})
    back = ckpt.load(tmp_path, kind="prefill_probe")
    assert back.meta["trunk_hidden"] == [] and back.meta["ensemble_size"] == 1
    assert np.allclose(back.predict(x[:20]), cp.predict(x[:20]))


def test_learns_the_signal_and_is_calibrated() -> None:
    from switchyard.probe.report import auc

    x, y = data(1500, seed=2)
    cp = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=8)).checkpoint
    xt, yt = data(1500, seed=7)
    probs = cp.predict(xt)
    assert auc(probs[:, 1], yt[:, 1]) > 0.65 and auc(probs[:, 0], yt[:, 0]) > 0.7
    # calibrated: predicted and observed success rates agree on held-out data
    for j in range(2):
        assert abs(float(probs[:, j].mean()) - float(yt[:, j].mean())) < 0.04


def test_unknown_labels_are_left_out_and_bad_heads_named() -> None:
    x, y = data(300)
    y = y.copy()
    y[:100, 0] = np.nan
    train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4))
    y[:, 1] = 1.0
    with pytest.raises(ValueError, match="head 'capable'"):
        train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4))
    t = fit_whitened_pca(x, 3, 0)
    assert t.pca_components.shape == (3, 24)
