"""The trajectory router's second attempt: a capable share ranked within each traffic group, held out.

The first attempt (``benchmarks/trajectory_suite_heldout.py``) switched at a gain threshold chosen
on the training folds; held out it did not beat the random latch of the same share and timing,
and the AgentDojo-learned threshold fired on 92 % of Terminal-Bench runs. This checks the
operating points that should transfer (``switchyard.eval.trajectory_share``): the *share* of runs
to hand over is chosen on the training folds (most saved at <= half of always-efficient's points
lost, pooled over every training pair), and on the scored traffic the runs that rank in that share
of the efficient model's own runs of the same group (AgentDojo suite, benchmark) switch — at
turn 0 (task text alone) or at the first crossing of the group's cut; with the gain or the gain
per predicted cost; with or without the persistent-errors rule. The first attempt's threshold
rule is scored on the same folds for reference, and the held-out AUC of the score for the tasks
a switch rescues (capable resolves more often than efficient) says how much any operating point
can do.

Folds as the first attempt's: every scored pair's two models are left out of training
(leave-pair-out); AgentDojo leave-one-suite-out; Terminal-Bench leave-one-benchmark-out. Costs are
the datasets' list prices (the base counterfactual of ``switchyard replay --outcomes``); intervals
are 95 % task bootstraps. 17 trainings of ~10 s CPU.

Run from the repository root::

    .venv/bin/python benchmarks/trajectory_share_heldout.py [--data ../shared/data] [--l2 0.003] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from switchyard.eval.counterfactual import Report, TaskOutcome, simulate
from switchyard.eval.counterfactual import Run as CfRun
from switchyard.eval.trajectory_data import SUITE_PAIRS, Corpus, Run, read_corpus, training_pairs
from switchyard.eval.trajectory_heldout import Policy, choose_threshold, latch, oob_scores, oob_sets, score_of
from switchyard.eval.trajectory_share import ScoredRun, as_runs, choose_share, rank_auc, switch_points
from switchyard.eval.trajectory_train import TrainConfig, fit, rows_for
from switchyard.routers.trajectory.model import TrajectoryModel

VARIANTS: tuple[tuple[str, str, bool, bool], ...] = (
    # name, timing, per_cost, persistent-errors rule
    ("share, turn 0, gain", "turn0", False, False),
    ("share, turn 0, gain + persistent_errors", "turn0", False, True),
    ("share, first crossing, gain", "crossing", False, False),
    ("share, turn 0, gain per cost", "turn0", True, False),
)
"""Fixed before any held-out number was seen; all are reported."""


def group_of(r: Run) -> str:
    return f"{r.benchmark}/{r.group}" if r.benchmark == "AgentDojo" else r.benchmark


def outcomes_of(corpus: Corpus, benchmark: str, e: str, c: str) -> dict[str, TaskOutcome]:
    out = {}
    for task, per in corpus.outcomes[benchmark].items():
        if e in per and c in per:
            out[task] = TaskOutcome(task, per[e].rate, per[c].rate, per[e].cost, per[c].cost)
    return out


def runs_of(corpus: Corpus, benchmark: str, efficient: str, outcomes: dict[str, TaskOutcome], keep: Any) -> list[Run]:
    """The efficient model's own runs (AgentDojo) or the stand-in runs (Terminal-Bench) of a pair."""
    return [
        r
        for r in corpus.runs
        if r.benchmark == benchmark
        and keep(r)
        and r.task in outcomes
        and (benchmark != "AgentDojo" or r.model == efficient)
    ]


def scored(r: Run, scores: list[float], rules: bool) -> ScoredRun:
    return ScoredRun(r.id, r.task, group_of(r), tuple(scores), tuple(r.rules) if rules else ())


def fold(
    corpus: Corpus, config: TrainConfig, benchmark: str, name: str, e: str, c: str, outs: dict[str, TaskOutcome]
) -> tuple[dict[str, list[CfRun]], dict[str, float], list[tuple[Run, list[float], list[float]]]]:
    """One fold: per variant its held-out runs as decided, the parameter chosen, and the raw scores."""
    if benchmark == "AgentDojo":

        def keep(r: Run) -> bool:
            return not (r.benchmark == "AgentDojo" and r.group == name)

    else:

        def keep(r: Run) -> bool:
            return r.benchmark != benchmark

    banned = {e, c}
    rows = rows_for(corpus, keep_run=keep, exclude_models=banned)
    model: TrajectoryModel = fit(rows, config)
    oob = oob_sets(rows.task, config)
    held = runs_of(corpus, benchmark, e, outs, lambda r: not keep(r))
    held_scores = {
        per_cost: {r.id: [score_of(model.estimate(x), per_cost) for x in r.points] for r in held}
        for per_cost in (False, True)
    }
    training: list[tuple[list[Run], dict[str, TaskOutcome]]] = []
    cache: dict[tuple[bool, str], list[float]] = {}
    for b in ("AgentDojo", "Terminal-Bench"):
        for te, tc in training_pairs(corpus, b):
            if banned.intersection((te, tc)):
                continue
            touts = outcomes_of(corpus, b, te, tc)
            picked = runs_of(corpus, b, te, touts, keep)
            if picked:
                training.append((picked, touts))
    out: dict[str, list[CfRun]] = {}
    params: dict[str, float] = {}
    for vname, timing, per_cost, rules in VARIANTS:
        pairs = []
        for picked, touts in training:
            for r in picked:
                if (per_cost, r.id) not in cache:
                    cache[(per_cost, r.id)] = oob_scores(model, r, oob, Policy(per_cost=per_cost))
            pairs.append(([scored(r, cache[(per_cost, r.id)], rules) for r in picked], touts))
        share = choose_share(pairs, timing)
        params[vname] = share
        runs = [scored(r, held_scores[per_cost][r.id], rules) for r in held]
        out[vname] = as_runs(runs, switch_points(runs, share, timing))
    policy = Policy(rules=True)
    t = choose_threshold(corpus, model, oob, keep, banned, 0.5, policy)
    params["threshold (first attempt)"] = t
    out["threshold (first attempt)"] = [CfRun(r.id, r.task, latch(held_scores[False][r.id], t, r.rules)) for r in held]
    raw = [(r, held_scores[False][r.id], held_scores[True][r.id]) for r in held]
    return out, params, raw


def line(name: str, rep: Report) -> tuple[str, dict[str, Any]]:
    case = rep.case("base")
    route, null = case.row("route"), case.row("random latch (null)")
    iv = case.intervals
    d: dict[str, Any] = {
        "switched": route.run_share,
        "points_lost": route.points_lost,
        "points_lost_95": [iv["points_lost"].low, iv["points_lost"].high],
        "cost_saved": route.cost_saved,
        "null_points_lost": null.points_lost,
        "null_cost_saved": null.cost_saved,
        "vs_null_points": route.points_lost - null.points_lost,
        "vs_null_points_95": [iv["points_lost_vs_null"].low, iv["points_lost_vs_null"].high],
        "vs_null_saved": route.cost_saved - null.cost_saved,
        "vs_null_saved_95": [iv["cost_saved_vs_null"].low, iv["cost_saved_vs_null"].high],
    }
    text = (
        f"| {name} | {route.run_share:.0%} | {route.points_lost:+.1f} [{iv['points_lost'].low:+.1f}, "
        f"{iv['points_lost'].high:+.1f}] / {route.cost_saved:.0%} | {null.points_lost:+.1f} / {null.cost_saved:.0%} | "
        f"{route.points_lost - null.points_lost:+.1f} [{iv['points_lost_vs_null'].low:+.1f}, "
        f"{iv['points_lost_vs_null'].high:+.1f}] | "
        f"{100 * (route.cost_saved - null.cost_saved):+.1f} [{100 * iv['cost_saved_vs_null'].low:+.1f}, "
        f"{100 * iv['cost_saved_vs_null'].high:+.1f}] |"
    )
    return text, d


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--l2", type=float, default=TrainConfig().l2, help="L2 penalty (default: the shipped one)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    started = time.perf_counter()
    config = TrainConfig(l2=args.l2)
    corpus = read_corpus(args.data, config.dims, tau=False)
    names = [v[0] for v in VARIANTS] + ["threshold (first attempt)"]
    per_pair: list[tuple[str, str, str, dict[str, list[CfRun]], dict[str, TaskOutcome]]] = []
    params: dict[str, dict[str, float]] = {}
    aucs: dict[str, dict[str, float]] = {}
    for benchmark, e, c in SUITE_PAIRS:
        outs = outcomes_of(corpus, benchmark, e, c)
        folds = (
            sorted({r.group for r in corpus.runs if r.benchmark == "AgentDojo"})
            if benchmark == "AgentDojo"
            else [benchmark]
        )
        runs: dict[str, list[CfRun]] = {n: [] for n in names}
        raw: list[tuple[Run, list[float], list[float]]] = []
        for name in folds:
            got, chosen, scores = fold(corpus, config, benchmark, name, e, c, outs)
            for n in names:
                runs[n].extend(got[n])
            params[f"{e}/{name}"] = chosen
            raw.extend(scores)
        rescued = [outs[r.task].p_capable > outs[r.task].p_efficient for r, _, _ in raw]
        aucs[f"{benchmark}: {e} → {c}"] = {
            "runs": len(raw),
            "rescued": sum(rescued),
            "turn0_gain": rank_auc([(g[0], y) for (_, g, _), y in zip(raw, rescued, strict=True)]),
            "max_gain": rank_auc([(max(g), y) for (_, g, _), y in zip(raw, rescued, strict=True)]),
            "turn0_gain_per_cost": rank_auc([(p[0], y) for (_, _, p), y in zip(raw, rescued, strict=True)]),
        }
        per_pair.append((benchmark, e, c, runs, outs))
        print(f"{e}: {time.perf_counter() - started:.0f} s", flush=True)
    result: dict[str, Any] = {"l2": args.l2, "params": params, "auc": aucs, "variants": {}}
    print("\nheld-out AUC of the score for a rescued task (capable resolves more often than efficient)")
    print("| pair | runs | rescued | turn-0 gain | highest gain | turn-0 gain per cost |\n|---|---|---|---|---|---|")
    for k, a in aucs.items():
        print(
            f"| {k} | {a['runs']} | {a['rescued']} | {a['turn0_gain']:.3f} | {a['max_gain']:.3f} | "
            f"{a['turn0_gain_per_cost']:.3f} |"
        )
    for n in names:
        print(f"\n#### {n}\n")
        print(
            "| pair | switched | lost [95 %] / saved | null lost / saved | vs null: points [95 %] "
            "| vs null: saved, points [95 %] |"
        )
        print("|---|---|---|---|---|---|")
        rows: dict[str, Any] = {}
        pooled_runs: list[CfRun] = []
        pooled_outs: dict[str, TaskOutcome] = {}
        for benchmark, e, c, runs, outs in per_pair:
            label = f"{benchmark}: {e} → {c}"
            text, rows[label] = line(label, simulate(runs[n], outs, resamples=args.bootstrap, cases=("base",)))
            print(text)
            if benchmark == "AgentDojo":
                pre = f"{e}>"
                pooled_runs.extend(CfRun(r.id, pre + r.task, r.tiers) for r in runs[n])
                pooled_outs.update(
                    {
                        pre + k: TaskOutcome(pre + k, o.p_efficient, o.p_capable, o.cost_efficient, o.cost_capable)
                        for k, o in outs.items()
                    }
                )
        label = "AgentDojo pooled (4 pairs)"
        text, rows[label] = line(label, simulate(pooled_runs, pooled_outs, resamples=args.bootstrap, cases=("base",)))
        print(text)
        result["variants"][n] = rows
    print(f"\nparameters chosen on each fold's training runs: {json.dumps(params)}")
    result["seconds"] = time.perf_counter() - started
    print(f"{result['seconds']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
