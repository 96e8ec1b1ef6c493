"""Files of ``switchyard replay --suite``: the per-run table, and the sweep's CSV and one
cost-vs-resolve panel per pair.

Layer: ``eval``. matplotlib (the ``eval`` extra) is imported only when the plot is drawn.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from switchyard.eval.plot import PlotUnavailable
from switchyard.eval.suite_replay import SuiteResult

SUITE_SWEEP_COLUMNS = (
    "key",
    "value",
    "pair",
    "tasks",
    "resolve",
    "cost_usd",
    "cost_saved",
    "points_lost",
    "run_share",
    "null_points_lost",
    "null_cost_saved",
    "points_lost_low",
    "points_lost_high",
    "cost_saved_low",
    "cost_saved_high",
    "vs_null_low",
    "vs_null_high",
)


SUITE_RUN_COLUMNS = (
    "pair",
    "run",
    "task",
    "n_turns",
    "first_switch_turn",
    "switch_source",
    "switch_reason",
    "switch_score",
    "max_score",
    "capable_calls",
    "resolve",
    "cost_usd",
    "never_resolve",
    "never_cost_usd",
    "router_cost_usd",
)


def write_suite_runs(result: SuiteResult, path: str | Path) -> Path:
    """Every pair's runs, one line each: CSV, or JSONL when the name ends in ``.jsonl``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [r for p in result.score.pairs for r in p.per_run]
    if out.suffix == ".jsonl":
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return out
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=SUITE_RUN_COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" if v is None else v for k, v in r.items()})
    return out


def _f(v: float | None, digits: int = 6) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def write_suite_sweep_csv(points: Sequence[SuiteResult], key: str, path: str | Path) -> Path:
    """One line per value and pair (and pooled group): the route, its null and the intervals."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SUITE_SWEEP_COLUMNS)
        for p in points:
            value = None if p.setting is None else p.setting[1]
            entries: list[tuple[str, str, Any]] = [(s.name, str(s.tasks), s) for s in p.score.pairs]
            entries += [(g.name, "", g) for g in p.score.pooled]
            for name, tasks, e in entries:
                r, n, iv = e.row("route"), e.row("random latch"), e.intervals
                lost, saved, vs = iv.get("points_lost"), iv.get("cost_saved"), iv.get("points_lost_vs_null")
                writer.writerow(
                    [
                        key,
                        value,
                        name,
                        tasks,
                        _f(r.resolve),
                        _f(r.cost_usd),
                        _f(r.cost_saved),
                        _f(r.points_lost, 4),
                        _f(r.run_share),
                        _f(n.points_lost, 4),
                        _f(n.cost_saved),
                        _f(lost and lost.low, 4),
                        _f(lost and lost.high, 4),
                        _f(saved and saved.low),
                        _f(saved and saved.high),
                        _f(vs and vs.low, 4),
                        _f(vs and vs.high, 4),
                    ]
                )
    return out


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("plots need matplotlib: pip install 'switchyard-router[eval]'") from exc
    return plt


def plot_suite_sweep(points: Sequence[SuiteResult], key: str, path: str | Path) -> Path:
    """Per pair, mean USD per task (x) against resolve rate (y): the route at each value of
    ``key``, its null per value, always-efficient, always-capable, the oracle, and the dashed line
    of a random task-level mix of the two models.

    Raises:
        PlotUnavailable: matplotlib is missing.
        ValueError: No points.
    """
    if not points:
        raise ValueError("no sweep points to plot")
    plt = _pyplot()
    names = [s.name for s in points[0].score.pairs]
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), dpi=100, squeeze=False)
    try:
        for i, name in enumerate(names):
            ax = axes[i // cols][i % cols]
            series = [next(s for s in p.score.pairs if s.name == name) for p in points]
            first = series[0]
            eff, cap, oracle = first.row("always-efficient"), first.row("always-capable"), first.row("oracle")
            ax.plot([eff.cost_usd, cap.cost_usd], [eff.resolve, cap.resolve], "--", color="0.6", lw=1, label="mix")
            xs = [s.row("route").cost_usd for s in series]
            ys = [s.row("route").resolve for s in series]
            ax.plot(xs, ys, "o-", color="tab:blue", label=f"route ({key})")
            for p, x, y in zip(points, xs, ys, strict=True):
                value = "" if p.setting is None else str(p.setting[1])
                ax.annotate(value, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            nulls = [s.row("random latch") for s in series]
            ax.plot([n.cost_usd for n in nulls], [n.resolve for n in nulls], "x", color="tab:red", label="null")
            ax.plot([eff.cost_usd], [eff.resolve], "s", color="tab:green", label="always-efficient")
            ax.plot([cap.cost_usd], [cap.resolve], "s", color="tab:purple", label="always-capable")
            ax.plot([oracle.cost_usd], [oracle.resolve], "*", color="tab:orange", ms=10, label="oracle")
            ax.set_title(f"{name} ({first.tasks} tasks)", fontsize=8)
            ax.set_xlabel("USD per task", fontsize=7)
            ax.set_ylabel("resolve rate", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.legend(fontsize=6, loc="lower right")
        for j in range(len(names), rows * cols):
            axes[j // cols][j % cols].axis("off")
        fig.tight_layout()
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out)
        return out
    finally:
        plt.close(fig)


__all__ = ["SUITE_RUN_COLUMNS", "SUITE_SWEEP_COLUMNS", "plot_suite_sweep", "write_suite_runs", "write_suite_sweep_csv"]
