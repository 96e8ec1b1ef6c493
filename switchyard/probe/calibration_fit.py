"""Fitting the calibration artifact on held-out predictions.

Layer: ``probe`` — numpy and scikit-learn lazily (the ``probe`` extra).

``train-probe`` predicts every training row with a model that did not see it (``folds``-fold
cross-fitting, stratified by benchmark: each fold retrains the router's own recipe on the other
folds), fits one monotone map per head from those out-of-fold probabilities to the rows'
good-enough labels, and ships the maps as ``calibration.json`` beside the checkpoint trained on
all rows (:mod:`switchyard.routers.learned.calibration`). Isotonic regression is the default (no
shape assumed; enough rows here — thousands); Platt scaling (a slope and an offset on the logit)
is the two-parameter alternative for small data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from switchyard.routers.learned.calibration import Calibration, Curve

MAX_KNOTS = 64
"""Isotonic knots kept per head (evenly spaced over the fitted steps; the artifact stays small)."""


def fit_curve(p: Any, y: Any, method: str = "isotonic", weights: Any = None) -> Curve:
    """One head's map from raw probabilities ``p`` to 0/1 outcomes ``y`` (``NaN`` rows skipped).

    Raises:
        ValueError: Fewer than 10 known outcomes, only one class, or an unknown method.
    """
    import numpy as np

    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(len(p)) if weights is None else np.asarray(weights, dtype=np.float64)
    known = ~(np.isnan(p) | np.isnan(y))
    # float32 heads can land a hair outside [0, 1]; the artifact's knots must not
    p, y, w = np.clip(p[known], 0.0, 1.0), y[known], w[known]
    if len(p) < 10 or len(set(y.tolist())) < 2:
        raise ValueError("calibration needs at least 10 held-out outcomes of both classes per head")
    if method == "platt":
        from sklearn.linear_model import LogisticRegression

        q = np.clip(p, 1e-7, 1 - 1e-7)
        logit = np.log(q / (1 - q)).reshape(-1, 1)
        model = LogisticRegression(C=1e6, max_iter=1000).fit(logit, y.astype(int), sample_weight=w)
        return Curve("platt", a=float(model.coef_[0, 0]), b=float(model.intercept_[0]))
    if method != "isotonic":
        raise ValueError(f"calibration method must be isotonic or platt, got {method!r}")
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, y, sample_weight=w)
    xs, ys = np.asarray(iso.X_thresholds_), np.asarray(iso.y_thresholds_)
    if len(xs) > MAX_KNOTS:
        keep = np.unique(np.linspace(0, len(xs) - 1, MAX_KNOTS).round().astype(int))
        xs, ys = xs[keep], ys[keep]
    return Curve("isotonic", x=tuple(float(v) for v in xs), y=tuple(float(v) for v in ys))


def out_of_fold(
    train: Callable[[Any, Any, Any], Any],
    x: Any,
    y: Any,
    weights: Any,
    strata: Sequence[str],
    folds: int,
    seed: int,
) -> Any:
    """``[n, N]`` probabilities of every row from a model trained without its fold.

    Args:
        train: ``(x, y, weights) -> checkpoint`` — the router's own recipe.
        x: ``[n, D]`` features.
        y: ``[n, N]`` labels (passed to ``train``).
        weights: ``[n]`` row weights or ``None``.
        strata: Per row, the group folds are stratified by (its benchmark).
        folds: Number of folds (at least 2).
        seed: Seed of the fold assignment.
    """
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    if folds < 2:
        raise ValueError("calibration folds must be >= 2")
    groups = np.unique(np.asarray(strata), return_inverse=True)[1]
    # StratifiedKFold needs each stratum in every fold; tiny strata fall back to one label.
    counts = np.bincount(groups)
    groups = np.where(counts[groups] < folds, -1, groups)
    out = np.full(np.asarray(y).shape, np.nan)
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    for tr, va in splitter.split(np.zeros(len(groups)), groups):
        cp = train(x[tr], y[tr], None if weights is None else weights[tr])
        out[va] = cp.predict(x[va])
    return out


def fit_calibration(
    oof: Any,
    y: Any,
    names: Sequence[str],
    digest: str,
    *,
    method: str = "isotonic",
    weights: Any = None,
    fitted_on: dict[str, Any] | None = None,
) -> Calibration:
    """A :class:`Calibration` of every head from out-of-fold probabilities ``oof`` ``[n, N]``."""
    heads = {name: fit_curve(oof[:, j], y[:, j], method, weights) for j, name in enumerate(names)}
    return Calibration(method, heads, digest, dict(fitted_on or {}))


__all__ = ["MAX_KNOTS", "fit_calibration", "fit_curve", "out_of_fold"]
