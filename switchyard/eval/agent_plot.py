"""The sweep of ``switchyard replay --sweep``: CSV and the cost-vs-resolve-rate PNG.

Layer: ``eval``. matplotlib (the ``eval`` extra) is imported only when the plot is drawn.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from switchyard.eval.agent_replay import SweepPoint
from switchyard.eval.plot import pyplot, save_figure

SWEEP_COLUMNS = (
    "key",
    "value",
    "case",
    "runs",
    "resolve",
    "cost_usd",
    "cost_saved",
    "points_lost",
    "task_share",
    "call_share",
    "mean_f",
    "null_resolve",
    "null_cost_usd",
    "points_lost_low",
    "points_lost_high",
    "cost_saved_low",
    "cost_saved_high",
)


def write_sweep_csv(points: Sequence[SweepPoint], key: str, path: str | Path) -> Path:
    """One line per value and case: the route's numbers, the null's and the intervals."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SWEEP_COLUMNS)
        for p in points:
            for case in p.result.report.cases:
                r = case.row("route")
                null = case.row("random latch")
                iv = case.intervals
                lost = iv.get("points_lost")
                saved = iv.get("cost_saved")
                writer.writerow(
                    [
                        key,
                        p.value,
                        case.case,
                        len(p.result.runs.runs),
                        f"{r.resolve:.6f}",
                        f"{r.cost_usd:.6f}",
                        f"{r.cost_saved:.6f}",
                        f"{r.points_lost:.4f}",
                        f"{r.task_share:.6f}",
                        "" if r.call_share is None else f"{r.call_share:.6f}",
                        "" if r.mean_f is None else f"{r.mean_f:.6f}",
                        f"{null.resolve:.6f}",
                        f"{null.cost_usd:.6f}",
                        "" if lost is None else f"{lost.low:.4f}",
                        "" if lost is None else f"{lost.high:.4f}",
                        "" if saved is None else f"{saved.low:.6f}",
                        "" if saved is None else f"{saved.high:.6f}",
                    ]
                )
    return out


def plot_sweep(points: Sequence[SweepPoint], key: str, path: str | Path, *, title: str | None = None) -> Path:
    """Mean USD per task (x) against resolve rate (y): the route at each value (base case, with
    the optimistic/pessimistic range as bars), its random-latch null, and the always-efficient,
    always-capable and oracle points; the dashed line is a random task-level mix of the two models.

    Raises:
        PlotUnavailable: matplotlib is missing.
        ValueError: No points.
    """
    if not points:
        raise ValueError("no sweep points to plot")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.4), dpi=100)
    try:
        base = points[0].result.report.case("base")
        eff, cap, oracle = base.row("always-efficient"), base.row("always-capable"), base.row("oracle")
        ax.plot(
            [eff.cost_usd, cap.cost_usd],
            [eff.resolve, cap.resolve],
            "--",
            color="0.6",
            lw=1,
            label="random task-level mix",
        )
        xs = [p.route_row().cost_usd for p in points]
        ys = [p.route_row().resolve for p in points]
        lows = [min(p.route_row(c).resolve for c in ("base", "pessimistic")) for p in points]
        highs = [max(p.route_row(c).resolve for c in ("base", "optimistic")) for p in points]
        ax.errorbar(
            xs,
            ys,
            yerr=[[y - lo for y, lo in zip(ys, lows, strict=True)], [hi - y for y, hi in zip(ys, highs, strict=True)]],
            fmt="o-",
            color="tab:blue",
            capsize=3,
            label=f"route, {key} (bars: pessimistic-optimistic)",
        )
        for p, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(str(p.value), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
        nulls = [p.result.report.case("base").row("random latch") for p in points]
        ax.plot(
            [n.cost_usd for n in nulls],
            [n.resolve for n in nulls],
            "x",
            color="tab:red",
            label="random latch (same share, timing)",
        )
        ax.plot([eff.cost_usd], [eff.resolve], "s", color="tab:green", label="always-efficient")
        ax.plot([cap.cost_usd], [cap.resolve], "s", color="tab:purple", label="always-capable")
        ax.plot([oracle.cost_usd], [oracle.resolve], "*", color="tab:orange", ms=11, label=oracle.name)
        ax.set_xlabel("mean USD per task (base case)")
        ax.set_ylabel("resolve rate")
        n = points[0].result.report.tasks
        ax.set_title(title or f"route {points[0].result.route}: sweep of {key} ({n} tasks)", fontsize=10)
        return save_figure(fig, ax, path, legend_size=7)
    finally:
        plt.close(fig)
