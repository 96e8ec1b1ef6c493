"""An independent computation of the agent-replay counterfactual (issue 22, /work/REPLAY-SPEC.md).

Written for this repository. The per-turn decisions come from the route's real decision path:
:func:`switchyard.eval.replay.replay` walks every recorded run turn by turn under one session id
(the same call ``switchyard replay`` makes), or ``--decisions`` reads the JSONL that
``switchyard replay --out`` wrote. Everything after that — first switch, the base / optimistic /
pessimistic counterfactual, the random-latch null model, the baselines, the per-task oracle and
the task bootstrap — is computed here from the spec's formulas, on purpose without the replay
command's own counterfactual module, so the two can be compared ("agree to 0.1 point").

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/agent_replay_check.py -c examples/coding-agent.yaml --route agent
    PYTHONPATH=. python benchmarks/agent_replay_check.py -c examples/coding-agent.yaml --route agent \\
        --task-level                      # the paired tasks as runs of one user message (n = 1)
    PYTHONPATH=. python benchmarks/agent_replay_check.py -c examples/coding-agent.yaml --route agent \\
        --no-outcomes --trajectories ../shared/data/tau-bench-trajectories/tau_bench_airline_gpt4o.jsonl

``--json FILE`` writes every number. Without paired outcomes (``--no-outcomes``) only the share of
runs escalated and the first-switch turns are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TRAJECTORIES = DATA / "terminal-bench-trajectories" / "terminal_bench_trajectories_dev.jsonl"
TASKS = DATA / "terminal-bench-paired" / "terminal_bench_paired_tasks.jsonl"
CASES = ("base", "optimistic", "pessimistic")


@dataclass(slots=True, frozen=True)
class TaskOutcome:
    """Per-task outcomes of the two models: resolve rates and mean USD per trial."""

    p_e: float
    p_c: float
    c_e: float
    c_c: float


@dataclass(slots=True, frozen=True)
class Run:
    """One replayed run: its task, its decision points and where it first went capable."""

    id: str
    task: str
    n: int
    k: int | None  # 1-based index of the first capable decision, None when never
    capable_calls: int
    first_source: str | None

    @property
    def f(self) -> float | None:
        """Share of the run done on the efficient model before the switch."""
        return None if self.k is None else (self.k - 1) / self.n


# ---------------------------------------------------------------------------- the counterfactual


def switched(o: TaskOutcome, f: float, case: str) -> tuple[float, float]:
    """(expected resolve, expected USD) of a run of the task that switched at share ``f``."""
    if case == "base":
        return o.p_c, f * o.c_e + o.c_c
    if case == "optimistic":
        return max(o.p_e, o.p_c), f * o.c_e + (1.0 - f) * o.c_c
    if case == "pessimistic":
        return min(o.p_c, o.p_e + (1.0 - f) * (o.p_c - o.p_e)), f * o.c_e + o.c_c
    raise ValueError(case)


def run_value(o: TaskOutcome, f: float | None, case: str) -> tuple[float, float]:
    """(resolve, cost) of one run; ``f`` is ``None`` for a run that never switched."""
    return (o.p_e, o.c_e) if f is None else switched(o, f, case)


def policy_by_task(
    runs_by_task: dict[str, list[Run]], outcomes: dict[str, TaskOutcome], case: str
) -> dict[str, tuple[float, float]]:
    """Each task's (resolve, cost): the mean over its runs."""
    out = {}
    for task, runs in runs_by_task.items():
        vals = [run_value(outcomes[task], r.f, case) for r in runs]
        out[task] = (sum(v[0] for v in vals) / len(vals), sum(v[1] for v in vals) / len(vals))
    return out


def null_by_task(
    tasks: Sequence[str], outcomes: dict[str, TaskOutcome], s: float, fs: Sequence[float], case: str
) -> dict[str, tuple[float, float]]:
    """The random latch: share ``s`` of runs switched, at the policy's own empirical f values."""
    out = {}
    for task in tasks:
        o = outcomes[task]
        if fs:
            sw = [switched(o, f, case) for f in fs]
            er, ec = sum(v[0] for v in sw) / len(sw), sum(v[1] for v in sw) / len(sw)
        else:
            er, ec = o.p_c, o.c_c  # s is 0 then; the value is unused
        out[task] = (s * er + (1 - s) * o.p_e, s * ec + (1 - s) * o.c_e)
    return out


def oracle_choice(
    tasks: Sequence[str],
    always_e: dict[str, tuple[float, float]],
    always_c: dict[str, tuple[float, float]],
    budget: float,
) -> set[str]:
    """Tasks the per-task oracle sends to the capable model (at k = 1).

    Start from always-capable; drop tasks to the efficient model in order of points lost per
    dollar saved (tasks where the capable model does not help go first: dropping them costs no
    points), skipping any that would take the points lost over ``budget``. A greedy, as the
    spec allows.
    """
    n = len(tasks)
    chosen = set(tasks)
    order = []
    for t in tasks:
        gain = 100.0 * (always_c[t][0] - always_e[t][0]) / n  # points lost by dropping t
        save = always_c[t][1] - always_e[t][1]
        order.append((gain / save if save > 0 else float("inf"), gain, t))
    lost = 0.0
    for _, gain, t in sorted(order):
        if lost + gain <= budget + 1e-9:
            chosen.discard(t)
            lost += gain
    return chosen


def summarise(values: dict[str, tuple[float, float]], cap: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Resolve, cost, points lost and cost saved of one policy over the tasks in ``values``."""
    tasks = list(values)
    n = len(tasks)
    resolve = sum(values[t][0] for t in tasks) / n
    cost = sum(values[t][1] for t in tasks) / n
    cap_resolve = sum(cap[t][0] for t in tasks) / n
    cap_cost = sum(cap[t][1] for t in tasks)
    return {
        "resolve": resolve,
        "cost_usd": cost,
        "points_lost": 100.0 * (cap_resolve - resolve),
        "cost_saved": 1.0 - sum(values[t][1] for t in tasks) / cap_cost,
    }


def evaluate(
    runs: list[Run], outcomes: dict[str, TaskOutcome], *, budget: float, resamples: int, seed: int
) -> dict[str, Any]:
    """Every row of the table, in all three cases, with task-bootstrap intervals.

    Always-capable is "switch at k = 1" (f = 0) under each case, so under the optimistic bound
    it resolves max(p_e, p_c); points lost and cost saved are against it, case by case. In a
    bootstrap resample the null model takes the share and the f values of the resampled runs
    (the policy's own, in that resample), so policy - null measures which runs were picked.
    """
    by_task: dict[str, list[Run]] = {}
    for r in runs:
        by_task.setdefault(r.task, []).append(r)
    tasks = sorted(by_task)
    fs = [r.f for r in runs if r.f is not None]
    s = len(fs) / len(runs)
    always_e = {t: (outcomes[t].p_e, outcomes[t].c_e) for t in tasks}
    task_fs = {t: [r.f for r in rs if r.f is not None] for t, rs in by_task.items()}
    result: dict[str, Any] = {
        "tasks": len(tasks),
        "runs": len(runs),
        "share_runs_switched": s,
        "share_tasks_switched": statistics.fmean(sum(r.k is not None for r in rs) / len(rs) for rs in by_task.values()),
        "share_calls_capable": sum(r.capable_calls for r in runs) / sum(r.n for r in runs),
        "first_switch_turn_median": statistics.median([r.k for r in runs if r.k is not None]) if fs else None,
        "first_switch_f_median": statistics.median(fs) if fs else None,
        "first_switch_f_mean": statistics.fmean(fs) if fs else None,
        "cases": {},
    }
    rng = random.Random(seed)
    samples = [[rng.choice(tasks) for _ in tasks] for _ in range(resamples)]
    for case in CASES:
        always_c = {t: switched(outcomes[t], 0.0, case) for t in tasks}
        oracle_set = oracle_choice(tasks, always_e, always_c, budget)
        oracle = {t: always_c[t] if t in oracle_set else always_e[t] for t in tasks}
        pol = policy_by_task(by_task, outcomes, case)
        null = null_by_task(tasks, outcomes, s, fs, case)
        rows = {"policy": pol, "null": null, "always_efficient": always_e, "always_capable": always_c, "oracle": oracle}
        table: dict[str, Any] = {name: summarise(vals, always_c) for name, vals in rows.items()}
        table["oracle_capable_tasks"] = sorted(oracle_set)
        boot: dict[str, list[float]] = {k: [] for k in ("pl", "cs", "null_pl", "null_cs", "d_pl", "d_cs")}
        for sample in samples:
            sample_fs = [f for t in sample for f in task_fs[t]]
            sample_s = len(sample_fs) / sum(len(by_task[t]) for t in sample)
            sample_null = null_by_task(sorted(set(sample)), outcomes, sample_s, sample_fs, case)
            pl, cs = _aggregate(pol, always_c, sample)
            npl, ncs = _aggregate(sample_null, always_c, sample)
            for key, v in zip(boot, (pl, cs, npl, ncs, pl - npl, cs - ncs), strict=True):
                boot[key].append(v)
        table["intervals"] = {k: _interval(v) for k, v in boot.items()}
        result["cases"][case] = table
    result["per_task"] = {
        t: {
            "runs": len(by_task[t]),
            "switched": sum(r.k is not None for r in by_task[t]),
            "first_switch_k": [r.k for r in by_task[t]],
            "n": [r.n for r in by_task[t]],
            "first_source": [r.first_source for r in by_task[t]],
            "p_e": outcomes[t].p_e,
            "p_c": outcomes[t].p_c,
        }
        for t in tasks
    }
    return result


def _aggregate(
    vals: dict[str, tuple[float, float]], cap: dict[str, tuple[float, float]], sample: list[str]
) -> tuple[float, float]:
    """(points lost, cost saved) over a resample of tasks (a task drawn twice counts twice)."""
    n = len(sample)
    resolve = sum(vals[t][0] for t in sample) / n
    cap_resolve = sum(cap[t][0] for t in sample) / n
    cap_cost = sum(cap[t][1] for t in sample)
    return 100.0 * (cap_resolve - resolve), 1.0 - sum(vals[t][1] for t in sample) / cap_cost


def _interval(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    lo = ordered[int(0.025 * (len(ordered) - 1))]
    hi = ordered[round(0.975 * (len(ordered) - 1))]
    return lo, hi


# ---------------------------------------------------------------------------- the decisions


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every non-empty line of a JSONL file."""
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def runs_from_turns(turns: list[dict[str, Any]], capable: str, task_of: dict[str, str]) -> list[Run]:
    """First switch per run from per-turn lines (``switchyard replay --out`` lines)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for line in turns:
        grouped.setdefault(line["trajectory"], []).append(line)
    runs = []
    for rid, lines in grouped.items():
        lines.sort(key=lambda x: x["turn"])
        picks = [line.get("selected") == capable for line in lines]
        k = next((i + 1 for i, p in enumerate(picks) if p), None)
        first = None if k is None else lines[k - 1].get("source")
        runs.append(Run(rid, task_of.get(rid, rid), len(lines), k, sum(picks), first))
    return runs


def load_route(config: str, route: str, settings: Sequence[str] = ()) -> Any:
    """The config, with ``KEY=VALUE`` settings (dotted keys under the route, YAML values) applied."""
    import yaml

    from switchyard.config.load import load_config

    if not settings:
        return load_config(config)
    data = yaml.safe_load(Path(config).read_text())
    for setting in settings:
        key, _, value = setting.partition("=")
        node = data["routes"][route]
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        parsed = yaml.safe_load(value)
        if parsed is None:
            node.pop(last, None)
        else:
            node[last] = parsed
    return load_config(data)


def replay_turns(
    config: str, route: str, trajectories: Path, settings: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], str]:
    """Per-turn decisions through the route's real decision path, and the capable target."""
    from switchyard.eval.evaluate import resolve_tiers
    from switchyard.eval.replay import replay

    loaded = load_route(config, route, settings)
    tiers = resolve_tiers(loaded, route)
    if tiers is None:
        sys.exit(f"route {route!r} has no capable/efficient tiers")
    lines: list[dict[str, Any]] = []
    asyncio.run(
        replay(loaded, route, trajectories, tiers=tiers, progress=False, on_turn=lambda t: lines.append(t.to_dict()))
    )
    return lines, tiers.capable


def task_level_file(tasks_path: Path, out: Path) -> None:
    """The paired tasks as runs of one user message (one decision point, n = 1, f = 0)."""
    with out.open("w") as fh:
        for row in read_jsonl(tasks_path):
            messages = [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": ""}]
            fh.write(json.dumps({"id": row["task_id"], "task_id": row["task_id"], "messages": messages}) + "\n")


def load_outcomes(path: Path, efficient: str, capable: str) -> dict[str, TaskOutcome]:
    """Per-task outcomes of the two models from the paired tasks file."""
    out = {}
    for row in read_jsonl(path):
        m = row["models"]
        if efficient in m and capable in m:
            e, c = m[efficient], m[capable]
            out[row["task_id"]] = TaskOutcome(e["score"], c["score"], e["cost_usd"], c["cost_usd"])
    return out


# ---------------------------------------------------------------------------- the report


def _fmt_iv(iv: tuple[float, float], pct: bool) -> str:
    a, b = iv
    return f"[{100 * a:.0f}, {100 * b:.0f}] %" if pct else f"[{a:+.1f}, {b:+.1f}]"


def print_report(res: dict[str, Any]) -> None:
    """The table, one block per case."""
    print(
        f"{res['tasks']} tasks, {res['runs']} runs; runs switched {res['share_runs_switched']:.1%}, "
        f"tasks switched {res['share_tasks_switched']:.1%}, calls sent capable {res['share_calls_capable']:.1%}; "
        f"first switch: median turn {res['first_switch_turn_median']}, median f {res['first_switch_f_median']}"
    )
    for case in CASES:
        t = res["cases"][case]
        iv = t["intervals"]
        print(f"\n[{case}]  {'policy':18s} {'resolve':>8s} {'USD/task':>9s} {'points lost':>12s} {'cost saved':>11s}")
        for name in ("policy", "null", "always_efficient", "always_capable", "oracle"):
            row = t[name]
            print(
                f"         {name:18s} {row['resolve']:8.1%} {row['cost_usd']:9.4f} "
                f"{row['points_lost']:+12.2f} {row['cost_saved']:11.1%}"
            )
        print(
            f"         95% task bootstrap: policy points lost {_fmt_iv(iv['pl'], False)}, cost saved "
            f"{_fmt_iv(iv['cs'], True)}; null points lost {_fmt_iv(iv['null_pl'], False)}, cost saved "
            f"{_fmt_iv(iv['null_cs'], True)}; policy - null: points lost {_fmt_iv(iv['d_pl'], False)}, "
            f"cost saved {_fmt_iv(iv['d_cs'], True)}"
        )


def print_untargeted(runs: list[Run]) -> None:
    """Runs without outcomes: share escalated and where."""
    ks = [r.k for r in runs if r.k is not None]
    fs = [r.f for r in runs if r.f is not None]
    share = len(ks) / len(runs)
    points = sum(r.n for r in runs)
    print(f"{len(runs)} runs, {points} decision points; runs escalated {len(ks)}/{len(runs)} ({share:.1%})")
    if ks:
        print(
            f"first-switch turn: min {min(ks)}, median {statistics.median(ks)}, max {max(ks)}; "
            f"median f {statistics.median(fs):.2f}"
        )
        sources: dict[str, int] = {}
        for r in runs:
            if r.first_source:
                sources[r.first_source] = sources.get(r.first_source, 0) + 1
        print("first-switch sources: " + ", ".join(f"{k} {v}" for k, v in sorted(sources.items())))
    print(f"calls sent capable: {sum(r.capable_calls for r in runs) / sum(r.n for r in runs):.1%}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", default="examples/coding-agent.yaml")
    p.add_argument("--route", default="agent")
    p.add_argument("--trajectories", type=Path, default=TRAJECTORIES)
    p.add_argument("--tasks", type=Path, default=TASKS, help="paired per-task outcomes")
    p.add_argument("--decisions", type=Path, help="read a `switchyard replay --out` JSONL instead of replaying")
    p.add_argument("--capable-target", help="with --decisions: the capable target's name (default: the route's)")
    p.add_argument("--task-level", action="store_true", help="the tasks file as one-message runs")
    p.add_argument("--no-outcomes", action="store_true", help="no paired outcomes: share escalated only")
    p.add_argument("--efficient-model", default="qwen-3-coder-480B")
    p.add_argument("--capable-model", default="claude-4-sonnet")
    p.add_argument("--budget", type=float, default=6.0, help="the oracle's points-lost budget")
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--json", type=Path, help="write every number here")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a key of the route first (dotted, YAML value; null removes it): persistent_errors.repeats=3",
    )
    args = p.parse_args(argv)

    trajectories: Path = args.trajectories
    tmp = None
    if args.task_level:
        tmp = tempfile.TemporaryDirectory()
        trajectories = Path(tmp.name) / "task_level.jsonl"
        task_level_file(args.tasks, trajectories)
    rows = read_jsonl(trajectories)
    task_of = {r["id"]: str(r.get("task_id", r["id"])) for r in rows}
    if args.decisions is not None:
        turns = read_jsonl(args.decisions)
        capable = args.capable_target
        if capable is None:
            from switchyard.eval.evaluate import resolve_tiers

            tiers = resolve_tiers(load_route(args.config, args.route, args.set), args.route)
            if tiers is None:
                sys.exit("give --capable-target")
            capable = tiers.capable
    else:
        turns, capable = replay_turns(args.config, args.route, trajectories, args.set)
    runs = runs_from_turns(turns, capable, task_of)
    if tmp is not None:
        tmp.cleanup()
    if args.no_outcomes:
        print_untargeted(runs)
        return 0
    outcomes = load_outcomes(args.tasks, args.efficient_model, args.capable_model)
    runs = [r for r in runs if r.task in outcomes]
    res = evaluate(runs, outcomes, budget=args.budget, resamples=args.resamples, seed=args.seed)
    print_report(res)
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
