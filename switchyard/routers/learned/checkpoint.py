"""Learned-router checkpoints: ``router.json`` + ``router.safetensors``, validated at load.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily. Inference is numpy alone, so
serving a probe needs neither torch nor scikit-learn.

Two kinds share the layout and the feature transform (standardise → PCA):

* ``prefill_probe`` — an ensemble of small ReLU MLPs (or none: a linear model), probabilities
  averaged over members. ``probability_link`` says what the output layer means:
  ``independent_sigmoid`` (default) — one logit per output name, "will this model succeed?";
  ``joint_softmax`` (two names) — four logits over the joint outcome (neither, only the first,
  only the second, both succeed), read back as each model's marginal success probability;
  ``pairwise_sigmoid`` (two names) — one logit, "does the second name do better than the first?"
  (RouteLLM's ``mf`` form), read back as ``[1 - p, p]``.
* ``knn`` — the training points in PCA space with their per-output labels; a query's
  probabilities are the (optionally distance-weighted) mean label of its ``k`` nearest points.

``router.json``::

    {"format_version": 1, "kind": "prefill_probe", "output_names": ["efficient", "capable"],
     "recipe": {...FeatureRecipe...}, "feature_dim": 5376, "pca_dim": 128,
     "trunk_hidden": [256, 128], "ensemble_size": 5,            # prefill_probe
     "k": 50, "weighting": "distance", "metric": "cosine",      # knn
     "tensor_file": "router.safetensors", "training": {...}}

Tensors (``float32``, finite, exact shapes, nothing else): ``transform.scaler_mean [D]``,
``transform.scaler_scale [D]`` (> 0), ``transform.pca_mean [D]``, ``transform.pca_components [P, D]``;
probe: ``ensemble.{e}.hidden.{j}.weight [out, in]`` / ``.bias [out]`` and
``ensemble.{e}.output.weight [N, h]`` / ``.bias [N]``; knn: ``knn.points [n, P]``,
``knn.labels [n, N]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol import tensorfile
from switchyard.protocol.features import FeatureRecipe
from switchyard.routers.learned.novelty import Novelty

FORMAT_VERSION = 1
META_FILE = "router.json"
TENSOR_FILE = "router.safetensors"
KINDS = ("prefill_probe", "knn")
LINKS = {"independent_sigmoid": None, "joint_softmax": 4, "pairwise_sigmoid": 1}
"""Probability links and the output rows each needs (``None``: one per output name)."""


class CheckpointError(ValueError):
    """A checkpoint is missing, malformed or does not fit the route (the message says which)."""


@dataclass(slots=True)
class Transform:
    """Standardise then project on principal components, folded into one affine map.

    Attributes:
        scaler_mean: ``[D]``.
        scaler_scale: ``[D]``, all > 0.
        pca_mean: ``[D]`` (mean of the standardised training features).
        pca_components: ``[P, D]``, rows are components.
    """

    scaler_mean: Any
    scaler_scale: Any
    pca_mean: Any
    pca_components: Any
    _weight: Any = None
    _bias: Any = None

    def __post_init__(self) -> None:
        import numpy as np

        # ((x - m) / s - c) @ V.T == x @ (V / s).T - (m / s + c) @ V.T, computed once.
        comps = self.pca_components.astype(np.float64)
        self._weight = (comps / self.scaler_scale.astype(np.float64)).T.astype(np.float32)
        shift = self.scaler_mean.astype(np.float64) / self.scaler_scale + self.pca_mean
        self._bias = -(shift @ comps.T).astype(np.float32)

    @property
    def dim(self) -> int:
        """Input width ``D``."""
        return int(self.pca_components.shape[1])

    @property
    def out_dim(self) -> int:
        """Output width ``P``."""
        return int(self.pca_components.shape[0])

    def apply(self, x: Any) -> Any:
        """``[n, D]`` → ``[n, P]``."""
        return x @ self._weight + self._bias

    def tensors(self) -> dict[str, Any]:
        """The tensors as stored."""
        return {
            "transform.scaler_mean": self.scaler_mean,
            "transform.scaler_scale": self.scaler_scale,
            "transform.pca_mean": self.pca_mean,
            "transform.pca_components": self.pca_components,
        }


@dataclass(slots=True)
class Member:
    """One MLP of the ensemble: ReLU hidden layers then a linear output (one logit per head)."""

    hidden: list[tuple[Any, Any]]
    output: tuple[Any, Any]

    def logits(self, z: Any) -> Any:
        """``[n, P]`` → ``[n, N]``."""
        import numpy as np

        h = z
        for weight, bias in self.hidden:
            h = np.maximum(h @ weight.T + bias, 0.0)
        weight, bias = self.output
        return h @ weight.T + bias


@dataclass(slots=True)
class Checkpoint:
    """A loaded, validated learned-router checkpoint.

    Attributes:
        kind: ``prefill_probe`` or ``knn``.
        output_names: One per head, in order.
        recipe: How the training features were made.
        transform: Standardise → PCA.
        members: The probe's MLPs (empty for knn).
        points: knn training points ``[n, P]`` (L2-normalised for ``cosine``).
        labels: knn labels ``[n, N]``.
        link: How a probe's output layer becomes per-name probabilities (:data:`LINKS`).
        meta: ``router.json`` as read (``training`` facts included).
    """

    kind: str
    output_names: list[str]
    recipe: FeatureRecipe
    transform: Transform
    members: list[Member] = field(default_factory=list)
    points: Any = None
    labels: Any = None
    k: int = 0
    weighting: str = "distance"
    metric: str = "cosine"
    link: str = "independent_sigmoid"
    meta: dict[str, Any] = field(default_factory=dict)
    novelty: Novelty | None = None

    def project(self, features: Any) -> Any:
        """Features ``[n, D]`` in the checkpoint's standardise → PCA space ``[n, P]``."""
        import numpy as np

        return self.transform.apply(np.asarray(features, dtype=np.float32).reshape(-1, self.transform.dim))

    def predict(self, features: Any, *, k: int | None = None, weighting: str | None = None) -> Any:
        """Per-head success probabilities ``[n, N]`` for features ``[n, D]`` (or one ``[D]`` row).

        Raises:
            CheckpointError: The features do not have the width the checkpoint was trained on.
        """
        import numpy as np

        x = np.asarray(features, dtype=np.float32)
        single = x.ndim == 1
        if single:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.transform.dim:
            raise CheckpointError(f"features have width {x.shape[-1]} but the checkpoint expects {self.transform.dim}")
        z = self.transform.apply(x)
        if self.kind == "prefill_probe":
            probs = np.mean([_link(self.link, m.logits(z)) for m in self.members], axis=0)
        else:
            probs = self._knn(z, k or self.k, weighting or self.weighting)
        return probs[0] if single else probs

    def _knn(self, z: Any, k: int, weighting: str) -> Any:
        import numpy as np

        k = max(1, min(k, self.points.shape[0]))
        if self.metric == "cosine":
            z = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
            dist = 1.0 - z @ self.points.T
        else:
            dist = (z * z).sum(axis=1, keepdims=True) - 2.0 * z @ self.points.T + (self.points**2).sum(axis=1)[None, :]
            dist = np.sqrt(np.maximum(dist, 0.0))
        idx = np.argpartition(dist, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(dist, idx, axis=1)
        if weighting == "distance":
            w = 1.0 / np.maximum(near, 1e-6)
        else:
            w = np.ones_like(near)
        w = w / w.sum(axis=1, keepdims=True)
        return np.einsum("nk,nkh->nh", w, self.labels[idx])

    def tensors(self) -> dict[str, Any]:
        """Every tensor as stored."""
        out = self.transform.tensors()
        for e, member in enumerate(self.members):
            for j, (weight, bias) in enumerate(member.hidden):
                out[f"ensemble.{e}.hidden.{j}.weight"] = weight
                out[f"ensemble.{e}.hidden.{j}.bias"] = bias
            out[f"ensemble.{e}.output.weight"], out[f"ensemble.{e}.output.bias"] = member.output
        if self.kind == "knn":
            out["knn.points"] = self.points
            out["knn.labels"] = self.labels
        if self.novelty is not None:
            out["novelty.points"] = self.novelty.points
        return out


def _sigmoid(x: Any) -> Any:
    import numpy as np

    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


def _link(link: str, logits: Any) -> Any:
    """Per-name probabilities ``[n, N]`` from one member's output logits."""
    import numpy as np

    if link == "joint_softmax":
        # classes: 0 neither, 1 only the first name, 2 only the second, 3 both
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = shifted / shifted.sum(axis=1, keepdims=True)
        return np.stack([p[:, 1] + p[:, 3], p[:, 2] + p[:, 3]], axis=1)
    if link == "pairwise_sigmoid":
        second = _sigmoid(logits[:, 0])
        return np.stack([1.0 - second, second], axis=1)
    return _sigmoid(logits)


def save(checkpoint: Checkpoint, directory: str | Path, training: Mapping[str, Any] | None = None) -> Path:
    """Writes ``router.json`` and ``router.safetensors`` into ``directory`` (created)."""
    import numpy as np

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "kind": checkpoint.kind,
        "output_names": list(checkpoint.output_names),
        "recipe": checkpoint.recipe.to_dict(),
        "feature_dim": checkpoint.transform.dim,
        "pca_dim": checkpoint.transform.out_dim,
        "representation": "layer_major_pooled_concat",
        "tensor_file": TENSOR_FILE,
    }
    if checkpoint.kind == "prefill_probe":
        first = checkpoint.members[0]
        meta.update(
            trunk_hidden=[int(w.shape[0]) for w, _ in first.hidden],
            ensemble_size=len(checkpoint.members),
            probability_link=checkpoint.link,
            ensemble_reduction="probability_mean",
        )
    else:
        meta.update(k=checkpoint.k, weighting=checkpoint.weighting, metric=checkpoint.metric)
    meta["training"] = dict(training or checkpoint.meta.get("training") or {})
    if checkpoint.novelty is not None:
        meta["novelty"] = checkpoint.novelty.meta()
    tensors = {k: np.asarray(v, dtype=np.float32) for k, v in checkpoint.tensors().items()}
    tensorfile.save(out / TENSOR_FILE, tensors, {"format": "switchyard-learned-router"})
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out


def load(directory: str | Path, *, kind: str | None = None) -> Checkpoint:
    """Loads and validates a checkpoint directory.

    Args:
        directory: Holds ``router.json`` and its tensor file.
        kind: The kind the caller needs (``prefill_probe`` / ``knn``), checked.

    Raises:
        CheckpointError: Missing files, wrong version or kind, a bad recipe, missing, extra,
            misshapen or non-finite tensors.
    """
    root = Path(directory)
    meta_path = root / META_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{meta_path}: not found (train one with `switchyard train-probe`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{meta_path}: unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path}: must hold a JSON object")
    where = str(meta_path)
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{where}: format_version {meta.get('format_version')!r}, expected {FORMAT_VERSION}")
    got_kind = meta.get("kind")
    if got_kind not in KINDS:
        raise CheckpointError(f"{where}: kind {got_kind!r}, expected one of {list(KINDS)}")
    if kind is not None and got_kind != kind:
        raise CheckpointError(f"{where}: is a {got_kind!r} checkpoint, this route needs {kind!r}")
    names = meta.get("output_names")
    if not (isinstance(names, list) and names and all(isinstance(n, str) and n for n in names)):
        raise CheckpointError(f"{where}: output_names must be a non-empty list of names")
    if len(set(names)) != len(names):
        raise CheckpointError(f"{where}: output_names has duplicates: {names}")
    try:
        recipe = FeatureRecipe.from_dict(meta["recipe"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: bad feature recipe: {exc}") from None
    tensor_path = root / str(meta.get("tensor_file") or TENSOR_FILE)
    if tensor_path.resolve().parent != root.resolve():
        raise CheckpointError(f"{where}: tensor_file must name a file next to router.json")
    try:
        tensors, _ = tensorfile.load(tensor_path)
    except FileNotFoundError:
        raise CheckpointError(f"{tensor_path}: not found") from None
    except (OSError, tensorfile.TensorFileError) as exc:
        raise CheckpointError(f"{tensor_path}: {exc}") from None
    return _assemble(meta, str(got_kind), list(names), recipe, tensors, str(tensor_path))


def _assemble(
    meta: dict[str, Any], kind: str, names: list[str], recipe: FeatureRecipe, tensors: dict[str, Any], where: str
) -> Checkpoint:
    import numpy as np

    check = _Checker(tensors, where)
    dim, pca = _positive(meta, "feature_dim", where), _positive(meta, "pca_dim", where)
    if recipe.dim is not None and recipe.dim != dim:
        raise CheckpointError(f"{where}: feature_dim {dim} but the recipe makes {recipe.dim}-wide features")
    scale = check.take("transform.scaler_scale", [dim])
    if not (scale > 0).all():
        raise CheckpointError(f"{where}: transform.scaler_scale must be > 0 everywhere")
    transform = Transform(
        check.take("transform.scaler_mean", [dim]),
        scale,
        check.take("transform.pca_mean", [dim]),
        check.take("transform.pca_components", [pca, dim]),
    )
    n_out = len(names)
    cp = Checkpoint(kind=kind, output_names=names, recipe=recipe, transform=transform, meta=meta)
    if kind == "prefill_probe":
        link = meta.get("probability_link", "independent_sigmoid")
        if link not in LINKS:
            raise CheckpointError(f"{where}: probability_link {link!r}, expected one of {list(LINKS)}")
        if LINKS[link] is not None and n_out != 2:
            raise CheckpointError(f"{where}: probability_link {link!r} needs exactly two output_names, got {n_out}")
        cp.link = str(link)
        rows = LINKS[link] or n_out
        hidden = meta.get("trunk_hidden")
        if not (isinstance(hidden, list) and all(isinstance(h, int) and h > 0 for h in hidden)):
            raise CheckpointError(f"{where}: trunk_hidden must be a list of positive widths")
        for e in range(_positive(meta, "ensemble_size", where)):
            layers, width = [], pca
            for j, h in enumerate(hidden):
                prefix = f"ensemble.{e}.hidden.{j}"
                layers.append((check.take(f"{prefix}.weight", [h, width]), check.take(f"{prefix}.bias", [h])))
                width = h
            output = (
                check.take(f"ensemble.{e}.output.weight", [rows, width]),
                check.take(f"ensemble.{e}.output.bias", [rows]),
            )
            cp.members.append(Member(layers, output))
    else:
        points = check.take("knn.points", [None, pca])
        cp.points = points
        cp.labels = check.take("knn.labels", [points.shape[0], n_out])
        cp.k = _positive(meta, "k", where)
        cp.weighting = str(meta.get("weighting", "distance"))
        cp.metric = str(meta.get("metric", "cosine"))
        if cp.weighting not in ("distance", "uniform") or cp.metric not in ("cosine", "euclidean"):
            raise CheckpointError(f"{where}: weighting must be distance|uniform and metric cosine|euclidean")
        if cp.metric == "cosine":
            cp.points = (points / np.maximum(np.linalg.norm(points, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    cp.novelty = _novelty(meta, check, pca, where)
    check.done()
    return cp


def _novelty(meta: Mapping[str, Any], check: _Checker, pca: int, where: str) -> Novelty | None:
    """The novelty reference of checkpoints that have one (older ones do not: ``None``)."""
    facts = meta.get("novelty")
    if facts is None:
        return None
    if not isinstance(facts, dict):
        raise CheckpointError(f"{where}: novelty must be an object")
    k, bound = facts.get("k"), facts.get("bound")
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise CheckpointError(f"{where}: novelty.k must be a positive integer, got {k!r}")
    if not isinstance(bound, int | float) or isinstance(bound, bool) or not bound >= 0:
        raise CheckpointError(f"{where}: novelty.bound must be a number >= 0, got {bound!r}")
    points = check.take("novelty.points", [None, pca])
    return Novelty(points, k, float(bound), float(facts.get("percentile", 99.0)))


def _positive(meta: Mapping[str, Any], key: str, where: str) -> int:
    value = meta.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise CheckpointError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


class _Checker:
    """Takes tensors by name with exact shapes; reports missing, misshapen and leftover ones."""

    def __init__(self, tensors: dict[str, Any], where: str) -> None:
        self._tensors = dict(tensors)
        self._where = where

    def take(self, name: str, shape: Sequence[int | None]) -> Any:
        import numpy as np

        array = self._tensors.pop(name, None)
        if array is None:
            raise CheckpointError(f"{self._where}: tensor {name!r} is missing")
        if len(array.shape) != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, array.shape, strict=True)
        ):
            want = ["n" if s is None else s for s in shape]
            raise CheckpointError(f"{self._where}: tensor {name!r} has shape {list(array.shape)}, expected {want}")
        if array.dtype != np.float32:
            raise CheckpointError(f"{self._where}: tensor {name!r} is {array.dtype}, expected float32")
        if not np.isfinite(array).all():
            raise CheckpointError(f"{self._where}: tensor {name!r} holds NaN or inf")
        return array

    def done(self) -> None:
        if self._tensors:
            raise CheckpointError(f"{self._where}: unexpected tensors {sorted(self._tensors)[:5]}")
