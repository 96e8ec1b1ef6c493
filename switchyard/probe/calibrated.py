"""``train-probe``'s calibration step: out-of-fold predictions → calibration artifact → report.

Layer: ``probe``.

Every training row is predicted by the router's own head retrained without the row's fold (on
the full fit's standardise + PCA, which saw no outcomes)
(:func:`switchyard.probe.calibration_fit.out_of_fold`); one monotone map per head is fitted from
those predictions to the rows' good-enough labels; the maps are applied to the held-out slices'
predictions of the checkpoint trained on all rows, and the reliability before and after is
printed (ECE; the reliability diagram of the first slice) — the held-out check of the artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from switchyard.eval.good_enough import GoodEnough, GoodEnoughError
from switchyard.eval.reliability import Reliability, reliability, render
from switchyard.probe.calibration_fit import fit_calibration, out_of_fold
from switchyard.probe.data import Rows
from switchyard.routers.learned.calibration import Calibration

Trainer = Callable[[Any, Any, Any], Any]
"""``(x, y, weights) -> checkpoint``: the router's recipe, for the out-of-fold models."""


def pooled(probs: Any, labels: Any) -> Reliability:
    """Reliability of every (row, head) pair with a known label, pooled over heads."""
    import numpy as np

    p = np.asarray(probs, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    known = ~(np.isnan(p) | np.isnan(y))
    return reliability(np.clip(p[known], 0.0, 1.0).tolist(), y[known].tolist())


def calibrate(
    train: Trainer,
    x: Any,
    y: Any,
    weights: Any,
    strata: Sequence[str],
    names: Sequence[str],
    *,
    method: str,
    folds: int,
    seed: int,
    held: dict[str, tuple[Any, Rows]],
    rule: GoodEnough,
) -> tuple[Calibration, str, dict[str, Any]]:
    """Fits the artifact (digest left empty: the caller sets it once the weights are written).

    Args:
        train: The router's recipe.
        x: Training features.
        y: Training good-enough labels ``[n, N]``.
        weights: Row weights or ``None``.
        strata: Per training row, its benchmark (folds are stratified by it).
        names: Head names.
        method: ``isotonic`` or ``platt``.
        folds: Out-of-fold folds.
        seed: Fold seed.
        held: Held-out slices: name → (the final checkpoint's probabilities, rows).
        rule: The good-enough rule (labels of the held-out rows).

    Returns:
        ``(calibration, report text, facts for router.json)``.
    """
    import numpy as np

    oof = out_of_fold(train, x, y, weights, strata, folds, seed)
    cal = fit_calibration(
        oof,
        y,
        names,
        "",
        method=method,
        weights=weights,
        fitted_on={"rows": len(y), "folds": folds, "seed": seed, "predictions": "out-of-fold", "bars": rule.describe()},
    )
    facts: dict[str, Any] = {
        "training_oof": {"raw": pooled(oof, y).ece, "calibrated": pooled(_apply(cal, names, oof), y).ece}
    }
    lines = [
        f"calibration ({method}, fitted on {folds}-fold out-of-fold predictions of the {len(y)} training rows):",
        f"  training rows, out of fold: ECE {facts['training_oof']['raw']:.3f} raw -> "
        f"{facts['training_oof']['calibrated']:.3f} calibrated (in-sample for the maps)",
    ]
    diagram: list[str] = []
    for name, (probs, rows) in held.items():
        if probs is None or not len(rows):
            continue
        try:
            labels = rows.good(names, rule)
        except GoodEnoughError as exc:
            lines.append(f"  {name}: no labels ({exc})")
            continue
        raw = pooled(np.asarray(probs), labels)
        after = pooled(_apply(cal, names, np.asarray(probs)), labels)
        facts[name] = {"raw": raw.ece, "calibrated": after.ece, "n": after.n, "diagram": after.to_dict()}
        lines.append(f"  {name} (held out): ECE {raw.ece:.3f} raw -> {after.ece:.3f} calibrated (n {after.n})")
        if not diagram:
            diagram = render(after, f"reliability on {name}, calibrated")
    cal.report = {k: {kk: vv for kk, vv in v.items() if kk != "diagram"} for k, v in facts.items()}
    return cal, "\n".join([*lines, *diagram]) + "\n", facts


def _apply(cal: Calibration, names: Sequence[str], probs: Any) -> Any:
    import numpy as np

    return np.array([cal.apply(names, [float(v) for v in row]) for row in np.asarray(probs)])


__all__ = ["Trainer", "calibrate", "pooled"]
