"""Held-out report of a learned router: AUC per head, APGR and CPT through ``switchyard.eval``.

Layer: ``probe``.

The score evaluated is the one the router serves (``Decision.score`` =
``(1 + p_capable - p_efficient) / 2``), swept over all thresholds by
:func:`switchyard.eval.metrics.evaluate_scores`; random and oracle rows come from
:func:`switchyard.eval.metrics.two_tier_baselines`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.metrics import evaluate_scores, two_tier_baselines
from switchyard.probe.data import Rows
from switchyard.routers.learned.checkpoint import Checkpoint


def auc(scores: Any, labels: Any) -> float | None:
    """Area under the ROC curve (ties count half); ``None`` when a class is absent."""
    import numpy as np

    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    keep = ~np.isnan(y)
    s, positive = s[keep], y[keep] > 0.5
    pos, neg = int(positive.sum()), int((~positive).sum())
    if pos == 0 or neg == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    # Average ranks over ties.
    start = 0
    for end in range(1, len(s) + 1):
        if end == len(s) or sorted_s[end] != sorted_s[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0
            start = end
    return float((ranks[positive].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


@dataclass(slots=True)
class SliceReport:
    """One router on one slice.

    Attributes:
        name: Router name (``probe``, ``knn``, ``random``, ``oracle``).
        n: Items.
        auc: AUC per head (binary outcomes only).
        score_auc: AUC of the score against "capable succeeds and efficient fails".
        apgr: APGR of the threshold sweep.
        cpt50: Capable share needed for 50% of the quality gap.
        cpt80: Capable share needed for 80%.
    """

    name: str
    n: int
    auc: dict[str, float | None] = field(default_factory=dict)
    score_auc: float | None = None
    apgr: float | None = None
    cpt50: float | None = None
    cpt80: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "n": self.n,
            "auc": self.auc,
            "score_auc": self.score_auc,
            "apgr": self.apgr,
            "cpt50": self.cpt50,
            "cpt80": self.cpt80,
        }


def score_of(probs: Any, heads: Sequence[int], capable: int, efficient: int) -> Any:
    """The served score for probabilities ``[n, N]`` (columns chosen by ``heads``)."""
    return 0.5 * (1.0 + probs[:, heads[capable]] - probs[:, heads[efficient]])


def evaluate_router(
    name: str,
    checkpoint: Checkpoint,
    x: Any,
    rows: Rows,
    targets: Sequence[str],
    capable: str,
    efficient: str,
    *,
    probs: Any = None,
) -> SliceReport:
    """Scores ``checkpoint`` on ``rows`` (features ``x``) for the capable/efficient pair;
    ``probs`` are its predictions for ``x`` when the caller already has them."""
    import numpy as np

    if probs is None:
        probs = checkpoint.predict(x) if len(rows) else np.zeros((0, len(targets)))
    heads = [checkpoint.output_names.index(t) for t in targets]
    report = SliceReport(name, len(rows))
    for i, t in enumerate(targets):
        report.auc[t] = auc(probs[:, heads[i]], rows.quality[t]) if rows.binary[t] else None
    ci, ei = targets.index(capable), targets.index(efficient)
    score = score_of(probs, heads, ci, ei)
    _two_tier(report, score.tolist(), rows, capable, efficient)
    return report


def _two_tier(report: SliceReport, score: list[float], rows: Rows, capable: str, efficient: str) -> None:
    import numpy as np

    strong, weak = rows.quality[capable], rows.quality[efficient]
    keep = ~(np.isnan(strong) | np.isnan(weak))
    if keep.sum() < 2:
        return
    s = [v for v, k in zip(score, keep, strict=True) if k]
    if rows.binary[capable] and rows.binary[efficient]:
        report.score_auc = auc(np.asarray(s), (strong[keep] > weak[keep]).astype(np.float64))
    result = evaluate_scores(s, strong[keep].tolist(), weak[keep].tolist())
    report.apgr, report.cpt50, report.cpt80 = result.apgr, result.cpt50, result.cpt80


def baselines(rows: Rows, capable: str, efficient: str) -> list[SliceReport]:
    """Random and oracle on ``rows``."""
    import numpy as np

    strong, weak = rows.quality[capable], rows.quality[efficient]
    keep = ~(np.isnan(strong) | np.isnan(weak))
    if keep.sum() < 2:
        return []
    out = []
    for row in two_tier_baselines(strong[keep].tolist(), weak[keep].tolist()):
        if row.name.startswith("random"):
            out.append(SliceReport("random", int(keep.sum()), apgr=row.apgr, cpt50=row.cpt50, cpt80=row.cpt80))
        elif row.name == "oracle":
            out.append(SliceReport("oracle", int(keep.sum()), apgr=row.apgr, cpt50=row.cpt50, cpt80=row.cpt80))
    return out


def render(slices: dict[str, list[SliceReport]], targets: Sequence[str]) -> str:
    """A plain-text table per slice."""

    def num(v: float | None, pct: bool = False) -> str:
        if v is None:
            return "—"
        return f"{v:.1%}" if pct else f"{v:.3f}"

    lines: list[str] = []
    for slice_name, reports in slices.items():
        n = max((r.n for r in reports), default=0)
        lines.append(f"{slice_name} ({n} items)")
        head = ["router", *(f"AUC {t}" for t in targets), "AUC score", "APGR", "CPT(50%)", "CPT(80%)"]
        lines.append("  " + "  ".join(f"{h:>14}" for h in head))
        for r in reports:
            cells = [
                r.name,
                *(num(r.auc.get(t)) for t in targets),
                num(r.score_auc),
                num(r.apgr),
                num(r.cpt50, True),
                num(r.cpt80, True),
            ]
            lines.append("  " + "  ".join(f"{c:>14}" for c in cells))
        lines.append("")
    return "\n".join(lines)
