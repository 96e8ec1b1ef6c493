"""Training on scikit-learn: scaler → PCA (whitened) → calibrated logistic regression.

Layer: ``probe`` — scikit-learn is imported lazily (the ``probe`` extra); the result is an
ordinary ``prefill_probe`` checkpoint with no hidden layers, so serving stays numpy-only: the
scaler, the PCA and its whitening fold into the checkpoint's transform, each head's weights
into one output row, and the Platt calibration (a slope and an offset on the logit) into those
weights too.

Two forms (``LinearParams.link``): ``independent`` — one logistic regression per head ("will
this model succeed?"); ``joint`` — for two heads, one multinomial regression over the four joint
outcomes (neither, only the first, only the second, both), served with the checkpoint's
``joint_softmax`` link. The joint form estimates the routing gain, P(only capable) - P(only
efficient), from one model instead of as the difference of two separately fitted ones; on the
shared data it scored the same on the test split and better across sources (MMLU → GSM8K,
GSM8K → MMLU, MT-Bench; docs/learned-routers.md), so it is the default for two heads.

Why a linear model: on the shared RouteLLM data a regularised logistic regression over a small
PCA of the prefill states generalised best across benchmarks (docs/learned-routers.md), and it
has few knobs to over-tune. The regularisation strength is chosen per head by cross-validation
(log-loss over ``C_GRID``) on the training rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.features import FeatureRecipe
from switchyard.routers.learned.checkpoint import Checkpoint, Member, Transform

C_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
"""Inverse regularisation strengths tried by cross-validation."""


@dataclass(slots=True)
class LinearParams:
    """Settings of :func:`train_linear`.

    Attributes:
        pca_dim: Principal components kept (whitened).
        folds: Cross-validation folds for the regularisation strength and the calibration.
        calibrate: Fit a Platt scaling on out-of-fold logits and fold it into the weights.
        seed: Seed of the folds and the PCA solver.
        cs: Candidate inverse regularisation strengths.
        link: ``joint`` (two heads, binary outcomes: one multinomial regression over the joint
            outcome) or ``independent`` (one regression per head). ``joint`` falls back to
            ``independent`` for more than two heads.
    """

    pca_dim: int = 32
    folds: int = 5
    calibrate: bool = True
    seed: int = 0
    cs: tuple[float, ...] = C_GRID
    link: str = "joint"


@dataclass(slots=True)
class LinearResult:
    """The checkpoint, what was chosen per head (``C``, calibration), and a note when the asked-for
    link could not be used (``joint`` on data where a joint outcome is too rare)."""

    checkpoint: Checkpoint
    chosen: dict[str, dict[str, float]] = field(default_factory=dict)
    note: str | None = None


def fit_whitened_pca(x: Any, dim: int, seed: int) -> Transform:
    """Standardise → PCA → whiten, as a :class:`Transform` (the probe's own PCA, whitened)."""
    from switchyard.probe.train import fit_transform

    return fit_transform(x, dim, seed, whiten=True)


def train_linear(
    x: Any,
    y: Any,
    names: Sequence[str],
    recipe: FeatureRecipe,
    params: LinearParams | None = None,
    weights: Any = None,
) -> LinearResult:
    """Fits the transform and one calibrated logistic regression per head.

    Args:
        x: ``[n, D]`` features.
        y: ``[n, N]`` outcomes in {0, 1}, ``NaN`` where unknown (those rows are left out of
            that head).
        names: Head names, in column order.
        recipe: The features' recipe (stored in the checkpoint).
        params: Settings.
        weights: ``[n]`` row weights (per-source weights of mixed training data), or ``None``
            (every row 1). They weigh the fit, the cross-validated log-loss that picks ``C``
            and the calibration alike.

    Raises:
        ValueError: A head has fewer than ``2 * folds`` known outcomes or only one class, or
            the joint link meets graded outcomes.
    """
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_predict, cross_val_score

    p = params or LinearParams()
    note = None
    if p.link == "joint" and len(names) == 2:
        known, classes = _joint_classes(y)
        note = _rare_joint_outcome(classes, names, p.folds)
        if note is None:
            return _train_joint(x, known, classes, names, recipe, p, _weights(weights, len(x)))
        note += ": trained one regression per target instead (link independent)"
    transform = fit_whitened_pca(x, p.pca_dim, p.seed)
    z = transform.apply(np.asarray(x, dtype=np.float32)).astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    row_w = _weights(weights, len(x))
    out_w = np.zeros((len(names), z.shape[1]))
    biases = np.zeros(len(names))
    chosen: dict[str, dict[str, float]] = {}
    for j, name in enumerate(names):
        known = ~np.isnan(y[:, j])
        zj, yj = z[known], y[known, j].astype(int)
        wj = None if row_w is None else row_w[known]
        if len(yj) < 2 * p.folds or len(set(yj.tolist())) < 2:
            raise ValueError(f"head {name!r}: needs at least {2 * p.folds} known outcomes of both classes")
        folds = StratifiedKFold(p.folds, shuffle=True, random_state=p.seed)
        if wj is None:
            scores = [float(cross_val_score(_logreg(c), zj, yj, cv=folds, scoring="neg_log_loss").mean()) for c in p.cs]
        else:
            scores = [weighted_cv_score(c, zj, yj, wj, folds) for c in p.cs]
        c = float(p.cs[int(np.argmax(scores))])
        model = _logreg(c).fit(zj, yj, sample_weight=wj)
        w, b = model.coef_[0].copy(), float(model.intercept_[0])
        slope, offset = 1.0, 0.0
        if p.calibrate:
            # Platt scaling on out-of-fold logits: p = sigmoid(slope * logit + offset), folded below.
            if wj is None:
                oof = cross_val_predict(_logreg(c), zj, yj, cv=folds, method="decision_function")
            else:
                oof = weighted_oof_logits(c, zj, yj, wj, folds)
            platt = _logreg(1e6).fit(oof.reshape(-1, 1), yj, sample_weight=wj)
            slope, offset = float(platt.coef_[0, 0]), float(platt.intercept_[0])
        out_w[j] = slope * w
        biases[j] = slope * b + offset
        chosen[name] = {"C": c, "platt_slope": slope, "platt_offset": offset, "n": float(len(yj))}
    cp = linear_checkpoint(names, recipe, transform, out_w, biases, "independent_sigmoid")
    return LinearResult(cp, chosen, note)


def linear_checkpoint(
    names: Sequence[str], recipe: FeatureRecipe, transform: Transform, weight: Any, bias: Any, link: str
) -> Checkpoint:
    """A ``prefill_probe`` checkpoint whose one member is a linear output layer (no hidden layers)."""
    import numpy as np

    output = (np.asarray(weight, dtype=np.float32), np.asarray(bias, dtype=np.float32))
    return Checkpoint(
        kind="prefill_probe",
        output_names=list(names),
        recipe=recipe,
        transform=transform,
        members=[Member(hidden=[], output=output)],
        link=link,
    )


def _joint_classes(y: Any) -> tuple[Any, Any]:
    """Rows with both outcomes known and their joint class ``y_first + 2 * y_second``: 0 neither
    succeeds, 1 only the first, 2 only the second, 3 both.

    Raises:
        ValueError: An outcome that is not 0/1 (graded outcomes have no joint class).
    """
    import numpy as np

    y = np.asarray(y, dtype=np.float64)
    known = ~np.isnan(y).any(axis=1)
    yk = y[known]
    if not np.isin(yk, (0.0, 1.0)).all():
        raise ValueError("the joint link needs 0/1 outcomes; graded outcomes need --link independent")
    return known, (yk[:, 0] + 2 * yk[:, 1]).astype(int)


def _rare_joint_outcome(classes: Any, names: Sequence[str], folds: int) -> str | None:
    """Why the joint link cannot be fitted (a joint outcome seen fewer than ``folds`` times:
    cross-validation needs it in every fold), or ``None``."""
    import numpy as np

    counts = np.bincount(classes, minlength=4)
    if (counts >= folds).all():
        return None
    labels = ("neither", f"only {names[0]}", f"only {names[1]}", "both")
    seen = ", ".join(f"{label} {int(n)}" for label, n in zip(labels, counts, strict=True))
    return f"the joint link needs each joint outcome at least {folds} times ({seen})"


def _train_joint(
    x: Any,
    known: Any,
    classes: Any,
    names: Sequence[str],
    recipe: FeatureRecipe,
    params: LinearParams,
    weights: Any = None,
) -> LinearResult:
    """Fits the transform and one multinomial regression over the joint classes of two heads
    (:func:`_joint_classes`; rows with a missing outcome are left out). ``C`` is chosen by
    cross-validated log-loss; calibration is a temperature on out-of-fold logits (one scalar,
    folded into the weights), the multinomial counterpart of Platt scaling."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_predict, cross_val_score

    transform = fit_whitened_pca(x, params.pca_dim, params.seed)
    z = transform.apply(np.asarray(x, dtype=np.float32)).astype(np.float64)[known]
    folds = StratifiedKFold(params.folds, shuffle=True, random_state=params.seed)
    w_rows = None if weights is None else weights[known]
    if w_rows is None:
        scores = [
            float(cross_val_score(_logreg(c), z, classes, cv=folds, scoring="neg_log_loss").mean()) for c in params.cs
        ]
    else:
        scores = [weighted_cv_score(c, z, classes, w_rows, folds) for c in params.cs]
    c = float(params.cs[int(np.argmax(scores))])
    model = _logreg(c).fit(z, classes, sample_weight=w_rows)
    w, b = model.coef_.copy(), model.intercept_.copy()
    temperature = 1.0
    if params.calibrate:
        if w_rows is None:
            oof = cross_val_predict(_logreg(c), z, classes, cv=folds, method="decision_function")
        else:
            oof = weighted_oof_logits(c, z, classes, w_rows, folds)
        temperature = _temperature(oof, classes, w_rows)
    cp = linear_checkpoint(names, recipe, transform, w / temperature, b / temperature, "joint_softmax")
    chosen = {"joint": {"C": c, "temperature": temperature, "n": float(len(classes))}}
    chosen["joint"].update({f"class_{k}": float(v) for k, v in enumerate(np.bincount(classes, minlength=4))})
    return LinearResult(cp, chosen)


def _temperature(logits: Any, classes: Any, weights: Any = None) -> float:
    """The softmax temperature minimising the (weighted) log-loss of ``logits`` (bounded search)."""
    import numpy as np
    from scipy.optimize import minimize_scalar

    w = np.ones(len(classes)) if weights is None else np.asarray(weights, dtype=np.float64)

    def loss(log_t: float) -> float:
        scaled = logits / np.exp(log_t)
        scaled = scaled - scaled.max(axis=1, keepdims=True)
        logp = scaled - np.log(np.exp(scaled).sum(axis=1, keepdims=True))
        return float(-(w * logp[np.arange(len(classes)), classes]).sum() / w.sum())

    found = minimize_scalar(loss, bounds=(-3.0, 3.0), method="bounded")
    return float(np.exp(found.x))


def _weights(weights: Any, n: int) -> Any:
    """Row weights as a float array (``None`` stays ``None``: the unweighted code path).

    Raises:
        ValueError: Wrong length, or a weight that is negative or not finite.
    """
    import numpy as np

    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"row weights must be {n} finite numbers >= 0 with a positive sum")
    return w


def weighted_cv_score(c: float, z: Any, y: Any, w: Any, folds: Any) -> float:
    """Mean over ``folds`` of the negative weighted log-loss of a logistic regression with ``C = c``
    fitted with weights on the other folds (``cross_val_score`` with weights in fit and score)."""
    import numpy as np
    from sklearn.metrics import log_loss

    losses = []
    for tr, va in folds.split(z, y):
        model = _logreg(c).fit(z[tr], y[tr], sample_weight=w[tr])
        losses.append(log_loss(y[va], model.predict_proba(z[va]), sample_weight=w[va], labels=model.classes_))
    return -float(np.mean(losses))


def weighted_oof_logits(c: float, z: Any, y: Any, w: Any, folds: Any) -> Any:
    """Out-of-fold decision values of a weighted fit (``cross_val_predict`` with weights)."""
    import numpy as np

    out: Any = None
    for tr, va in folds.split(z, y):
        model = _logreg(c).fit(z[tr], y[tr], sample_weight=w[tr])
        d = model.decision_function(z[va])
        if out is None:
            out = np.zeros((len(y), *d.shape[1:]))
        out[va] = d
    return out


def _logreg(c: float) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=5000)
