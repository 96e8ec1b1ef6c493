"""Probe training: determinism, numpy inference equal to torch, checkpoint round trip and validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("torch")

from switchyard.probe.train import ProbeParams, build_knn, fit_transform, torch_predict, train_probe  # noqa: E402
from switchyard.protocol import tensorfile  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from tests.probe._synthetic import RECIPE, data  # noqa: E402

PARAMS = ProbeParams(
    pca_dim=8, hidden=(16, 8), ensemble=2, epochs=15, patience=5, lr=1e-2, dropout=0.0, batch_size=64, seed=3
)
NAMES = ["efficient", "capable"]


@pytest.fixture(scope="module")
def trained() -> object:
    x, y = data()
    return train_probe(x, y, NAMES, RECIPE, PARAMS)


def test_same_seed_same_weights_other_seed_differs(trained: object) -> None:
    x, y = data()
    again = train_probe(x, y, NAMES, RECIPE, PARAMS)
    first = trained.checkpoint.tensors()  # type: ignore[attr-defined]
    second = again.checkpoint.tensors()
    assert first.keys() == second.keys()
    assert all(np.array_equal(first[k], second[k]) for k in first)
    other = train_probe(x, y, NAMES, RECIPE, dataclasses.replace(PARAMS, seed=4))
    assert not np.array_equal(other.checkpoint.tensors()["ensemble.0.output.weight"], first["ensemble.0.output.weight"])


def test_numpy_inference_equals_torch(trained: object) -> None:
    x, _ = data(50, seed=9)
    ours = trained.checkpoint.predict(x)  # type: ignore[attr-defined]
    theirs = torch_predict(trained, x)  # type: ignore[arg-type]
    assert ours.shape == (50, 2)
    assert np.allclose(ours, theirs, atol=2e-5)


def test_probe_learns_the_signal(trained: object) -> None:
    from switchyard.probe.report import auc

    x, y = data(400, seed=11)
    probs = trained.checkpoint.predict(x)  # type: ignore[attr-defined]
    assert auc(probs[:, 1], y[:, 1]) > 0.58
    assert auc(probs[:, 0], y[:, 0]) > 0.6


def test_checkpoint_round_trip(trained: object, tmp_path: Path) -> None:
    cp = trained.checkpoint  # type: ignore[attr-defined]
    ckpt.save(cp, tmp_path, {"seed": 3})
    back = ckpt.load(tmp_path, kind="prefill_probe")
    assert back.output_names == NAMES and back.recipe == RECIPE
    assert back.meta["trunk_hidden"] == [16, 8] and back.meta["ensemble_size"] == 2
    assert back.meta["training"] == {"seed": 3}
    x, _ = data(20, seed=5)
    assert np.array_equal(back.predict(x), cp.predict(x))
    assert back.predict(x[0]).shape == (2,)


def _corrupt(tmp_path: Path, trained: object, edit_meta=None, edit_tensors=None) -> Path:  # type: ignore[no-untyped-def]
    ckpt.save(trained.checkpoint, tmp_path)  # type: ignore[attr-defined]
    if edit_meta:
        meta = json.loads((tmp_path / "router.json").read_text())
        edit_meta(meta)
        (tmp_path / "router.json").write_text(json.dumps(meta))
    if edit_tensors:
        tensors, _ = tensorfile.load(tmp_path / "router.safetensors")
        edit_tensors(tensors)
        tensorfile.save(tmp_path / "router.safetensors", tensors)
    return tmp_path


@pytest.mark.parametrize(
    ("meta_edit", "tensor_edit", "needle"),
    [
        (lambda m: m.update(format_version=2), None, "format_version"),
        (lambda m: m.update(kind="other"), None, "kind"),
        (lambda m: m.update(output_names=["a", "a"]), None, "duplicates"),
        (lambda m: m["recipe"].update(bogus=1), None, "recipe"),
        (lambda m: m.update(feature_dim=25), None, "feature_dim 25"),
        (lambda m: m.update(ensemble_size=3), None, "ensemble.2.hidden.0.weight' is missing"),
        (None, lambda t: t.pop("transform.pca_mean"), "transform.pca_mean' is missing"),
        (None, lambda t: t.update({"extra.thing": np.zeros(2, np.float32)}), "unexpected tensors"),
        (None, lambda t: t.update({"ensemble.0.output.bias": np.zeros(3, np.float32)}), "has shape"),
        (None, lambda t: t["ensemble.1.hidden.0.weight"].__setitem__((0, 0), np.nan), "NaN"),
        (None, lambda t: t["transform.scaler_scale"].__setitem__(0, 0.0), "scaler_scale"),
        (None, lambda t: t.update({"transform.pca_mean": t["transform.pca_mean"].astype(np.float64)}), "float64"),
    ],
)
def test_invalid_checkpoints_fail_with_clear_errors(
    tmp_path: Path, trained: object, meta_edit: object, tensor_edit: object, needle: str
) -> None:
    path = _corrupt(tmp_path, trained, meta_edit, tensor_edit)
    with pytest.raises(ckpt.CheckpointError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        ckpt.load(path)


def test_missing_and_wrong_kind(tmp_path: Path, trained: object) -> None:
    with pytest.raises(ckpt.CheckpointError, match="not found"):
        ckpt.load(tmp_path / "nothing")
    ckpt.save(trained.checkpoint, tmp_path)  # type: ignore[attr-defined]
    with pytest.raises(ckpt.CheckpointError, match="needs 'knn'"):
        ckpt.load(tmp_path, kind="knn")
    with pytest.raises(ckpt.CheckpointError, match="width 5"):
        ckpt.load(tmp_path).predict(np.zeros(5, np.float32))


def test_transform_is_standardise_then_pca() -> None:
    x, _ = data(200)
    t = fit_transform(x, 5)
    z = ((x.astype(np.float64) - t.scaler_mean) / t.scaler_scale - t.pca_mean) @ t.pca_components.T.astype(np.float64)
    assert np.allclose(t.apply(x), z, atol=1e-4)
    assert np.allclose(np.abs(t.pca_components @ t.pca_components.T), np.eye(5), atol=1e-5)
    # wide features take the randomised path and still give orthonormal components
    wide = np.random.default_rng(0).standard_normal((60, 9000)).astype(np.float32)
    tw = fit_transform(wide, 4)
    assert np.allclose(tw.pca_components @ tw.pca_components.T, np.eye(4), atol=1e-4)


def test_knn_checkpoint_round_trip_and_votes(tmp_path: Path) -> None:
    x, y = data()
    cp = build_knn(x, y, NAMES, RECIPE, pca_dim=6, k=7, weighting="uniform")
    ckpt.save(cp, tmp_path)
    back = ckpt.load(tmp_path, kind="knn")
    assert (back.k, back.weighting, back.metric) == (7, "uniform", "cosine")
    probs = back.predict(x[:3])
    assert np.allclose(probs, cp.predict(x[:3]))
    # uniform weighting over 7 neighbours gives multiples of 1/7
    assert np.allclose(probs * 7, np.round(probs * 7), atol=1e-5)
    one = back.predict(x[:3], k=1)
    assert np.array_equal(one, y[:3])  # a training point is its own nearest neighbour


def test_cli_refuses_turns_a_route_could_not_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from switchyard.cli import main

    args = ["train-probe", "--dataset", str(tmp_path / "none.jsonl"), "--map", "a=x", "--map", "b=y"]
    args += ["--features", '{"backend": "embeddings", "base_url": "http://127.0.0.1:9/v1", "model": "m"}']
    assert main([*args, "--out", str(tmp_path / "out"), "--turns", "0"]) == 1
    assert "--turns must be >= 1" in capsys.readouterr().err
