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
    result = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=6, calibrate=False, seed=1, link="independent"))
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
    xt, yt = data(1500, seed=7)
    for link in ("independent", "joint"):
        cp = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=8, link=link)).checkpoint
        probs = cp.predict(xt)
        assert auc(probs[:, 1], yt[:, 1]) > 0.65 and auc(probs[:, 0], yt[:, 0]) > 0.7, link
        # calibrated: predicted and observed success rates agree on held-out data
        for j in range(2):
            assert abs(float(probs[:, j].mean()) - float(yt[:, j].mean())) < 0.04, link


def test_unknown_labels_are_left_out_and_bad_heads_named() -> None:
    x, y = data(300)
    y = y.copy()
    y[:100, 0] = np.nan
    train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4))
    y[:, 1] = 1.0
    with pytest.raises(ValueError, match="head 'capable'"):
        train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4, link="independent"))
    # the joint link cannot be fitted when a joint outcome never occurs (here: neither model
    # failing): independent heads, and a note naming the counts
    y[:, 1] = np.where(np.arange(len(y)) < 250, 1.0, 0.0)
    y[250:, 0] = 1.0
    result = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4))
    assert result.checkpoint.link == "independent_sigmoid"
    assert result.note is not None and "neither" in result.note and "link independent" in result.note
    t = fit_whitened_pca(x, 3, 0)
    assert t.pca_components.shape == (3, 24)


def test_joint_link_is_one_softmax_over_the_four_joint_outcomes(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = data(900, seed=3)
    result = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=6, calibrate=False))
    cp = result.checkpoint
    assert cp.link == "joint_softmax" and cp.members[0].output[0].shape == (4, 6)
    # the served marginals are scikit-learn's multinomial model read back per model:
    # P(efficient ok) = P(only efficient) + P(both), P(capable ok) = P(only capable) + P(both)
    z = cp.transform.apply(x).astype(np.float64)
    classes = (y[:, 0] + 2 * y[:, 1]).astype(int)
    ref = LogisticRegression(C=result.chosen["joint"]["C"], max_iter=5000).fit(z, classes).predict_proba(z)
    probs = cp.predict(x)
    assert np.allclose(probs[:, 0], ref[:, 1] + ref[:, 3], atol=1e-4)
    assert np.allclose(probs[:, 1], ref[:, 2] + ref[:, 3], atol=1e-4)
    ckpt.save(cp, tmp_path)
    back = ckpt.load(tmp_path, kind="prefill_probe")
    assert back.meta["probability_link"] == "joint_softmax"
    assert np.allclose(back.predict(x[:50]), probs[:50])


def test_joint_link_refuses_graded_outcomes_and_falls_back_for_three_heads() -> None:
    x, y = data(400, seed=4)
    graded = y.copy()
    graded[:10, 1] = 0.5
    with pytest.raises(ValueError, match="--link independent"):
        train_linear(x, graded, NAMES, RECIPE, LinearParams(pca_dim=4))
    three = np.concatenate([y, y[:, :1]], axis=1)
    cp = train_linear(x, three, [*NAMES, "other"], RECIPE, LinearParams(pca_dim=4)).checkpoint
    assert cp.link == "independent_sigmoid" and cp.predict(x[:3]).shape == (3, 3)


def test_checkpoint_link_is_validated(tmp_path: Path) -> None:
    import json

    x, y = data(400, seed=5)
    cp = train_linear(x, y, NAMES, RECIPE, LinearParams(pca_dim=4)).checkpoint
    ckpt.save(cp, tmp_path)
    meta_path = tmp_path / ckpt.META_FILE
    meta = json.loads(meta_path.read_text())
    meta["probability_link"] = "softmax"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ckpt.CheckpointError, match="probability_link 'softmax'"):
        ckpt.load(tmp_path)
    # a joint checkpoint whose output layer has one row per name is refused with the shape
    meta["probability_link"] = "independent_sigmoid"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ckpt.CheckpointError, match=r"output.weight.*shape \[4, 4\], expected \[2, 4\]"):
        ckpt.load(tmp_path)


@pytest.mark.parametrize("link", ["joint", "independent"])
def test_row_weights_of_one_reproduce_the_unweighted_fit_and_others_change_it(link: str) -> None:
    x, y = data(400)
    params = LinearParams(pca_dim=6, seed=0, link=link, cs=(0.01, 0.1, 1.0))
    plain = train_linear(x, y, NAMES, RECIPE, params).checkpoint.predict(x[:50])
    ones = train_linear(x, y, NAMES, RECIPE, params, weights=np.ones(len(x))).checkpoint.predict(x[:50])
    assert np.allclose(plain, ones, atol=1e-5)  # the weighted code path (own CV loop) is the same fit
    heavy = np.where(y[:, 0] == 1, 5.0, 1.0)  # efficient successes weigh 5x: P(efficient) rises
    weighted = train_linear(x, y, NAMES, RECIPE, params, weights=heavy).checkpoint.predict(x[:50])
    assert weighted[:, 0].mean() > plain[:, 0].mean() + 0.05
    with pytest.raises(ValueError, match="row weights"):
        train_linear(x, y, NAMES, RECIPE, params, weights=-np.ones(len(x)))
