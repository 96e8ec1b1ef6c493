"""``switchyard tune``: a route setting chosen on a suite's train split, scored on its test split."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from switchyard.cli._common import HelpFormatter, fail, load_or_exit
from switchyard.cli.tune_log import LOG_EPILOG, add_log_args, run_log, write_setting

_EPILOG = (
    """\
Examples:
  switchyard tune -c router.yaml --route agent --suite examples/eval/agent-suite.yaml \\
      --train dev --test test --grid confidence_threshold=0.3,0.5,0.7,0.9
  switchyard tune ... --max-points-lost 1 --write router-tuned.yaml      # write the new config
  switchyard tune ... --json

Every value of --grid and the config's own setting are replayed on the --train split of the
suite (recorded runs, the latch counterfactual, a task bootstrap; see docs/agent-suite.md). The
rule: among the settings that lose at most --max-points-lost points against always-capable on
train, the one that saves the most cost. When its train intervals overlap the current setting's
on both cost saved and points lost, the data cannot tell them apart: the current setting is kept
("too few to tell") and the numbers are printed. Then the current and the chosen setting are
scored once on the --test split, which the choice never saw: those two rows, with their 95 %
intervals and the random-latch null, are what the change is worth. --write FILE writes the config
with the chosen setting (comments kept) only when the setting changed. See docs/rollout.md.
"""
    + LOG_EPILOG
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tune",
        help="choose a route setting by replay: on a suite's train split, or on your own logged sessions",
        description=(
            "Choose one route setting by replay on a suite's train split (scored on its held-out test split), "
            "or on your own logged sessions joined with their feedback (cross-validated by session)."
        ),
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("-c", "--config", required=True, metavar="FILE", help="router config")
    p.add_argument("--route", required=True, help="the route to tune")
    p.add_argument("--suite", metavar="SUITE.yaml", help="datasets x model pairs (docs/agent-suite.md)")
    p.add_argument("--train", metavar="SPLIT", help="with --suite: the split the setting is chosen on")
    p.add_argument("--test", metavar="SPLIT", help="with --suite: the split it is scored on (held out)")
    p.add_argument("--grid", required=True, metavar="KEY=v1,v2,...", help="the route setting and its values")
    p.add_argument(
        "--max-points-lost",
        type=float,
        default=2.0,
        metavar="P",
        help="budget: most points lost against always-capable on train (default 2)",
    )
    p.add_argument("--pair", action="append", default=[], metavar="NAME", help="only this pair (repeatable)")
    p.add_argument("--data-dir", metavar="DIR", help="resolve the suite's data paths here")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="task-bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--write", metavar="FILE", help="write the config with the chosen setting here (when it changed)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_log_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.config.load import ConfigError
    from switchyard.eval.agent_replay import parse_sweep
    from switchyard.eval.cache_cost import CostError
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.paired import PairedError
    from switchyard.eval.suite import SuiteError, load_suite
    from switchyard.eval.tune import tune_suite

    if args.bootstrap < 1:
        return fail("--bootstrap must be >= 1: the too-few-to-tell check reads the intervals")
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    if args.decision_log:
        if args.suite or args.train or args.test or args.pair or args.data_dir:
            return fail("give --suite (recorded runs) or --decision-log (your own sessions), not both")
        return run_log(args, loaded)
    if not (args.suite and args.train and args.test):
        return fail("give --suite SUITE.yaml --train SPLIT --test SPLIT, or --decision-log LOG")
    try:
        key, values = parse_sweep(args.grid)
        suite = load_suite(args.suite, data_dir=args.data_dir)
        kw = {"pairs": args.pair or None, "resamples": args.bootstrap, "seed": args.seed}
        result = asyncio.run(
            tune_suite(
                loaded,
                args.route,
                suite,
                key,
                values,
                train=args.train,
                test=args.test,
                max_points_lost=args.max_points_lost,
                **kw,
            )
        )
    except KeyError as exc:
        return fail(str(exc).strip("'\""))
    except (SuiteError, PairedError, DatasetError, ConfigError, CostError, ValueError) as exc:
        return fail(str(exc))
    data = result.to_dict()
    if args.write and result.verdict == "changed":
        written = write_setting(args.config, args.write, args.route, key, result.chosen)
        if isinstance(written, int):
            return written
        data["wrote"] = written
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        _print(data)
    return 0


def _iv(point: dict[str, Any], key: str, pct: bool) -> str:
    found = point["intervals"].get(key)
    if not found:
        return ""
    lo, hi = found["low"], found["high"]
    return f"[{100 * lo:+.0f}, {100 * hi:+.0f}]" if pct else f"[{lo:+.1f}, {hi:+.1f}]"


def _row(point: dict[str, Any]) -> str:
    mark = " (current)" if point["current"] else ""
    null = point["null"]
    return (
        f"  {str(point['value']) + mark:<20} {point['points_lost']:>+8.1f} {_iv(point, 'points_lost', False):>14} "
        f"{100 * point['cost_saved']:>6.0f}% {_iv(point, 'cost_saved', True):>11} | "
        f"null {null['points_lost']:>+6.1f} / {100 * null['cost_saved']:>3.0f}%"
    )


def _print(data: dict[str, Any]) -> None:
    key = f"routes.{data['route']}.{data['key']}"
    head = f"  {'setting':<20} {'pts lost':>8} {'[95%]':>14} {'saved':>7} {'[95%]':>11} | random latch (null)"
    group = data["train"][0]["group"]
    print(f"train split {data['train_split']!r} ({group}): points lost / cost saved against always-capable")
    print(head)
    for point in data["train"]:
        print(_row(point))
    rule = f"the most cost saved within {data['max_points_lost']:g} points lost on train"
    print(f"\nrule: {rule} -> {data['verdict']}")
    if data["verdict"] == "changed":
        print(f"  {key}: {data['current']} -> {data['chosen']}")
    elif data["verdict"] == "kept: too few to tell":
        print("  the best setting's train intervals overlap the current one's on cost saved and points lost;")
        print(f"  keeping {key}: {data['current']} (more tasks, or a wider grid, may tell them apart)")
    print(f"\ntest split {data['test_split']!r} (held out: the choice never saw it)")
    print(head)
    for point in data["test"]:
        print(_row(point))
    if len(data["test"]) == 2 and len(data["test"][0]["pairs"]) > 1:
        now, new = data["test"]
        print("  per pair, current -> chosen (points lost / cost saved):")
        for name, a in now["pairs"].items():
            b = new["pairs"].get(name)
            if b is not None:
                print(
                    f"    {name[:40]:<40} {a['points_lost']:+.1f} / {100 * a['cost_saved']:.0f}% -> "
                    f"{b['points_lost']:+.1f} / {100 * b['cost_saved']:.0f}%"
                )
    for note in data["notes"]:
        print(f"note: {note}")
    if "wrote" in data:
        print(f"wrote {data['wrote']}")
