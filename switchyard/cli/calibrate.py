"""``switchyard calibrate``: choose a route's threshold for a capable share or a budget."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from switchyard.cli._common import HelpFormatter, add_config_arg, fail, load_or_exit, route_or_fail
from switchyard.cli.eval import add_run_args, add_selection_args, log_level, open_dataset, pairs

_EPILOG = """\
Examples:
  # 30% of requests to the capable tier, measured on your own proxy traffic
  switchyard serve -c router.yaml --decision-log decisions.jsonl      # ... later:
  switchyard calibrate -c router.yaml --route agent --decision-log decisions.jsonl --capable-share 0.3

  # at most $50 over the requests of a dataset, and write the result into a copy of the config
  switchyard calibrate -c router.yaml --route agent --dataset mine.jsonl --budget-usd 50 --write tuned.yaml

The route's type says which key holds its threshold (it sends a request to the capable tier
when the router's score >= threshold); types without one are refused. --budget-usd is the total
spend over the requests given (a decision log prices every request on each tier from its token
counts and the targets' prices). --write keeps comments and layout and changes only that key.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="choose a route's threshold for a capable share or a budget",
        description="Pick the threshold that gives a wanted capable share or stays within a budget.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--route", required=True, help="route to calibrate")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", metavar="FILE", help="JSONL dataset run through the route (decide only)")
    source.add_argument("--decision-log", metavar="FILE", help="decision records written by serve --decision-log")
    goal = p.add_mutually_exclusive_group(required=True)
    goal.add_argument("--capable-share", type=float, metavar="FRACTION", help="wanted share on capable, e.g. 0.3")
    goal.add_argument("--budget-usd", type=float, metavar="USD", help="total spend allowed over these requests")
    add_selection_args(p)
    p.add_argument("--map", action="append", default=[], metavar="TARGET=MODEL", help="as for eval (dataset)")
    p.add_argument("--cost-per-call", action="append", default=[], metavar="TARGET=USD", help="as for eval")
    p.add_argument("--capable", metavar="TARGET", help="the capable tier, with --efficient")
    p.add_argument("--efficient", metavar="TARGET", help="the efficient tier, with --capable")
    p.add_argument("--write", metavar="OUT.yaml", help="write a copy of the config with the threshold set")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--concurrency", type=int, default=1, help="decisions in flight (dataset runs)")
    add_run_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    spec = route_or_fail(loaded, args.route)
    if spec is None:
        return 1
    key = spec.threshold_key()
    if key is None:
        return fail(f"route type {spec.type!r} has no threshold to calibrate (route {args.route!r})")
    if args.capable_share is not None and not 0.0 <= args.capable_share <= 1.0:
        return fail(f"--capable-share must be between 0 and 1, got {args.capable_share}")
    if args.write and Path(args.write).resolve() == Path(args.config).resolve():
        return fail("--write must name a new file: the original config stays as it is")
    from switchyard.config.load import ConfigError
    from switchyard.eval.calibrate import CalibrationError, calibrate_budget, calibrate_share, drift_by_group
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.decision_log import DecisionLogError
    from switchyard.eval.evaluate import EvalError, resolve_tiers
    from switchyard.eval.sources import scores_from_dataset, scores_from_log

    budget = args.budget_usd is not None
    try:
        tiers = resolve_tiers(loaded, args.route, args.capable, args.efficient)
        if args.dataset:
            with log_level(args.log_level):
                data = asyncio.run(
                    scores_from_dataset(
                        loaded,
                        args.route,
                        open_dataset(args),
                        tiers=tiers,
                        with_costs=budget,
                        mapping=pairs(args.map, "--map"),
                        cost_per_call={k: float(v) for k, v in pairs(args.cost_per_call, "--cost-per-call").items()},
                        concurrency=args.concurrency,
                        progress=False if args.no_progress else None,
                    )
                )
            where = args.dataset
        else:
            data, stats = scores_from_log(loaded, args.route, args.decision_log, tiers=tiers, with_costs=budget)
            where = args.decision_log
            if not data.scores:
                return fail(
                    f"{where} has no served request of route {args.route!r} "
                    f"({stats.lines} line(s): {stats.other_routes} of other routes, {stats.failed} failed, "
                    f"{stats.unreadable} unreadable)"
                )
        if tiers is None and any(s is None for s in data.scores):
            raise EvalError(
                "some requests carry no score and the route declares no tiers, so their share is unknown: "
                "give --capable and --efficient"
            )
        if budget:
            assert data.capable_cost is not None and data.efficient_cost is not None
            cal = calibrate_budget(
                data.scores, data.capable_cost, data.efficient_cost, args.budget_usd, fixed=data.fixed
            )
        else:
            cal = calibrate_share(data.scores, args.capable_share, fixed=data.fixed)
    except (EvalError, DatasetError, DecisionLogError, CalibrationError, ConfigError, ValueError, KeyError) as exc:
        return fail(str(exc).strip("'\""))
    # 12 significant digits: a scale conversion (1 - t) must not write float noise into the YAML.
    value = float(f"{spec.threshold_for_score(cal.threshold):.12g}")
    drift = drift_by_group(data.scores, data.fixed, data.groups, cal.threshold, None if budget else cal.share)
    written = None
    if args.write:
        try:
            written = _write(args, key, value)
        except ValueError as exc:
            return fail(str(exc))
    summary: dict[str, Any] = {
        "route": args.route,
        "router": spec.type,
        "key": f"routes.{args.route}.{key}",
        "threshold": value,
        "score_threshold": cal.threshold,
        "capable_share": cal.share,
        "requested_share": args.capable_share,
        "budget_usd": args.budget_usd,
        "cost_usd": cal.cost_usd,
        "n": cal.n,
        "scored": cal.scored,
        "skipped": sum(data.skipped.values()),
        "source": where,
        "written": written,
        "per_benchmark": [
            {
                "benchmark": d.group,
                "n": d.n,
                "capable_share": d.share,
                "threshold": None if d.threshold is None else float(f"{spec.threshold_for_score(d.threshold):.12g}"),
            }
            for d in drift
        ],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"set routes.{args.route}.{key}: {value}")
    goal = (
        f"budget ${args.budget_usd:g}, spends ${cal.cost_usd:.4f}"
        if budget and cal.cost_usd is not None
        else f"requested {args.capable_share:.1%}"
    )
    print(f"  capable share on {Path(where).name}: {cal.share:.1%} ({goal})")
    print(f"  {cal.n} request(s), {cal.scored} with a score; capable iff score >= {cal.threshold}")
    for why, n in data.skipped.items():
        print(f"  skipped {n}: {why}")
    if drift:
        worst = max(abs(d.share - cal.share) for d in drift)
        print(f"  per benchmark (the same threshold; drift up to {worst:.1%}):")
        for d in drift:
            own = "" if d.threshold is None else f"; its own threshold for {cal.share:.1%}: "
            own += "" if d.threshold is None else f"{spec.threshold_for_score(d.threshold):.6g}"
            print(f"    {d.group:<16} n={d.n:<6} capable {d.share:.1%}{own}")
    if written:
        print(f"wrote {written}")
    return 0


def _write(args: argparse.Namespace, key: str, threshold: float) -> str:
    from switchyard.config.load import ConfigError, load_config
    from switchyard.eval.yaml_edit import check_route_key, set_route_key

    text = Path(args.config).read_text(encoding="utf-8")
    edited = set_route_key(text, args.route, key, threshold)
    check_route_key(edited, args.route, key, threshold)
    out = Path(args.write)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(edited, encoding="utf-8")
    try:
        load_config(out)
    except ConfigError as exc:
        raise ValueError(f"wrote {out}, but it does not validate:\n{exc}") from None
    return str(out)
