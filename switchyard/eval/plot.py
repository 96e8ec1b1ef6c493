"""Cost-quality curves as CSV and PNG (matplotlib, from the ``eval`` extra, imported lazily).

Layer: ``eval``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from switchyard.eval.curves import Point, oracle_curve, pgr
from switchyard.eval.evaluate import EvalResult
from switchyard.eval.metrics import Row


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def write_curve_csv(result: EvalResult, path: str | Path) -> Path:
    """Writes the threshold sweep: ``threshold, capable_share, quality, pgr, cost_usd`` per point.

    Raises:
        ValueError: The result has no two-tier curve.
    """
    tt = result.two_tier
    if tt is None:
        raise ValueError("no two-tier curve to write")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["threshold", "capable_share", "quality", "pgr", "cost_usd"])
        for p in tt.curve:
            g = pgr(p.quality, tt.efficient_quality, tt.capable_quality)
            writer.writerow(
                [
                    "" if p.threshold is None else ("inf" if math.isinf(p.threshold) else repr(p.threshold)),
                    f"{p.share:.6f}",
                    f"{p.quality:.6f}",
                    "" if g is None else f"{g:.6f}",
                    "" if p.cost_usd is None else f"{p.cost_usd:.6f}",
                ]
            )
    return out


def pyplot() -> Any:
    """matplotlib's ``pyplot`` on the file-only Agg backend.

    Raises:
        PlotUnavailable: matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("plots need matplotlib: pip install 'switchyard-router[eval]'") from exc
    return plt


def plot_result(result: EvalResult, path: str | Path, *, title: str | None = None) -> Path:
    """Draws the route (curve when swept, else its point) against the baselines and saves a PNG.

    Two-tier routes: quality against cost (USD when every row has one, else the capable share),
    with always-efficient, always-capable, the random line between them, the oracle curve and
    the 95%-of-capable quality line. Other routes: one point per row.

    Raises:
        PlotUnavailable: matplotlib is missing.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    try:
        if result.two_tier is not None:
            _two_tier(ax, result)
        else:
            _points(ax, result)
        ax.set_ylabel("quality")
        ax.set_title(title or f"route {result.route} on {result.dataset} ({result.row.n} items)", fontsize=10)
        return save_figure(fig, ax, path, legend_size=8)
    finally:
        plt.close(fig)


def save_figure(fig: Any, ax: Any, path: str | Path, *, legend_size: int) -> Path:
    """Finishes a plot as every plot of ``eval`` is (grid, legend bottom right) and writes the PNG."""
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def _two_tier(ax: Any, result: EvalResult) -> None:
    tt = result.two_tier
    assert tt is not None and result.tiers is not None
    rows = {r.name: r for r in result.baselines}
    use_usd = result.row.cost_usd is not None and tt.capable_cost_usd is not None and tt.efficient_cost_usd is not None

    def x(p: Point | Row) -> float:
        if use_usd and p.cost_usd is not None:
            return p.cost_usd
        share = p.share if isinstance(p, Point) else p.capable_share
        return 100.0 * (share or 0.0)

    cap, eff = result.tiers.capable, result.tiers.efficient
    lo, hi = rows[f"always {eff}"], rows[f"always {cap}"]
    ax.plot([x(lo), x(hi)], [lo.quality, hi.quality], "--", color="grey", lw=1, label="random (any share)")
    ax.plot([x(lo)], [lo.quality], "s", color="tab:green", label=f"always {eff}")
    ax.plot([x(hi)], [hi.quality], "s", color="tab:red", label=f"always {cap}")
    strong = [r.outcomes[cap].quality for r in result.items if r.decided.skipped is None]
    weak = [r.outcomes[eff].quality for r in result.items if r.decided.skipped is None]
    sc = [r.costs[cap] for r in result.items if r.decided.skipped is None]
    wc = [r.costs[eff] for r in result.items if r.decided.skipped is None]
    known = use_usd and all(v is not None for v in (*sc, *wc))
    oracle = oracle_curve(
        strong,
        weak,
        strong_cost=[v or 0.0 for v in sc] if known else None,
        weak_cost=[v or 0.0 for v in wc] if known else None,
    )
    ax.plot([x(p) for p in oracle], [p.quality for p in oracle], ":", color="tab:purple", lw=1, label="oracle")
    best = rows["oracle"]
    ax.plot([x(best)], [best.quality], "*", color="tab:purple", ms=9)
    ax.axhline(0.95 * tt.capable_quality, color="tab:red", lw=0.6, alpha=0.5, label=f"95% of {cap}")
    apgr = f" (APGR {tt.apgr:.3f})" if tt.apgr is not None else ""
    if tt.swept:
        xs, ys = [x(p) for p in tt.curve], [p.quality for p in tt.curve]
        ax.plot(xs, ys, "-", color="tab:blue", lw=1.5, label=f"route {result.route}, every threshold{apgr}")
        ax.plot([x(result.row)], [result.row.quality], "o", color="tab:blue", label="as configured")
    else:
        ax.plot([x(result.row)], [result.row.quality], "o", color="tab:blue", label=f"route {result.route}{apgr}")
    ax.set_xlabel("cost (USD)" if use_usd else f"calls to {cap} (%)")


def _points(ax: Any, result: EvalResult) -> None:
    rows = [result.row, *result.baselines]
    use_usd = all(r.cost_usd is not None for r in rows)
    for r in rows:
        xv = r.cost_usd if use_usd and r.cost_usd is not None else 0.0
        ax.plot([xv], [r.quality], "o", label=r.name)
    ax.set_xlabel("cost (USD)" if use_usd else "(no cost data)")
