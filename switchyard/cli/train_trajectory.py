"""``switchyard train-trajectory``: train the trajectory router's checkpoint and score it held out."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from switchyard.cli._common import HelpFormatter, fail

_EPILOG = """\
Examples:
  # the shipped checkpoint (under a minute on one CPU core; numpy, scipy if installed)
  switchyard train-trajectory --data ../shared/data \\
      --out switchyard/routers/trajectory/trajectory-v1.json

  # the same, plus the held-out tables of docs/trajectory-router.md (about 20 minutes)
  switchyard train-trajectory --data ../shared/data --out /tmp/t.json --heldout --json /tmp/heldout.json

What it learns from: every run of AgentDojo (49 tasks x 21 models, each model's own runs) and the
Terminal-Bench runs (Claude Sonnet 4's, standing in for any model's run of the task, with the
paired resolve rates of qwen-3-coder-480B, claude-4-sonnet and claude-4.1-opus). Rows are the
decision points of the efficient model's run; labels average over every capable model it is
paired with (input price at least 2x): gain = P(capable resolves, efficient does not), loss = the
reverse. The settings (--dims, --members, --l2, --steps, --seed) were fixed before any held-out
scoring. The default gain threshold recorded in the checkpoint is chosen on the training runs'
out-of-bag estimates: the fewest switches that lose at most --recover of always-efficient's points.
Docs: docs/trajectory-router.md (features, training, the held-out table, where routing does not pay).

--heldout scores the issue's pairs without ever training on a scored task or pair: AgentDojo
leave-one-suite-out, Terminal-Bench leave-one-benchmark-out, and every row pairing either model
of the scored pair left out; the threshold of each fold is chosen on its training folds. The
table compares with the random latch of the same share and timing (task bootstrap, 95 %).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "train-trajectory",
        help="train the trajectory router's checkpoint from recorded agent runs; score it held out",
        description="Train the `type: trajectory` router's checkpoint on recorded agent runs and write it as JSON.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--data", default="../shared/data", metavar="DIR", help="the shared data folder")
    p.add_argument("--out", required=True, metavar="FILE", help="where the checkpoint (JSON) goes")
    p.add_argument("--dims", type=int, default=1024, help="hash buckets of task n-grams and error classes")
    p.add_argument("--members", type=int, default=8, help="bootstrap ensemble members (the interval)")
    p.add_argument("--l2", type=float, default=3e-3, help="L2 penalty")
    p.add_argument("--steps", type=int, default=300, help="gradient steps per head")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--recover",
        type=float,
        default=0.5,
        help="default threshold: lose at most this share of always-efficient's points",
    )
    p.add_argument(
        "--leave-out",
        action="append",
        default=[],
        metavar="BENCHMARK[:GROUP]",
        help="train without these runs: a benchmark (AgentDojo, Terminal-Bench) or one group of it "
        "(an AgentDojo suite, a Terminal-Bench task family), e.g. AgentDojo:banking (repeatable)",
    )
    p.add_argument(
        "--leave-out-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="pair no run with this model, on either side (repeatable)",
    )
    p.add_argument("--heldout", action="store_true", help="also score the issue's pairs held out and print the table")
    p.add_argument("--resamples", type=int, default=1000, help="task-bootstrap resamples of the held-out intervals")
    p.add_argument("--json", metavar="FILE", help="write the held-out results as JSON")
    p.add_argument(
        "--policies",
        default="gain,gain+rules,gain_per_cost",
        help="held-out latches to score, comma-separated: gain (the route's default score), gain+rules "
        "(with persistent_errors: {repeats: 2}), gain_per_cost (score: gain_per_cost)",
    )
    p.set_defaults(func=run)


def _row(name: str, report: Any, thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    base = report.case("base")
    route, null, eff, oracle = (base.row(n) for n in ("route", "random latch", "always-efficient", "oracle"))
    iv = base.intervals
    out: dict[str, Any] = {
        "pair": name,
        "tasks": report.tasks,
        "runs": report.runs,
        "run_share": route.run_share,
        "first_switch_turn": route.first_switch_turn,
        "points_lost": route.points_lost,
        "cost_saved": route.cost_saved,
        "null_points_lost": null.points_lost,
        "null_cost_saved": null.cost_saved,
        "efficient_points_lost": eff.points_lost,
        "efficient_cost_saved": eff.cost_saved,
        "oracle_points_lost": oracle.points_lost,
        "oracle_cost_saved": oracle.cost_saved,
        "intervals": {k: v.to_dict() for k, v in iv.items()},
    }
    if thresholds is not None:
        out["thresholds"] = thresholds
    return out


def _print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| pair | tasks | switched | lost / saved | null lost / saved | vs null: lost (95 %) | vs null: saved (95 %) "
        "| always-efficient lost / saved | oracle (≤ 6) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        iv = r["intervals"]
        dl = r["points_lost"] - r["null_points_lost"]
        ds = 100 * (r["cost_saved"] - r["null_cost_saved"])
        lo_l, hi_l = iv["points_lost_vs_null"]["low"], iv["points_lost_vs_null"]["high"]
        lo_s, hi_s = 100 * iv["cost_saved_vs_null"]["low"], 100 * iv["cost_saved_vs_null"]["high"]
        print(
            f"| {r['pair']} | {r['tasks']} | {100 * r['run_share']:.0f} % "
            f"| {r['points_lost']:+.1f} / {100 * r['cost_saved']:.0f} % "
            f"| {r['null_points_lost']:+.1f} / {100 * r['null_cost_saved']:.0f} % "
            f"| {dl:+.1f} [{lo_l:+.1f}, {hi_l:+.1f}] | {ds:+.1f} [{lo_s:+.1f}, {hi_s:+.1f}] "
            f"| {r['efficient_points_lost']:+.1f} / {100 * r['efficient_cost_saved']:.0f} % "
            f"| {r['oracle_points_lost']:+.1f} / {100 * r['oracle_cost_saved']:.0f} % |"
        )


def run(args: argparse.Namespace) -> int:
    from switchyard.eval.trajectory_data import REPORT_ONLY_PAIRS, SUITE_PAIRS, TrajectoryDataError, read_corpus
    from switchyard.eval.trajectory_heldout import (
        Policy,
        choose_threshold,
        evaluate_pair,
        failure_auc,
        oob_sets,
        pooled,
    )
    from switchyard.eval.trajectory_train import TrainConfig, describe, fit, rows_for

    config = TrainConfig(dims=args.dims, members=args.members, l2=args.l2, steps=args.steps, seed=args.seed)
    t0 = time.perf_counter()
    try:
        corpus = read_corpus(args.data, config.dims)
    except TrajectoryDataError as exc:
        return fail(str(exc))
    left_out = [tuple(item.split(":", 1)) if ":" in item else (item, None) for item in args.leave_out]

    def keep(r: Any) -> bool:
        return not any(r.benchmark == b and (g is None or r.group == g) for b, g in left_out)

    banned = set(args.leave_out_model)
    rows = rows_for(corpus, keep_run=keep, exclude_models=banned)
    if not rows.x:
        return fail("nothing left to train on after --leave-out / --leave-out-model")
    model = fit(rows, config)
    oob = oob_sets(rows.task, config)
    threshold = choose_threshold(corpus, model, oob, keep, banned, args.recover)
    per_cost = choose_threshold(corpus, model, oob, keep, banned, args.recover, Policy(per_cost=True))
    with_rules = choose_threshold(corpus, model, oob, keep, banned, args.recover, Policy(rules=True))
    training: dict[str, Any] = {
        **describe(config, rows),
        "default_threshold": threshold,
        "default_threshold_per_cost": per_cost,
        "default_threshold_with_rules": with_rules,
        "recover": args.recover,
        "data": ["agentdojo", "terminal-bench-trajectories", "terminal-bench-paired"],
        "left_out": args.leave_out,
        "left_out_models": sorted(banned),
        "command": " ".join(
            ["switchyard train-trajectory --data ../shared/data --out", str(args.out)]
            + [f"--leave-out {x}" for x in args.leave_out]
            + [f"--leave-out-model {m}" for m in sorted(banned)]
        ),
    }
    results: dict[str, Any] = {}
    if args.heldout:
        known = {"gain": Policy(), "gain+rules": Policy(rules=True), "gain_per_cost": Policy(per_cost=True)}
        names = [n.strip() for n in args.policies.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown:
            return fail(f"--policies: unknown {unknown}; use some of {', '.join(known)}")
        tables: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            policy = known[name]
            table = []
            pair_results = []
            for benchmark, e, c in (*SUITE_PAIRS, *REPORT_ONLY_PAIRS):
                res = evaluate_pair(
                    corpus, benchmark, e, c, config, recover=args.recover, resamples=args.resamples, policy=policy
                )
                table.append(_row(f"{benchmark}: {e} → {c}", res.report, res.thresholds))
                if (benchmark, e, c) in SUITE_PAIRS and benchmark == "AgentDojo":
                    pair_results.append(res)
            table.append(_row("AgentDojo pooled (4 suite pairs)", pooled(pair_results, args.resamples)))
            print(f"\nlatch: {policy.name}\n")
            _print_table(table)
            tables[policy.name] = table
        tau = failure_auc(corpus, config)
        print(
            "\ntau-bench (never trained on): AUC of the gain estimate for a failed run — "
            f"turn 0 {tau['auc_turn0']:.3f}, "
            f"last turn {tau['auc_last_turn']:.3f}, highest over the run {tau['auc_max']:.3f} ({tau['runs']} runs)"
        )
        results = {"policies": tables, "tau_bench": tau}
        training["heldout"] = {
            name: {
                r["pair"]: {
                    k: round(r[k], 4) for k in ("points_lost", "cost_saved", "null_points_lost", "null_cost_saved")
                }
                for r in table
            }
            for name, table in tables.items()
        }
    training["seconds"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = type(model)(model.dims, model.members, training, cost=model.cost)
    out.write_text(json.dumps(model.to_dict(), separators=(",", ":")) + "\n", encoding="utf-8")
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB); default threshold {threshold:+.2f}; {training['seconds']} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"training": training, **results}, indent=1) + "\n", encoding="utf-8")
    return 0
