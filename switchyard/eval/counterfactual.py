"""The agent-replay counterfactual: what a route's first switch to the capable tier is worth.

Layer: ``eval``. Pure arithmetic: no engine, no I/O, no third-party imports.

Inputs are, per run, the tier the route picked at each decision point (plus the decision
source and reason, for the per-run table) and, per task, the resolve rate and mean USD cost
per trial of the efficient and of the capable model (each model's own trials of the whole
task). A run of ``n`` decisions whose first capable pick is decision ``k`` (1-based) has done
``f = (k - 1) / n`` of its work on the efficient model; from there the task is the capable
model's (the de-latch rule: later decisions change neither outcome nor cost, they only count in
the share of calls). Per task (``p_e``/``p_c`` resolve rates, ``C_e``/``C_c`` costs):

============== ============================================ ==========================
case           resolve if switched                          cost if switched
============== ============================================ ==========================
never switched ``p_e``                                      ``C_e``
base           ``p_c``                                      ``f·C_e + C_c``
optimistic     ``max(p_e, p_c)``                            ``f·C_e + (1 - f)·C_c``
pessimistic    ``min(p_c, p_e + (1 - f)·(p_c - p_e))``      ``f·C_e + C_c``
============== ============================================ ==========================

Every task weighs the same: a task's value is the mean over its runs, a policy's value the
mean over tasks. The router's own model calls (a judge) are paid on every decision of the run,
switched or not, and added to the run's cost. The baselines use the same formulas:
always-efficient never switches, always-capable switches at ``k = 1`` (``f = 0``) — so in the
optimistic case it too takes ``max(p_e, p_c)``, which keeps every case comparing like with like.
See docs/evaluation.md ("Counterfactual agent replay") for the assumptions and their weaknesses.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, TypedDict

from switchyard._dataclass import dataclass
from switchyard.protocol.intervals import percentile_interval

CAPABLE = "capable"
EFFICIENT = "efficient"
CASES = ("base", "optimistic", "pessimistic")
"""The counterfactual cases, in report order."""


class CounterfactualError(ValueError):
    """The inputs cannot be simulated (the message says which run or task)."""


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """One task's outcomes on the two models, each from its own trials.

    Attributes:
        task: Task id.
        p_efficient: Resolve rate of the efficient model (0-1).
        p_capable: Resolve rate of the capable model (0-1).
        cost_efficient: Mean USD per trial of the efficient model.
        cost_capable: Mean USD per trial of the capable model.
    """

    task: str
    p_efficient: float
    p_capable: float
    cost_efficient: float
    cost_capable: float


@dataclass(frozen=True, slots=True)
class Run:
    """One recorded run as the route decided it.

    Attributes:
        id: Run id (the replay's session id).
        task: Task id (a key of the outcomes).
        tiers: ``"capable"`` or ``"efficient"`` per decision point, in order.
        sources: Decision source per decision point (may be empty).
        reasons: Decision reason per decision point (may be empty).
        router_cost_usd: Cost of the router's own model calls over the whole run.
    """

    id: str
    task: str
    tiers: tuple[str, ...]
    sources: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    router_cost_usd: float = 0.0

    @property
    def n(self) -> int:
        """Decision points."""
        return len(self.tiers)

    @property
    def first_switch(self) -> int | None:
        """1-based index ``k`` of the first capable decision, ``None`` when never switched."""
        for i, tier in enumerate(self.tiers):
            if tier == CAPABLE:
                return i + 1
        return None

    @property
    def f(self) -> float | None:
        """``(k - 1) / n``: share of the run done on the efficient model before the switch."""
        k = self.first_switch
        return None if k is None else (k - 1) / self.n

    @property
    def capable_calls(self) -> int:
        """Decisions that picked the capable tier (as routed, de-latches included)."""
        return sum(t == CAPABLE for t in self.tiers)


def switched(case: str, o: TaskOutcome, f: float) -> tuple[float, float]:
    """``(resolve, cost)`` of a task switched at share ``f`` under ``case``.

    Raises:
        CounterfactualError: Unknown case, or ``f`` outside [0, 1].
    """
    if not 0.0 <= f <= 1.0:
        raise CounterfactualError(f"f must be in [0, 1], got {f}")
    pe, pc, ce, cc = o.p_efficient, o.p_capable, o.cost_efficient, o.cost_capable
    if case == "base":
        return pc, f * ce + cc
    if case == "optimistic":
        return max(pe, pc), f * ce + (1.0 - f) * cc
    if case == "pessimistic":
        return min(pc, pe + (1.0 - f) * (pc - pe)), f * ce + cc
    raise CounterfactualError(f"unknown case {case!r}; cases: {', '.join(CASES)}")


def run_value(case: str, o: TaskOutcome, run: Run) -> tuple[float, float]:
    """``(resolve, cost)`` of one run under ``case``, the router's own cost included."""
    f = run.f
    resolve, cost = (o.p_efficient, o.cost_efficient) if f is None else switched(case, o, f)
    return resolve, cost + run.router_cost_usd


@dataclass(slots=True)
class Row:
    """One policy's numbers (tasks weigh the same).

    Attributes:
        name: ``route``, ``always-efficient``, ``always-capable``, ``random latch (null)``,
            ``oracle (≤ N points)``.
        resolve: Mean resolve rate over tasks (0-1).
        cost_usd: Mean USD per task (router cost included).
        cost_saved: ``1 - Σcost / Σcost(always-capable)``.
        points_lost: ``100·(resolve(always-capable) - resolve)``.
        task_share: Mean over tasks of the share of their runs switched.
        call_share: Share of all decisions sent to the capable tier (as routed); ``None``
            when the policy has no calls of its own (the null model).
        run_share: Share of runs switched (pooled over runs).
        first_switch_turn: Median ``k`` over switched runs.
        mean_f: Mean ``f`` over switched runs.
        router_cost_usd: Mean router USD per task (included in ``cost_usd``).
    """

    name: str
    resolve: float
    cost_usd: float
    cost_saved: float
    points_lost: float
    task_share: float
    call_share: float | None
    run_share: float
    first_switch_turn: float | None = None
    mean_f: float | None = None
    router_cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "resolve": self.resolve,
            "cost_usd": self.cost_usd,
            "cost_saved": self.cost_saved,
            "points_lost": self.points_lost,
            "task_share": self.task_share,
            "call_share": self.call_share,
            "run_share": self.run_share,
            "first_switch_turn": self.first_switch_turn,
            "mean_f": self.mean_f,
            "router_cost_usd": self.router_cost_usd,
        }


@dataclass(frozen=True, slots=True)
class Interval:
    """A bootstrap percentile interval."""

    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return {"low": self.low, "high": self.high}


def row_named(rows: Sequence[Row], name: str) -> Row:
    """The first of ``rows`` whose name starts with ``name`` (the oracle's name carries its budget).

    Raises:
        KeyError: No row's name starts with ``name``.
    """
    for r in rows:
        if r.name.startswith(name):
            return r
    raise KeyError(name)


def intervals_dict(intervals: Mapping[str, Interval]) -> dict[str, dict[str, float]]:
    """JSON-ready intervals, keyed as given."""
    return {k: v.to_dict() for k, v in intervals.items()}


@dataclass(slots=True)
class CaseReport:
    """One counterfactual case: the rows and the route's bootstrap intervals.

    Attributes:
        case: ``base``, ``optimistic`` or ``pessimistic``.
        rows: route, always-efficient, always-capable, random latch (null), oracle.
        intervals: ``points_lost``, ``cost_saved`` (the route's) and ``points_lost_vs_null``,
            ``cost_saved_vs_null`` (route - null; negative points = fewer points lost).
        oracle_capable_tasks: The tasks the oracle sends to the capable model.
    """

    case: str
    rows: list[Row]
    intervals: dict[str, Interval] = field(default_factory=dict)
    oracle_capable_tasks: list[str] = field(default_factory=list)

    def row(self, name: str) -> Row:
        """The row whose name starts with ``name``."""
        return row_named(self.rows, name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "case": self.case,
            "rows": [r.to_dict() for r in self.rows],
            "intervals": intervals_dict(self.intervals),
            "oracle_capable_tasks": self.oracle_capable_tasks,
        }


@dataclass(slots=True)
class RunRow:
    """One run's line of the per-run table."""

    run: Run
    values: dict[str, tuple[float, float]]
    weight: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a flat row, for CSV too)."""
        k = self.run.first_switch
        out: dict[str, Any] = {
            "run": self.run.id,
            "task": self.run.task,
            "n_turns": self.run.n,
            "first_switch_turn": k,
            "f": self.run.f,
            "switch_source": None if k is None or not self.run.sources else self.run.sources[k - 1],
            "switch_reason": None if k is None or not self.run.reasons else self.run.reasons[k - 1],
            "capable_calls": self.run.capable_calls,
            "router_cost_usd": self.run.router_cost_usd,
            "weight": self.weight,
        }
        for case, (resolve, cost) in self.values.items():
            out[f"resolve_{case}"] = resolve
            out[f"cost_{case}"] = cost
        return out


@dataclass(slots=True)
class Report:
    """The whole counterfactual.

    Attributes:
        tasks: Tasks scored (those with runs and outcomes).
        runs: Runs scored.
        cases: One report per case, in :data:`CASES` order.
        per_run: The per-run table.
        oracle_points: The oracle's points-lost budget.
        resamples: Bootstrap resamples.
        seed: Bootstrap seed.
    """

    tasks: int
    runs: int
    cases: list[CaseReport]
    per_run: list[RunRow]
    oracle_points: float
    resamples: int
    seed: int

    def case(self, name: str) -> CaseReport:
        """The report of case ``name``."""
        for c in self.cases:
            if c.case == name:
                return c
        raise KeyError(name)

    def to_dict(self, *, per_run: bool = False) -> dict[str, Any]:
        """JSON-ready (the per-run table only when asked)."""
        out: dict[str, Any] = {
            "tasks": self.tasks,
            "runs": self.runs,
            "oracle_points": self.oracle_points,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "level": 0.95},
            "cases": {c.case: c.to_dict() for c in self.cases},
        }
        if per_run:
            out["per_run"] = [r.to_dict() for r in self.per_run]
        return out


@dataclass(slots=True)
class _Task:
    """Per-task sums the rows and the bootstrap are built from."""

    outcome: TaskOutcome
    runs: list[Run]
    switched: int = 0
    f_sum: float = 0.0
    calls: int = 0
    capable_calls: int = 0
    router: float = 0.0
    value: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.switched / len(self.runs)


def _tasks(runs: Iterable[Run], outcomes: Mapping[str, TaskOutcome]) -> list[_Task]:
    by_task: dict[str, _Task] = {}
    for run in runs:
        if run.n == 0:
            raise CounterfactualError(f"run {run.id!r} has no decision points")
        bad = [t for t in run.tiers if t not in (CAPABLE, EFFICIENT)]
        if bad:
            raise CounterfactualError(f"run {run.id!r}: tier {bad[0]!r} is neither 'capable' nor 'efficient'")
        o = outcomes.get(run.task)
        if o is None:
            raise CounterfactualError(f"run {run.id!r}: no outcomes for task {run.task!r}")
        t = by_task.setdefault(run.task, _Task(o, []))
        t.runs.append(run)
        f = run.f
        if f is not None:
            t.switched += 1
            t.f_sum += f
        t.calls += run.n
        t.capable_calls += run.capable_calls
        t.router += run.router_cost_usd
    for t in by_task.values():
        for case in CASES:
            values = [run_value(case, t.outcome, r) for r in t.runs]
            t.value[case] = (
                math.fsum(v[0] for v in values) / len(values),
                math.fsum(v[1] for v in values) / len(values),
            )
    # Sorted by task id so that the bootstrap draws do not depend on the input order.
    return [by_task[k] for k in sorted(by_task)]


def _null(case: str, o: TaskOutcome, s: float, mean_f: float) -> tuple[float, float]:
    """The random latch's expected ``(resolve, cost)`` on one task.

    Every switched formula is affine in ``f`` on [0, 1] (the pessimistic ``min`` is
    ``p_e + (1 - f)(p_c - p_e)`` when ``p_c ≥ p_e`` and ``p_c`` otherwise), so the mean over the
    policy's empirical ``f`` values equals the formula at their mean.
    """
    resolve, cost = switched(case, o, mean_f)
    return s * resolve + (1.0 - s) * o.p_efficient, s * cost + (1.0 - s) * o.cost_efficient


def _capable(case: str, o: TaskOutcome) -> tuple[float, float]:
    return switched(case, o, 0.0)


def oracle_choice(case: str, outcomes: Sequence[TaskOutcome], points: float) -> list[bool]:
    """Per task, whether the oracle sends it to the capable model (at ``k = 1``).

    Greedy by cost per point recovered: start all-efficient; switch every task where the
    capable model is no worse and no dearer; then switch tasks where it resolves more, cheapest
    extra USD per extra resolve first, until the points lost against always-capable are within
    ``points``.
    """
    n = len(outcomes)
    if n == 0:
        return []
    cap = [_capable(case, o) for o in outcomes]
    reference = math.fsum(c[0] for c in cap) / n
    chosen = [c[0] >= o.p_efficient and c[1] <= o.cost_efficient for c, o in zip(cap, outcomes, strict=True)]

    def lost() -> float:
        got = math.fsum(c[0] if pick else o.p_efficient for c, o, pick in zip(cap, outcomes, chosen, strict=True))
        return 100.0 * (reference - got / n)

    gains = sorted(
        (i for i, (c, o) in enumerate(zip(cap, outcomes, strict=True)) if not chosen[i] and c[0] > o.p_efficient),
        key=lambda i: ((cap[i][1] - outcomes[i].cost_efficient) / (cap[i][0] - outcomes[i].p_efficient), i),
    )
    for i in gains:
        if lost() <= points + 1e-9:
            break
        chosen[i] = True
    return chosen


def _rows(case: str, tasks: Sequence[_Task], points: float) -> tuple[list[Row], list[str]]:
    n = len(tasks)
    outs = [t.outcome for t in tasks]
    cap = [_capable(case, o) for o in outs]
    cap_resolve = math.fsum(c[0] for c in cap) / n
    cap_cost = math.fsum(c[1] for c in cap) / n

    def row(name: str, values: Sequence[tuple[float, float]], **extra: Any) -> Row:
        resolve = math.fsum(v[0] for v in values) / n
        cost = math.fsum(v[1] for v in values) / n
        saved = 1.0 - cost / cap_cost if cap_cost > 0 else 0.0
        return Row(name, resolve, cost, saved, 100.0 * (cap_resolve - resolve), **extra)

    all_runs = [r for t in tasks for r in t.runs]
    switched_runs = [r for r in all_runs if r.first_switch is not None]
    s = len(switched_runs) / len(all_runs)
    fs = [r.f for r in switched_runs if r.f is not None]
    mean_f = statistics.fmean(fs) if fs else 0.0
    k_median = statistics.median(r.first_switch for r in switched_runs if r.first_switch) if switched_runs else None
    calls = sum(t.calls for t in tasks)
    route = row(
        "route",
        [t.value[case] for t in tasks],
        task_share=math.fsum(t.share for t in tasks) / n,
        call_share=sum(t.capable_calls for t in tasks) / calls,
        run_share=s,
        first_switch_turn=k_median,
        mean_f=mean_f if fs else None,
        router_cost_usd=math.fsum(t.router / len(t.runs) for t in tasks) / n,
    )
    efficient = row(
        "always-efficient",
        [(o.p_efficient, o.cost_efficient) for o in outs],
        task_share=0.0,
        call_share=0.0,
        run_share=0.0,
    )
    capable = row(
        "always-capable", cap, task_share=1.0, call_share=1.0, run_share=1.0, first_switch_turn=1.0, mean_f=0.0
    )
    null = row(
        "random latch (null)",
        [_null(case, o, s, mean_f) for o in outs],
        task_share=s,
        call_share=None,
        run_share=s,
        first_switch_turn=k_median,
        mean_f=mean_f if fs else None,
    )
    picks = oracle_choice(case, outs, points)
    share = sum(picks) / n
    oracle = row(
        f"oracle (≤ {points:g} points)",
        [c if p else (o.p_efficient, o.cost_efficient) for c, o, p in zip(cap, outs, picks, strict=True)],
        task_share=share,
        call_share=share,
        run_share=share,
        first_switch_turn=1.0 if share else None,
        mean_f=0.0 if share else None,
    )
    return [route, efficient, capable, null, oracle], [o.task for o, p in zip(outs, picks, strict=True) if p]


def _bootstrap(case: str, tasks: Sequence[_Task], resamples: int, seed: int) -> dict[str, Interval]:
    """Task bootstrap: resample tasks with replacement (each with all its runs); 95 % percentiles.

    The null model's share and mean ``f`` are re-estimated on every resample from the runs it
    holds, as the null is defined by the policy on the same tasks.
    """
    rng = random.Random(seed)
    n = len(tasks)
    cap = [_capable(case, t.outcome) for t in tasks]
    draws: dict[str, list[float]] = {
        k: [] for k in ("points_lost", "cost_saved", "points_lost_vs_null", "cost_saved_vs_null")
    }
    for _ in range(resamples):
        idx = rng.choices(range(n), k=n)
        runs = sum(len(tasks[i].runs) for i in idx)
        switched_runs = sum(tasks[i].switched for i in idx)
        s = switched_runs / runs
        mean_f = math.fsum(tasks[i].f_sum for i in idx) / switched_runs if switched_runs else 0.0
        cap_r = math.fsum(cap[i][0] for i in idx)
        cap_c = math.fsum(cap[i][1] for i in idx)
        pol_r = math.fsum(tasks[i].value[case][0] for i in idx)
        pol_c = math.fsum(tasks[i].value[case][1] for i in idx)
        nulls = [_null(case, tasks[i].outcome, s, mean_f) for i in idx]
        null_r = math.fsum(v[0] for v in nulls)
        null_c = math.fsum(v[1] for v in nulls)
        lost = 100.0 * (cap_r - pol_r) / n
        null_lost = 100.0 * (cap_r - null_r) / n
        saved = 1.0 - pol_c / cap_c if cap_c > 0 else 0.0
        null_saved = 1.0 - null_c / cap_c if cap_c > 0 else 0.0
        draws["points_lost"].append(lost)
        draws["cost_saved"].append(saved)
        draws["points_lost_vs_null"].append(lost - null_lost)
        draws["cost_saved_vs_null"].append(saved - null_saved)
    out: dict[str, Interval] = {}
    for key, values in draws.items():
        out[key] = Interval(*percentile_interval(values))
    return out


class Scoring(TypedDict, total=False):
    """:func:`simulate`'s scoring keywords, as the callers that score on its behalf pass them on
    (:func:`~switchyard.eval.agent_replay.score_replay`, ``score_log``): what is left out takes
    :func:`simulate`'s default, the one place those are written."""

    oracle_points: float
    resamples: int
    seed: int


def simulate(
    runs: Iterable[Run],
    outcomes: Mapping[str, TaskOutcome],
    *,
    oracle_points: float = 6.0,
    resamples: int = 1000,
    seed: int = 0,
    cases: Sequence[str] = CASES,
) -> Report:
    """Scores a route's runs under every counterfactual case, with baselines and intervals.

    Args:
        runs: The route's runs (each run's ``task`` must be in ``outcomes``).
        outcomes: Per task id, the two models' outcomes. Tasks without runs are ignored.
        oracle_points: The oracle's budget of points lost against always-capable.
        resamples: Task-bootstrap resamples (0: no intervals).
        seed: Bootstrap seed (same inputs and seed → same intervals).
        cases: Which cases to report.

    Raises:
        CounterfactualError: No runs, a run without decisions, an unknown tier, a task
            without outcomes, or an unknown case.
    """
    tasks = _tasks(runs, outcomes)
    if not tasks:
        raise CounterfactualError("no runs to score")
    reports: list[CaseReport] = []
    for case in cases:
        if case not in CASES:
            raise CounterfactualError(f"unknown case {case!r}; cases: {', '.join(CASES)}")
        rows, oracle_tasks = _rows(case, tasks, oracle_points)
        intervals = _bootstrap(case, tasks, resamples, seed) if resamples > 0 else {}
        reports.append(CaseReport(case, rows, intervals, oracle_tasks))
    per_run = [
        RunRow(r, {c: run_value(c, t.outcome, r) for c in cases}, 1.0 / (len(tasks) * len(t.runs)))
        for t in tasks
        for r in t.runs
    ]
    return Report(len(tasks), len(per_run), reports, per_run, oracle_points, resamples, seed)
