"""Scoring a suite: per pair the route's latch against the null, the baselines and the oracle;
pooled rows; task-bootstrap intervals.

Layer: ``eval``. numpy is imported inside :func:`score_suite` (the bootstrap is matrix work).

Per run, a :class:`~switchyard.eval.suite_runs.RunTable` says what it is worth never switched and
first switched at each turn ``k``. The route's value of a run is the table at its first capable
decision (later decisions change nothing: the base counterfactual's latch), plus the router's own
model-call cost. Every task weighs the same (a task's value is the mean over its runs).

The **null** is a random latch with the route's share and timing: each run is switched with
probability ``s`` (the route's share of switched runs), at a position drawn from the route's own
switched runs — the relative position ``f = (k - 1) / n`` of each, mapped onto the run's length
(``k = ⌊f·n⌋ + 1``). Its value is the exact expectation over those draws (what averaging over
infinitely many seeds converges to), so it carries no seed noise.

**Pooled** rows are means over the pooled pairs (each pair weighs the same: costs differ by orders
of magnitude between pairs). **Intervals**: task bootstrap, 95 % percentiles; the tasks of one
dataset are resampled once per draw for all its pairs (they share tasks), datasets independently;
the null's share and timing are re-estimated on every draw.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.counterfactual import (
    Interval,
    Row,
    Run,
    intervals_dict,
    oracle_choice,
    row_named,
)
from switchyard.eval.suite_runs import PairData
from switchyard.protocol.intervals import percentile_interval

POLICIES = ("route", "random latch (null)", "always-efficient", "always-capable", "oracle")
INTERVAL_KEYS = ("points_lost", "cost_saved", "points_lost_vs_null", "cost_saved_vs_null")


@dataclass(slots=True)
class PairScore:
    """One pair's rows and intervals.

    Attributes:
        name: The pair's name.
        dataset: Its dataset.
        models: ``(efficient, capable)``.
        pooled: Whether it counts in the pooled rows.
        pricing: ``cache``, ``list`` or ``outcomes``.
        stand_in: Whether its runs are another model's.
        tasks: Tasks scored.
        runs: Runs scored.
        rows: One per policy of :data:`POLICIES` (the oracle's name carries its budget).
        intervals: The route's ``points_lost``/``cost_saved`` and route - null.
        skipped: Why runs were left out.
        oracle_tasks: Tasks the oracle sends to the capable model.
        note: The suite's note on the pair.
        per_run: One flat row per run (``run``, ``task``, ``n_turns``, ``first_switch_turn``, the
            decision source, reason and score at the switch, the run's highest score,
            ``resolve``/``cost_usd`` as routed and
            ``never_resolve``/``never_cost_usd``), for ``--runs-out``.
    """

    name: str
    dataset: str
    models: tuple[str, str]
    pooled: bool
    pricing: str
    stand_in: bool
    tasks: int
    runs: int
    rows: list[Row]
    intervals: dict[str, Interval] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    oracle_tasks: list[str] = field(default_factory=list)
    note: str | None = None
    per_run: list[dict[str, Any]] = field(default_factory=list)

    def row(self, name: str) -> Row:
        """The row whose name starts with ``name``."""
        return row_named(self.rows, name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without the per-run rows)."""
        return {
            "name": self.name,
            "dataset": self.dataset,
            "efficient": self.models[0],
            "capable": self.models[1],
            "pooled": self.pooled,
            "pricing": self.pricing,
            "stand_in_runs": self.stand_in,
            "tasks": self.tasks,
            "runs": self.runs,
            "rows": [r.to_dict() for r in self.rows],
            "intervals": intervals_dict(self.intervals),
            "skipped": self.skipped,
            "oracle_capable_tasks": self.oracle_tasks,
            "note": self.note,
        }


@dataclass(slots=True)
class PooledScore:
    """Means over a group of pairs."""

    name: str
    pairs: list[str]
    rows: list[Row]
    intervals: dict[str, Interval] = field(default_factory=dict)

    def row(self, name: str) -> Row:
        """The row whose name starts with ``name``."""
        return row_named(self.rows, name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "pairs": self.pairs,
            "rows": [r.to_dict() for r in self.rows],
            "intervals": intervals_dict(self.intervals),
        }


@dataclass(slots=True)
class SuiteScore:
    """Every pair's score and the pooled groups."""

    pairs: list[PairScore]
    pooled: list[PooledScore]
    resamples: int
    seed: int
    oracle_points: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "pairs": [p.to_dict() for p in self.pairs],
            "pooled": [p.to_dict() for p in self.pooled],
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "level": 0.95},
            "oracle_points": self.oracle_points,
        }


@dataclass(slots=True)
class _Pair:
    """A pair as arrays (tasks sorted by id; runs grouped by task)."""

    data: PairData
    runs: list[Run]
    tasks: list[str]
    task_of_run: list[int]
    route: list[tuple[float, float]]
    never: list[tuple[float, float]]
    k: list[int | None]
    n: list[int]


def _prepare(data: PairData, runs: Sequence[Run]) -> _Pair:
    ordered = sorted(runs, key=lambda r: (r.task, r.id))
    tasks = sorted({r.task for r in ordered})
    index = {t: i for i, t in enumerate(tasks)}
    route, never, ks, ns = [], [], [], []
    for r in ordered:
        table = data.tables[r.id]
        if len(table.switched) != r.n:
            raise ValueError(f"run {r.id!r}: {r.n} decisions but {len(table.switched)} turns priced")
        k = r.first_switch
        resolve, cost = table.at(k)
        route.append((resolve, cost + r.router_cost_usd))
        never.append(table.never)
        ks.append(k)
        ns.append(r.n)
    return _Pair(data, ordered, tasks, [index[r.task] for r in ordered], route, never, ks, ns)


def _per_run(p: _Pair) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r, k, value, never in zip(p.runs, p.k, p.route, p.never, strict=True):
        scores = [x for x in p.data.scores.get(r.id, []) if x is not None]
        at = p.data.scores.get(r.id, [])
        out.append(
            {
                "pair": p.data.name,
                "run": r.id,
                "task": r.task,
                "n_turns": r.n,
                "first_switch_turn": k,
                "switch_source": None if k is None or not r.sources else r.sources[k - 1],
                "switch_reason": None if k is None or not r.reasons else r.reasons[k - 1],
                "switch_score": None if k is None or len(at) < k else at[k - 1],
                "max_score": max(scores) if scores else None,
                "capable_calls": r.capable_calls,
                "resolve": value[0],
                "cost_usd": value[1],
                "never_resolve": never[0],
                "never_cost_usd": never[1],
                "router_cost_usd": r.router_cost_usd,
            }
        )
    return out


def _k_at(f: float, n: int) -> int:
    return min(n, math.floor(f * n + 1e-9) + 1)


def _row(name: str, resolve: float, cost: float, cap: tuple[float, float], **extra: Any) -> Row:
    saved = 1.0 - cost / cap[1] if cap[1] > 0 else 0.0
    return Row(name, resolve, cost, saved, 100.0 * (cap[0] - resolve), **extra)


def _pair_rows(p: _Pair, points: float, np: Any) -> tuple[list[Row], list[str]]:
    data = p.data
    nt = len(p.tasks)
    outs = [data.outcomes[t] for t in p.tasks]
    cap = (math.fsum(o.p_capable for o in outs) / nt, math.fsum(o.cost_capable for o in outs) / nt)
    means = _task_means(p, np)
    switched = [i for i, k in enumerate(p.k) if k is not None]
    s = len(switched) / len(p.runs)
    fs = [(p.k[i] - 1) / p.n[i] for i in switched if p.k[i] is not None]  # type: ignore[operator]
    ks = [k for k in p.k if k is not None]
    k_median = statistics.median(ks) if ks else None
    calls = sum(r.n for r in p.runs)
    cap_calls = sum(r.capable_calls for r in p.runs)
    route_t = means(p.route)
    share_t = means([(1.0 if k is not None else 0.0, 0.0) for k in p.k])
    route = _row(
        "route",
        float(route_t[:, 0].mean()),
        float(route_t[:, 1].mean()),
        cap,
        task_share=float(share_t[:, 0].mean()),
        call_share=cap_calls / calls,
        run_share=s,
        first_switch_turn=k_median,
        mean_f=statistics.fmean(fs) if fs else None,
        router_cost_usd=math.fsum(r.router_cost_usd for r in p.runs) / len(p.runs),
    )
    null_runs = _null_values(p, np.ones(nt), np)
    null_t = means([tuple(v) for v in null_runs])
    null = _row(
        "random latch (null)",
        float(null_t[:, 0].mean()),
        float(null_t[:, 1].mean()),
        cap,
        task_share=s,
        call_share=None,
        run_share=s,
        first_switch_turn=k_median,
        mean_f=statistics.fmean(fs) if fs else None,
    )
    eff = _row(
        "always-efficient",
        math.fsum(o.p_efficient for o in outs) / nt,
        math.fsum(o.cost_efficient for o in outs) / nt,
        cap,
        task_share=0.0,
        call_share=0.0,
        run_share=0.0,
    )
    capable = _row(
        "always-capable", *cap, cap, task_share=1.0, call_share=1.0, run_share=1.0, first_switch_turn=1.0, mean_f=0.0
    )
    picks = oracle_choice("base", outs, points)
    share = sum(picks) / nt
    oracle = _row(
        f"oracle (≤ {points:g} points)",
        math.fsum(o.p_capable if c else o.p_efficient for o, c in zip(outs, picks, strict=True)) / nt,
        math.fsum(o.cost_capable if c else o.cost_efficient for o, c in zip(outs, picks, strict=True)) / nt,
        cap,
        task_share=share,
        call_share=share,
        run_share=share,
        first_switch_turn=1.0 if share else None,
        mean_f=0.0 if share else None,
    )
    return [route, null, eff, capable, oracle], [o.task for o, c in zip(outs, picks, strict=True) if c]


def _task_means(p: _Pair, np: Any) -> Any:
    """A function: per-run ``(resolve, cost)`` values → per-task means (an array of tasks by 2)."""
    nt = len(p.tasks)
    counts = np.bincount(np.asarray(p.task_of_run), minlength=nt).astype(float)
    idx = np.asarray(p.task_of_run)

    def means(values: Sequence[Sequence[float]]) -> Any:
        v = np.asarray(values, dtype=float).reshape(len(values), 2)
        out = np.zeros((nt, 2))
        np.add.at(out, idx, v)
        return out / counts[:, None]

    return means


def _null_matrix(p: _Pair, np: Any) -> tuple[Any, Any, Any]:
    """``(V, q_task, never)``: ``V[r, q]`` = run ``r``'s value switched at switched run ``q``'s position."""
    switched = [i for i, k in enumerate(p.k) if k is not None]
    never = np.asarray(p.never, dtype=float)
    if not switched:
        return np.zeros((len(p.runs), 0, 2)), np.zeros(0, dtype=int), never
    fs = [(p.k[q] - 1) / p.n[q] for q in switched]  # type: ignore[operator]
    v = np.empty((len(p.runs), len(switched), 2))
    for r, run in enumerate(p.runs):
        table = p.data.tables[run.id]
        for j, f in enumerate(fs):
            v[r, j] = table.switched[_k_at(f, p.n[r]) - 1]
    return v, np.asarray([p.task_of_run[q] for q in switched]), never


@dataclass(slots=True)
class _Arrays:
    """A pair's arrays for the bootstrap, built once."""

    null: tuple[Any, Any, Any]
    means: Any
    route: Any
    cap: Any


def _arrays(p: _Pair, np: Any) -> _Arrays:
    means = _task_means(p, np)
    outs = [p.data.outcomes[t] for t in p.tasks]
    cap = np.asarray([(o.p_capable, o.cost_capable) for o in outs])
    return _Arrays(_null_matrix(p, np), means, means(p.route), cap)


def _null_values(p: _Pair, task_w: Any, np: Any, null: tuple[Any, Any, Any] | None = None) -> Any:
    """Per-run expected ``(resolve, cost)`` of the null with tasks weighted ``task_w``."""
    v, q_task, never = _null_matrix(p, np) if null is None else null
    run_w = task_w[np.asarray(p.task_of_run)]
    switched = np.asarray([k is not None for k in p.k], dtype=float)
    total = float(run_w.sum())
    s = float((run_w * switched).sum() / total) if total > 0 else 0.0
    qw = task_w[q_task] if len(q_task) else q_task
    if s == 0.0 or float(np.sum(qw)) == 0.0:
        return never
    expected = np.einsum("rqc,q->rc", v, qw) / float(np.sum(qw))
    return s * expected + (1.0 - s) * never


def _metrics(p: _Pair, a: _Arrays, w: Any, np: Any) -> tuple[float, float, float, float]:
    """``(points_lost, cost_saved, null points_lost, null cost_saved)`` with task weights ``w``."""
    cap, route_t = a.cap, a.route
    null_t = a.means(_null_values(p, w, np, a.null))
    tw = float(w.sum())
    cap_r, cap_c = float(w @ cap[:, 0]) / tw, float(w @ cap[:, 1]) / tw
    r_r, r_c = float(w @ route_t[:, 0]) / tw, float(w @ route_t[:, 1]) / tw
    n_r, n_c = float(w @ null_t[:, 0]) / tw, float(w @ null_t[:, 1]) / tw
    saved = 1.0 - r_c / cap_c if cap_c > 0 else 0.0
    null_saved = 1.0 - n_c / cap_c if cap_c > 0 else 0.0
    return 100.0 * (cap_r - r_r), saved, 100.0 * (cap_r - n_r), null_saved


def _intervals(draws: dict[str, list[float]]) -> dict[str, Interval]:
    return {k: Interval(*percentile_interval(v)) for k, v in draws.items() if v}


def _pooled_rows(scores: Sequence[PairScore]) -> list[Row]:
    rows: list[Row] = []
    for i, base in enumerate(scores[0].rows):
        group = [s.rows[i] for s in scores]

        def avg(attr: str, group: list[Row] = group) -> float | None:
            values = [getattr(r, attr) for r in group]
            return None if any(v is None for v in values) else statistics.fmean(values)

        rows.append(
            Row(
                base.name,
                avg("resolve") or 0.0,
                avg("cost_usd") or 0.0,
                avg("cost_saved") or 0.0,
                avg("points_lost") or 0.0,
                avg("task_share") or 0.0,
                avg("call_share"),
                avg("run_share") or 0.0,
                avg("first_switch_turn"),
                avg("mean_f"),
                avg("router_cost_usd") or 0.0,
            )
        )
    return rows


def score_suite(
    pairs: Sequence[tuple[PairData, Sequence[Run]]],
    *,
    resamples: int = 1000,
    seed: int = 0,
    oracle_points: float = 6.0,
    labels: Mapping[str, str] | None = None,
) -> SuiteScore:
    """Scores every pair, pools the pooled ones (per dataset and all), with intervals.

    ``labels`` names the datasets in the pooled rows (default: their keys).

    Raises:
        ValueError: A pair without runs, or a run whose decisions and priced turns disagree.
    """
    import numpy as np

    prepared: list[_Pair] = []
    arrays: list[_Arrays] = []
    scores: list[PairScore] = []
    for data, runs in pairs:
        if not runs:
            raise ValueError(f"pair {data.name!r}: no runs to score")
        p = _prepare(data, runs)
        prepared.append(p)
        rows, oracle_tasks = _pair_rows(p, oracle_points, np)
        scores.append(
            PairScore(
                data.name,
                data.pair.dataset,
                (data.pair.efficient, data.pair.capable),
                data.pair.pooled,
                data.pricing,
                data.stand_in,
                len(p.tasks),
                len(p.runs),
                rows,
                skipped=dict(data.skipped),
                oracle_tasks=oracle_tasks,
                note=data.pair.note,
                per_run=_per_run(p),
            )
        )
        arrays.append(_arrays(p, np))
    groups: list[tuple[str, list[int]]] = []
    datasets = list(dict.fromkeys(s.dataset for s in scores))
    for ds in datasets:
        members = [i for i, s in enumerate(scores) if s.dataset == ds and s.pooled]
        if len(members) >= 2:
            groups.append((f"{(labels or {}).get(ds, ds)} pooled", members))
    everything = [i for i, s in enumerate(scores) if s.pooled]
    if len(everything) >= 2 and len(everything) > max((len(m) for _, m in groups), default=0):
        groups.append(("all pooled", everything))
    pair_draws: list[dict[str, list[float]]] = [{k: [] for k in INTERVAL_KEYS} for _ in scores]
    group_draws: list[dict[str, list[float]]] = [{k: [] for k in INTERVAL_KEYS} for _ in groups]
    if resamples > 0:
        rng = np.random.default_rng(seed)
        universe = {ds: sorted({t for p in prepared if p.data.pair.dataset == ds for t in p.tasks}) for ds in datasets}
        maps = [np.asarray([universe[p.data.pair.dataset].index(t) for t in p.tasks]) for p in prepared]
        for _ in range(resamples):
            counts = {ds: rng.multinomial(len(ts), np.full(len(ts), 1.0 / len(ts))) for ds, ts in universe.items()}
            per_pair: list[tuple[float, float, float, float] | None] = []
            for i, p in enumerate(prepared):
                w = counts[p.data.pair.dataset][maps[i]].astype(float)
                if w.sum() == 0:  # none of this pair's tasks drawn (a pair on a subset of its dataset)
                    per_pair.append(None)
                    continue
                m = _metrics(p, arrays[i], w, np)
                per_pair.append(m)
                _add(pair_draws[i], m)
            for g, (_, members) in enumerate(groups):
                got = [per_pair[i] for i in members]
                if any(x is None for x in got):
                    continue
                _add(group_draws[g], tuple(statistics.fmean(x[j] for x in got if x) for j in range(4)))  # type: ignore[arg-type]
        for s, draws in zip(scores, pair_draws, strict=True):
            s.intervals = _intervals(draws)
    pooled = [
        PooledScore(name, [scores[i].name for i in members], _pooled_rows([scores[i] for i in members]))
        for name, members in groups
    ]
    for group, draws in zip(pooled, group_draws, strict=True):
        group.intervals = _intervals(draws)
    return SuiteScore(scores, pooled, resamples, seed, oracle_points)


def _add(draws: dict[str, list[float]], m: tuple[float, float, float, float]) -> None:
    lost, saved, null_lost, null_saved = m
    draws["points_lost"].append(lost)
    draws["cost_saved"].append(saved)
    draws["points_lost_vs_null"].append(lost - null_lost)
    draws["cost_saved_vs_null"].append(saved - null_saved)


__all__ = ["INTERVAL_KEYS", "POLICIES", "PairScore", "PooledScore", "SuiteScore", "score_suite"]
