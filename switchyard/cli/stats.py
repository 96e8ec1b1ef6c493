"""``switchyard stats``: USD totals and savings against always-capable from a decision log."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from switchyard.cli._common import HelpFormatter, fail, load_or_exit

_EPILOG = """\
Examples:
  switchyard serve -c router.yaml --decision-log decisions.jsonl     # writes the log
  switchyard stats decisions.jsonl                                   # totals per route
  switchyard stats decisions.jsonl --sessions 20                     # and the 20 latest sessions
  switchyard stats decisions.jsonl -c router.yaml --json             # re-price with the config
  switchyard stats decisions.jsonl --experiment                      # routed vs control, shadow

Each request costs its answer plus the router's own work (judge calls, and feature extraction
priced by accounting.feature_extraction). "always-capable" prices the same tokens at the route's
capable target (or accounting.baseline.<route>); saved = always-capable - total. Records written
by this version carry those figures; with -c they are recomputed from the config (use it for
logs written before, or after changing prices). The proxy serves the same totals live at
GET /v1/stats ("usd") and as Prometheus metrics at GET /metrics. See docs/deployment.md.

--experiment compares, per route with an experiment: block, the sessions of each arm: cost per
session routed vs control, resolve rate / mean score / mean reward from POST /v1/feedback
reports, and the saving shadow mode predicts, each with a 95 % interval and the number of
sessions it rests on. Shadow's prediction is corrected by the mirrored requests
(experiment.mirror_share: what the router's choice really cost, against its priced estimate)
when there are any, and labelled as assuming equal verbosity when there are none; the mirrors'
own cost is shown apart. See docs/rollout.md.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stats",
        help="USD spent and saved (against always-capable) per route and session, from a decision log",
        description="Sum a decision log (switchyard serve --decision-log) into USD totals per route and session.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("log", metavar="DECISIONS.jsonl", help="decision log to read")
    p.add_argument("-c", "--config", metavar="FILE", help="router config: re-price tiers and baselines from it")
    p.add_argument("--route", help="only this route")
    p.add_argument("--sessions", type=int, default=0, metavar="N", help="also show the N most recent sessions")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--experiment",
        action="store_true",
        help="per route: routed vs control arms and shadow mode's predicted saving, with 95%% intervals",
    )
    p.add_argument("--tenant", help="with --experiment: only this tenant's sessions and reports")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.engine.accounting import Pricing, UsdLedger, record_from_log
    from switchyard.server.dashboard.offline import logged_records

    if args.sessions < 0:
        return fail("--sessions must be >= 0")
    if args.experiment:
        from switchyard.cli.stats_experiment import run_experiment

        return run_experiment(args.log, route=args.route, tenant=args.tenant, as_json=args.json)
    if args.tenant:
        return fail("--tenant needs --experiment")
    pricing: Pricing | None = None
    if args.config:
        loaded = load_or_exit(args.config)
        if loaded is None:
            return 1
        from switchyard.config.build import build_pricing

        pricing = build_pricing(loaded)
    ledger = UsdLedger(max_sessions=max(args.sessions, 1))
    skipped: list[str] = []

    def skip(line: str) -> None:
        print(f"warning: {line}", file=sys.stderr)
        skipped.append(line)

    try:
        for record in logged_records(args.log, record_from_log, skipped=skip, reprice=pricing):
            if not args.route or record.route == args.route:
                ledger(record)
    except OSError as exc:
        return fail(f"cannot read {args.log}: {exc.strerror or exc}")
    data = ledger.snapshot(sessions=args.sessions)
    data["skipped_lines"] = len(skipped)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    _print(data, args.sessions)
    return 0


def _print(data: dict[str, Any], sessions: int) -> None:
    print(
        f"{'':34} {'requests':>8} {'capable':>8} {'total $':>12} {'router $':>10} {'always-cap $':>13} {'saved $':>12}"
    )
    rows: list[tuple[str, dict[str, Any]]] = [("all routes", data["total"])]
    rows += [(f"route {name}", t) for name, t in data["routes"].items()]
    if sessions:
        rows += [(f"session {key}", t) for key, t in data["sessions"].items()]
    for name, t in rows:
        router = t["router_usd"] + t["feature_usd"]
        print(
            f"{name[:34]:34} {t['requests']:>8} {t['capable_share']:>8.0%} {t['total_usd']:>12.6f} "
            f"{router:>10.6f} {t['always_capable_usd']:>13.6f} {t['saved_usd']:>12.6f}"
        )
    if data["skipped_lines"]:
        print(f"({data['skipped_lines']} unreadable line(s) skipped)")
