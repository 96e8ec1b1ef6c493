"""``switchyard replay --suite``: one route on every pair of a suite file (flags, run, table)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from switchyard.cli._common import fail
from switchyard.cli.eval import log_level
from switchyard.config.load import LoadedConfig


def add_suite_args(p: argparse.ArgumentParser) -> None:
    """The suite's flags (``--sweep``, ``--bootstrap``, ``--seed``, ``--oracle-points`` are shared)."""
    g = p.add_argument_group("agent suite (with --suite)")
    g.add_argument("--suite", metavar="SUITE.yaml", help="datasets x model pairs to replay the route on")
    g.add_argument("--split", metavar="NAME", help="score only the tasks of this split of the suite file")
    g.add_argument("--pair", action="append", default=[], metavar="NAME", help="only this pair (repeatable)")
    g.add_argument(
        "--pricing",
        choices=("cache", "list"),
        help="price the datasets of own runs with prompt caching (their default) or at list price",
    )
    g.add_argument("--data-dir", metavar="DIR", help="resolve the suite's data paths here (default: its data_dir)")
    g.add_argument(
        "--list-split",
        action="store_true",
        help="print the task ids of --split (all tasks without it) per dataset as JSON, and stop",
    )


def run_suite_cmd(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    """Runs the suite; prints the table (or JSON) and writes the sweep."""
    from switchyard.config.load import ConfigError
    from switchyard.eval.agent_replay import parse_sweep
    from switchyard.eval.cache_cost import CostError
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.evaluate import EvalError
    from switchyard.eval.paired import PairedError
    from switchyard.eval.plot import PlotUnavailable
    from switchyard.eval.suite import SuiteError, load_suite
    from switchyard.eval.suite_replay import run_suite, split_tasks, sweep_suite

    clash = [f for f in ("trajectories", "outcomes", "decision_log") if getattr(args, f)]
    if clash:
        return fail(f"--suite replaces --{clash[0].replace('_', '-')}: the suite file names the data")
    if args.bootstrap < 0:
        return fail("--bootstrap must be >= 0")
    kw: dict[str, Any] = {
        "split": args.split,
        "pairs": args.pair or None,
        "pricing": args.pricing,
        "capable_target": args.capable,
        "efficient_target": args.efficient,
        "resamples": args.bootstrap,
        "seed": args.seed,
        "oracle_points": args.oracle_points,
        "concurrency": args.concurrency,
    }
    fh: IO[bytes] | None = None
    try:
        suite = load_suite(args.suite, data_dir=args.data_dir)
        if args.list_split:
            print(json.dumps({"split": args.split, "tasks": split_tasks(suite, args.split)}, indent=2))
            return 0
        kw["tier_flags"] = _tier_flags(args.tier)
        swept = parse_sweep(args.sweep) if args.sweep else None
        with log_level(args.log_level):
            if args.out:
                fh = _open(args.out)
            result = asyncio.run(run_suite(loaded, args.route, suite, on_turn=_writer(fh), **kw))
            points = asyncio.run(sweep_suite(loaded, args.route, suite, swept[0], swept[1], **kw)) if swept else []
    except KeyError as exc:
        return fail(str(exc).strip("'\""))
    except (SuiteError, PairedError, EvalError, DatasetError, ConfigError, CostError, ValueError) as exc:
        return fail(str(exc))
    finally:
        if fh is not None:
            fh.close()
    data = result.to_dict()
    data["files"] = {"turns": args.out} if args.out else {}
    if args.runs_out:
        from switchyard.eval.suite_plot import write_suite_runs

        data["files"]["runs"] = str(write_suite_runs(result, args.runs_out))
    if swept:
        from switchyard.eval.suite_plot import plot_suite_sweep, write_suite_sweep_csv

        prefix = args.sweep_out or f"replay-{args.route}-suite-sweep"
        data["sweep"] = {"key": swept[0], "points": [sweep_point(p) for p in points]}
        data["files"]["sweep_csv"] = str(write_suite_sweep_csv(points, swept[0], f"{prefix}.csv"))
        try:
            data["files"]["sweep_png"] = str(plot_suite_sweep(points, swept[0], f"{prefix}.png"))
        except PlotUnavailable as exc:
            data["notes"].append(f"no plot: {exc}")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print_suite(data)
    return 0


def _open(path: str) -> IO[bytes]:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.open("wb")


def _writer(fh: IO[bytes] | None) -> Callable[[str, Any], None] | None:
    """Writes each decided turn as one JSON line, with its pair (``--out``)."""
    if fh is None:
        return None
    import orjson

    sink = fh

    def write(pair: str, turn: Any) -> None:
        sink.write(orjson.dumps({"pair": pair, **turn.to_dict()}) + b"\n")

    return write


def _tier_flags(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise ValueError(f"--tier {v!r}: expected TARGET=TIER")
        out[key] = val
    return out


def sweep_point(result: Any) -> dict[str, Any]:
    """One sweep value: the route's and the null's rows per pair and pooled group."""
    out: dict[str, Any] = {"value": result.setting[1], "pairs": {}, "pooled": {}}
    for p in result.score.pairs:
        out["pairs"][p.name] = {"route": p.row("route").to_dict(), "null": p.row("random latch").to_dict()}
    for g in result.score.pooled:
        out["pooled"][g.name] = {"route": g.row("route").to_dict(), "null": g.row("random latch").to_dict()}
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _iv(iv: dict[str, Any] | None, key: str, pct: bool) -> str:
    if not iv or key not in iv:
        return ""
    lo, hi = iv[key]["low"], iv[key]["high"]
    return f"[{100 * lo:+.0f}, {100 * hi:+.0f}]" if pct else f"[{lo:+.1f}, {hi:+.1f}]"


def _rows_of(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"].split(" (")[0]: r for r in entry["rows"]}


def print_suite(data: dict[str, Any]) -> None:
    """The text table: pairs, pooled groups, then the reference rows."""
    split = data["split"] or "all tasks"
    print(
        f"route {data['route']} ({data['router']}) of {data['config']} on {data['suite']}: split {split}, "
        f"{data['decisions']} decisions in {data['seconds']:.1f} s"
    )
    print("points lost and cost saved against always-capable; [95% task-bootstrap interval]; cap = runs escalated")
    head = (
        f"  {'pair':<40} {'tasks':>5} {'pts lost':>8} {'[95%]':>14} {'saved':>6} {'[95%]':>11} {'cap':>5} "
        f"{'k':>3} | {'null lost':>9} {'saved':>6} | {'vs null':>7} {'[95%]':>14} {'saved':>6} {'[95%]':>11}"
    )
    print(head)
    entries = [(p["name"], p, str(p["tasks"])) for p in data["pairs"]]
    entries += [(f"{g['name']} ({len(g['pairs'])} pairs)", g, "") for g in data["pooled"]]
    for name, entry, tasks in entries:
        rows = _rows_of(entry)
        r, n = rows["route"], rows["random latch"]
        iv = entry["intervals"]
        k = "-" if r["first_switch_turn"] is None else f"{r['first_switch_turn']:g}"
        mark = "" if entry.get("pooled", True) else " *"
        print(
            f"  {(name + mark)[:40]:<40} {tasks:>5} {r['points_lost']:>+8.1f} {_iv(iv, 'points_lost', False):>14} "
            f"{_pct(r['cost_saved']):>6} {_iv(iv, 'cost_saved', True):>11} {_pct(r['run_share']):>5} {k:>3} | "
            f"{n['points_lost']:>+9.1f} {_pct(n['cost_saved']):>6} | "
            f"{r['points_lost'] - n['points_lost']:>+7.1f} {_iv(iv, 'points_lost_vs_null', False):>14} "
            f"{100 * (r['cost_saved'] - n['cost_saved']):>+5.0f}p {_iv(iv, 'cost_saved_vs_null', True):>11}"
        )
    print("\nreferences (points lost / cost saved against always-capable; resolve and USD per task)")
    print(
        f"  {'pair':<40} {'always-efficient':>17} {'oracle':>13} {'resolve eff / cap':>18} "
        f"{'USD/task eff / cap':>20} {'pricing':>8}"
    )
    for name, entry, _ in entries:
        rows = _rows_of(entry)
        e, c, o = rows["always-efficient"], rows["always-capable"], rows["oracle"]
        pricing = entry.get("pricing", "")
        if entry.get("stand_in_runs"):
            pricing += "†"
        print(
            f"  {name[:40]:<40} {e['points_lost']:>+7.1f} / {_pct(e['cost_saved']):>5}   "
            f"{o['points_lost']:>+5.1f} / {_pct(o['cost_saved']):>4} "
            f"{100 * e['resolve']:>8.1f}% / {100 * c['resolve']:>5.1f}% "
            f"{e['cost_usd']:>9.4f} / {c['cost_usd']:>8.4f} {pricing:>8}"
        )
    b = data["bootstrap"]
    print(
        f"\nnull: a random latch with the route's share of escalated runs and its switch positions (exact "
        f"expectation); oracle: per task, within {data['oracle_points']:g} points; intervals: {b['resamples']} "
        f"task resamples, seed {b['seed']}; pooled: mean over pairs"
    )
    if any(not p["pooled"] for p in data["pairs"]):
        print("* not pooled (see the pair's note)")
    if any(p["stand_in_runs"] for p in data["pairs"]):
        print("† the runs are another model's, standing in for the efficient model's")
    for p in data["pairs"]:
        if p["note"]:
            print(f"note: {p['name']}: {p['note']}")
        for why, count in p["skipped"].items():
            print(f"note: {p['name']}: left out {count} run(s): {why}")
    for note in data["notes"]:
        print(f"note: {note}")
    sweep = data.get("sweep")
    if sweep:
        print(f"\nsweep of {sweep['key']}: points lost / cost saved (route, null)")
        for point in sweep["points"]:
            cells = [
                f"{name}: {v['route']['points_lost']:+.1f}/{_pct(v['route']['cost_saved'])} "
                f"(null {v['null']['points_lost']:+.1f}/{_pct(v['null']['cost_saved'])})"
                for name, v in {**point["pairs"], **point["pooled"]}.items()
            ]
            print(f"  {point['value']!s}:")
            for cell in cells:
                print(f"    {cell}")
    if data["files"]:
        print("wrote " + ", ".join(data["files"].values()))
