"""``switchyard replay``: a route's decision for every assistant turn of recorded agent runs."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import IO, Any

from switchyard.cli._common import HelpFormatter, add_config_arg, fail, load_or_exit, route_or_fail
from switchyard.cli.eval import add_run_args, log_level
from switchyard.cli.replay_outcomes import add_outcome_args, run_outcomes
from switchyard.cli.replay_suite import add_suite_args, run_suite_cmd

_EPILOG = """\
Examples:
  switchyard replay -c router.yaml --route agent \\
      --trajectories ../shared/data/tau-bench-trajectories/tau_bench_airline_gpt4o.jsonl \\
      --out decisions.jsonl
  switchyard replay -c router.yaml --route agent --trajectories runs.jsonl --limit 5 --json

  # the counterfactual: what the route would have saved and lost, from paired outcomes
  switchyard replay -c examples/stage-router.yaml --route agent \\
      --trajectories ../shared/data/terminal-bench-trajectories/terminal_bench_trajectories_dev.jsonl \\
      --outcomes ../shared/data/terminal-bench-paired/terminal_bench_paired_tasks.jsonl \\
      --efficient-model qwen-3-coder-480B --capable-model claude-4-sonnet \\
      --sweep confidence_threshold=0.3,0.5,0.7
  # task-level routing: the tasks file itself as runs of one message
  switchyard replay -c router.yaml --route agent --task-level \
      --trajectories tasks.jsonl --outcomes tasks.jsonl
  # every pair of a suite (datasets x model pairs), one table; score the held-out half only
  switchyard replay -c examples/coding-agent.yaml --route agent \
      --suite examples/eval/agent-suite.yaml --split test
  # a proxy's own decisions (one run per session id) scored the same way
  switchyard replay -c router.yaml --route agent --decision-log decisions.jsonl \
      --outcomes tasks.jsonl --sessions sessions.jsonl

A trajectory is a JSON line with an "id" and OpenAI Chat "messages" (tool calls and results
included; optional "tools", "reward", "success"). For each assistant message the route decides
the conversation before it, with the trajectory id as session id, so stateful routers see one
session turn by turn. No answer call is made. Each output line holds the turn, the selected
target, decision source, score, reason, the router's own cost and what the recorded turn did.

With --outcomes (one line per task: models.<model>.score = resolve rate, models.<model>.cost_usd
= mean USD per trial) every run (a trajectory with its "task_id") is scored by a counterfactual:
after the route's first switch to the capable tier the task is the capable model's own trial.
Printed for the base case and the optimistic/pessimistic bounds: resolve rate, USD per task,
cost saved and points lost against always-capable, shares sent to capable and the first
switch, beside always-efficient, always-capable, a random latch with the route's share and
timing (the null model) and the per-task oracle, with task-bootstrap 95% intervals. See
docs/evaluation.md, "Counterfactual agent replay".

With --suite (a YAML file of datasets x efficient->capable model pairs) the efficient model's
own runs of each pair drive the route, the capable model's run of the task takes over after
the first switch, and cost is priced turn by turn with prompt caching (a switch pays the new
model's cache write for the whole context). One table: every pair, pooled rows, the null,
always-efficient, always-capable and the oracle. --split NAME scores one named task subset
of the suite file (tune on the others); --list-split prints its task ids. See
docs/evaluation.md, "The agent suite".
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help="decide every assistant turn of recorded agent trajectories (decide only)",
        description="Feed recorded agent conversations to a route, turn by turn, and record its decisions.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--route", required=True, help="route to replay through")
    p.add_argument("--trajectories", metavar="FILE", help="trajectories JSONL (lines with 'messages' or a 'prompt')")
    p.add_argument("--out", metavar="FILE.jsonl", help="per-turn decisions (default: replay-<route>.jsonl)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N trajectories")
    p.add_argument(
        "--capable-target",
        "--capable",
        dest="capable",
        metavar="TARGET",
        help="the capable tier's target (default: the route's)",
    )
    p.add_argument(
        "--efficient-target",
        "--efficient",
        dest="efficient",
        metavar="TARGET",
        help="the efficient tier's target, with --capable-target",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--concurrency", type=int, default=1, help="trajectories replayed at once")
    add_run_args(p)
    add_outcome_args(p)
    add_suite_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    if route_or_fail(loaded, args.route) is None:
        return 1
    if args.limit is not None and args.limit < 1:
        return fail("--limit must be >= 1")
    if args.suite:
        return run_suite_cmd(args, loaded)
    suite_only = [f for f in ("split", "pair", "pricing", "data_dir", "list_split") if getattr(args, f)]
    if suite_only:
        return fail(f"--{suite_only[0].replace('_', '-')} goes with --suite SUITE.yaml")
    if args.outcomes:
        return run_outcomes(args, loaded)
    if args.trajectories is None:
        return fail("--trajectories FILE is required (or --decision-log FILE with --outcomes)")
    scoring = [
        f for f in ("sweep", "decision_log", "runs_out", "sweep_out", "sessions", "session_task") if getattr(args, f)
    ]
    if scoring:
        return fail(f"--{scoring[0].replace('_', '-')} needs --outcomes TASKS.jsonl")
    import orjson

    from switchyard.config.load import ConfigError
    from switchyard.eval.dataset import DatasetError
    from switchyard.eval.evaluate import EvalError, resolve_tiers
    from switchyard.eval.replay import TurnDecision, replay

    out = Path(args.out or f"replay-{args.route}.jsonl")
    try:
        tiers = resolve_tiers(loaded, args.route, args.capable, args.efficient)
    except EvalError as exc:
        return fail(str(exc))
    out.parent.mkdir(parents=True, exist_ok=True)
    fh: IO[bytes] = out.open("wb")

    def write(turn: TurnDecision) -> None:
        fh.write(orjson.dumps(turn.to_dict()) + b"\n")

    try:
        with log_level(args.log_level):
            summary = asyncio.run(
                replay(
                    loaded,
                    args.route,
                    args.trajectories,
                    tiers=tiers,
                    limit=args.limit,
                    concurrency=args.concurrency,
                    progress=False if args.no_progress else None,
                    on_turn=write,
                    first_only=args.task_level,
                )
            )
    except (DatasetError, ConfigError, KeyError, ValueError) as exc:
        return fail(str(exc).strip("'\""))
    finally:
        fh.close()
    data = summary.to_dict()
    data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print(data)
    return 0


def _print(data: dict[str, Any]) -> None:
    print(
        f"route {data['route']} ({data['router']}): {data['trajectories']} trajectories, "
        f"{data['turns']} assistant turns, {data['decided']} decided, {data['skipped']} skipped"
    )
    print("selected: " + ", ".join(f"{t} {s:.1%}" for t, s in sorted(data["shares"].items())))
    print("sources:  " + ", ".join(f"{s} {n}" for s, n in sorted(data["sources"].items())))
    stats = data["scores"]
    if stats:
        print(
            f"scores:   n={stats['n']} mean={stats['mean']:.3f} p10={stats['p10']:.3f} "
            f"p50={stats['p50']:.3f} p90={stats['p90']:.3f}"
        )
    else:
        print("scores:   none (the router sets no Decision.score)")
    by = data.get("capable_share_by_success")
    if by:
        print("capable share by task outcome: " + ", ".join(f"{k} {v:.1%}" for k, v in sorted(by.items())))
    if data["router_cost_usd"]:
        print(f"router's own model calls: ${data['router_cost_usd']:.4f}")
    for why, n in data["skip_reasons"].items():
        print(f"skipped {n}: {why}")
    print(f"wrote {data['out']}")
