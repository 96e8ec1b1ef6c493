"""``switchyard replay --outcomes``: the counterfactual agent-replay benchmark (flags, run, table)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from switchyard.cli._common import fail
from switchyard.cli.eval import log_level
from switchyard.config.load import LoadedConfig

if TYPE_CHECKING:
    from switchyard.eval.counterfactual import Scoring

CASE_TITLES = {
    "base": "base case: after the first switch the task is the capable model's own full trial",
    "optimistic": "optimistic bound: best of both outcomes; capable cost scaled to the remaining share",
    "pessimistic": "pessimistic bound: full capable trial; a late switch recovers less",
}


def add_outcome_args(p: argparse.ArgumentParser) -> None:
    """The counterfactual's flags."""
    g = p.add_argument_group("counterfactual scoring (with --outcomes)")
    g.add_argument("--outcomes", metavar="TASKS.jsonl", help="per-task outcomes and costs of both models")
    g.add_argument(
        "--efficient-model",
        metavar="MODEL",
        help="outcome model of the efficient tier (default: its target's model id)",
    )
    g.add_argument(
        "--capable-model", metavar="MODEL", help="outcome model of the capable tier (default: its target's model id)"
    )
    g.add_argument(
        "--tier",
        action="append",
        default=[],
        metavar="TARGET=TIER",
        help="tier (capable/efficient) of another target; repeatable",
    )
    g.add_argument("--task-level", action="store_true", help="decide only each run's first turn (task-level routing)")
    g.add_argument("--oracle-points", type=float, default=6.0, metavar="P", help="the oracle's budget of points lost")
    g.add_argument(
        "--bootstrap", type=int, default=1000, metavar="N", help="task-bootstrap resamples (0: no intervals)"
    )
    g.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    g.add_argument(
        "--runs-out",
        metavar="FILE",
        help="per-run table, .csv or .jsonl (default: <OUT stem>-runs.csv beside --out, else replay-<route>-runs.csv)",
    )
    g.add_argument("--sweep", metavar="KEY=v1,v2,...", help="replay once per value of one route setting (dotted path)")
    g.add_argument(
        "--sweep-out", metavar="PREFIX", help="sweep files PREFIX.csv and PREFIX.png (default: replay-<route>-sweep)"
    )
    g.add_argument(
        "--decision-log", metavar="FILE", help="score logged decisions (serve --decision-log, replay --out) instead"
    )
    g.add_argument("--sessions", metavar="FILE", help="with --decision-log: JSONL of session_id -> task_id")
    g.add_argument(
        "--session-task",
        metavar="REGEX",
        help="with --decision-log: the task id is REGEX's first group in the session id",
    )


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise ValueError(f"{flag} {v!r}: expected TARGET=TIER")
        out[key] = val
    return out


def run_outcomes(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    """Runs the counterfactual; prints the table (or JSON) and writes the per-run table and sweep."""
    from switchyard.config.load import ConfigError
    from switchyard.eval.agent_replay import AgentReplay, parse_sweep, prepare, score_log, score_replay, sweep
    from switchyard.eval.counterfactual import CounterfactualError
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.evaluate import EvalError
    from switchyard.eval.paired import PairedError, read_session_tasks, write_runs
    from switchyard.eval.plot import PlotUnavailable

    if args.decision_log and args.trajectories:
        return fail("give --trajectories (replay the runs) or --decision-log (score logged decisions), not both")
    if not args.decision_log and not args.trajectories:
        return fail("give --trajectories FILE or --decision-log FILE")
    if args.decision_log and (args.sweep or args.task_level):
        return fail("--sweep and --task-level need --trajectories: a decision log cannot be decided again")
    if (args.sessions or args.session_task) and not args.decision_log:
        return fail("--sessions and --session-task go with --decision-log")
    if args.bootstrap < 0:
        return fail("--bootstrap must be >= 0")
    # Always all three: the flags' defaults are simulate's (tests/eval check they agree).
    sim: Scoring = {"oracle_points": args.oracle_points, "resamples": args.bootstrap, "seed": args.seed}
    progress = False if args.no_progress else None
    fh: IO[bytes] | None = None
    try:
        setup = prepare(
            loaded,
            args.route,
            args.outcomes,
            capable_target=args.capable,
            efficient_target=args.efficient,
            capable_model=args.capable_model,
            efficient_model=args.efficient_model,
            tier_flags=_pairs(args.tier, "--tier"),
        )
        swept = parse_sweep(args.sweep) if args.sweep else None
        with log_level(args.log_level):
            if args.decision_log:
                sessions = read_session_tasks(args.sessions) if args.sessions else None
                result = score_log(
                    loaded,
                    args.route,
                    args.decision_log,
                    setup,
                    session_tasks=sessions,
                    session_pattern=args.session_task,
                    **sim,
                )
            else:
                import orjson

                out = Path(args.out or f"replay-{args.route}.jsonl")
                out.parent.mkdir(parents=True, exist_ok=True)
                fh = out.open("wb")
                sink = fh

                def write(turn: Any) -> None:
                    sink.write(orjson.dumps(turn.to_dict()) + b"\n")

                kw = {"first_only": args.task_level, "limit": args.limit, "concurrency": args.concurrency, **sim}
                result = asyncio.run(
                    score_replay(loaded, args.route, args.trajectories, setup, progress=progress, on_turn=write, **kw)
                )

                async def one(cfg: LoadedConfig) -> AgentReplay:
                    return await score_replay(cfg, args.route, args.trajectories, setup, progress=False, **kw)

                points = asyncio.run(sweep(loaded, args.route, swept[0], swept[1], one)) if swept else []
    except KeyError as exc:  # str() of a KeyError quotes its message
        return fail(str(exc).strip("'\""))
    except (PairedError, EvalError, DatasetError, CounterfactualError, ConfigError, ValueError) as exc:
        return fail(str(exc))
    finally:
        if fh is not None:
            fh.close()
    default_runs = f"replay-{args.route}-runs.csv"
    if args.out and not args.decision_log:  # the per-run table goes beside the per-turn file
        turns = Path(args.out)
        default_runs = str(turns.with_name(turns.stem + "-runs.csv"))
    runs_path = write_runs(result.report, args.runs_out or default_runs)
    data = result.to_dict()
    data["files"] = {"runs": str(runs_path)}
    if not args.decision_log:
        data["files"]["turns"] = str(args.out or f"replay-{args.route}.jsonl")
    if swept:
        from switchyard.eval.agent_plot import plot_sweep, write_sweep_csv

        prefix = args.sweep_out or f"replay-{args.route}-sweep"
        data["sweep"] = {"key": swept[0], "points": [p.to_dict() for p in points]}
        data["files"]["sweep_csv"] = str(write_sweep_csv(points, swept[0], f"{prefix}.csv"))
        try:
            data["files"]["sweep_png"] = str(plot_sweep(points, swept[0], f"{prefix}.png"))
        except PlotUnavailable as exc:
            data["notes"].append(f"no plot: {exc}")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print_report(data)
    return 0


def _pct(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{100 * v:.{digits}f}%"


def print_report(data: dict[str, Any]) -> None:
    """The text tables."""
    m = data["models"]
    print(
        f"route {data['route']} ({data['router']}): {data['runs']} runs of {data['tasks']} tasks scored "
        f"({data['source']}); efficient {m['efficient']}, capable {m['capable']}"
    )
    if data["skipped"]:
        print(f"left out {data['skipped']} run(s):")
        for why, n in data["skipped_reasons"].items():
            print(f"  {n} x {why} (e.g. {data['skipped_examples'].get(why, '-')})")
    if data["outcome_tasks_without_runs"]:
        print(
            f"{data['outcome_tasks_without_runs']} of {data['outcome_tasks']} tasks in the outcomes file "
            "have no runs (not scored)"
        )
    header = (
        f"  {'policy':<22} {'resolve':>7} {'USD/task':>9} {'saved':>6} {'pts lost':>8} "
        f"{'tasks>cap':>9} {'calls>cap':>9} {'1st switch':>10} {'mean f':>6}"
    )
    for case, body in data["cases"].items():
        print(f"\n{CASE_TITLES[case]}")
        print(header)
        for r in body["rows"]:
            turn = "-" if r["first_switch_turn"] is None else f"{r['first_switch_turn']:g}"
            mean_f = "-" if r["mean_f"] is None else f"{r['mean_f']:.2f}"
            print(
                f"  {r['name']:<22} {_pct(r['resolve'], 1):>7} {r['cost_usd']:>9.3f} {_pct(r['cost_saved']):>6} "
                f"{r['points_lost']:>+8.1f} {_pct(r['task_share']):>9} {_pct(r['call_share']):>9} "
                f"{turn:>10} {mean_f:>6}"
            )
        iv = body["intervals"]
        if iv:
            lost, saved = iv["points_lost"], iv["cost_saved"]
            dl, ds = iv["points_lost_vs_null"], iv["cost_saved_vs_null"]
            route = body["rows"][0]
            null = body["rows"][3]
            print(
                f"  route: points lost {route['points_lost']:+.1f} [95% {lost['low']:+.1f}, {lost['high']:+.1f}], "
                f"cost saved {_pct(route['cost_saved'])} [{_pct(saved['low'])}, {_pct(saved['high'])}]"
            )
            print(
                f"  route - null: points lost {route['points_lost'] - null['points_lost']:+.1f} "
                f"[{dl['low']:+.1f}, {dl['high']:+.1f}], "
                f"cost saved {100 * (route['cost_saved'] - null['cost_saved']):+.0f} pts "
                f"[{100 * ds['low']:+.0f}, {100 * ds['high']:+.0f}]"
            )
    b = data["bootstrap"]
    print(f"\nintervals: task bootstrap, {b['resamples']} resamples, seed {b['seed']}, 95% percentile")
    if data["router_calls"]:
        print(
            f"router's own model calls: {data['router_calls']} ({data['router_input_tokens']} in / "
            f"{data['router_output_tokens']} out tokens), added to the route's cost on every decision"
        )
    sweep = data.get("sweep")
    if sweep:
        print(f"\nsweep of {sweep['key']} (base case):")
        print(
            f"  {'value':>10} {'resolve':>7} {'USD/task':>9} {'saved':>6} {'pts lost':>8} {'vs null':>8} "
            f"{'tasks>cap':>9}"
        )
        for p in sweep["points"]:
            r, n = p["base"]["route"], p["base"]["null"]
            print(
                f"  {p['value']!s:>10} {_pct(r['resolve'], 1):>7} {r['cost_usd']:>9.3f} {_pct(r['cost_saved']):>6} "
                f"{r['points_lost']:>+8.1f} {r['points_lost'] - n['points_lost']:>+8.1f} {_pct(r['task_share']):>9}"
            )
    reported = data.get("reported")
    if reported is not None:
        print(
            f"\nthe sessions' own feedback (POST /v1/feedback lines of the log): {reported['with_feedback']} of "
            f"{reported['sessions']} sessions reported, {reported['unmatched']} report(s) matching no session"
        )
        for name in ("resolved", "score", "reward"):
            found = reported.get(name)
            if found:
                bounds = "" if found["low"] is None else f" [95% {found['low']:.3f}, {found['high']:.3f}]"
                print(
                    f"  reported {name}: mean {found['mean']:.3f}{bounds} (n={found['n']})"
                    " — the route's row above predicts it"
                )
    for note in data["notes"]:
        print(f"note: {note}")
    print("wrote " + ", ".join(data["files"].values()))
