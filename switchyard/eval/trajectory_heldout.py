"""Held-out checking of the trajectory router: no run is scored by a model that saw its task or pair.

Layer: ``eval``.

For every scored pair ``(efficient, capable)`` the model is retrained without any row that pairs
either of the two models (leave-pair-out, stricter than leaving out only the pair), and:

* AgentDojo — leave-one-suite-out: the runs of each suite (banking, slack, travel, workspace) are
  scored by a model trained on the other three suites (and Terminal-Bench);
* Terminal-Bench — leave-one-benchmark-out: scored by a model trained on AgentDojo only.

The latch switches a run at its first decision point whose estimated gain reaches the
threshold. The threshold itself is chosen on the training folds only, from the ensemble's
out-of-bag estimates of the training runs (each training run is scored by the members whose
bootstrap left its task out): the lowest-cost threshold whose latch, pooled over the training
pairs, loses at most ``recover`` of always-efficient's points. The scored runs then go through
:func:`switchyard.eval.counterfactual.simulate` — the same arithmetic as ``switchyard replay
--outcomes`` — with the random latch of the same share and timing as the null.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.counterfactual import Report, TaskOutcome, simulate
from switchyard.eval.counterfactual import Run as CfRun
from switchyard.eval.trajectory_data import Corpus, Run, training_pairs
from switchyard.eval.trajectory_share import rank_auc
from switchyard.eval.trajectory_train import TrainConfig, fit, member_draws, rows_for
from switchyard.routers.trajectory.model import Estimate, TrajectoryModel

THRESHOLDS = tuple(round(0.02 * i, 2) for i in range(-5, 41))
"""Gain thresholds the training-fold choice considers."""


@dataclass(slots=True)
class PairResult:
    """One scored pair: the threshold chosen per fold and the counterfactual report."""

    benchmark: str
    efficient: str
    capable: str
    thresholds: dict[str, float]
    report: Report
    runs: list[CfRun]
    outcomes: dict[str, TaskOutcome]


def task_outcomes(corpus: Corpus, benchmark: str, efficient: str, capable: str) -> dict[str, TaskOutcome]:
    """Per task, the pair's resolve rates and mean costs."""
    out = {}
    for task, per in corpus.outcomes[benchmark].items():
        if efficient in per and capable in per:
            e, c = per[efficient], per[capable]
            out[task] = TaskOutcome(task, e.rate, c.rate, e.cost, c.cost)
    return out


def latch(gains: Sequence[float], threshold: float, rules: Sequence[bool] = ()) -> tuple[str, ...]:
    """Tiers of a run's decision points under the latch: capable from the first gain ≥ threshold
    (or the first point where a run rule fired, when ``rules`` are given)."""
    tiers: list[str] = []
    on = False
    for i, g in enumerate(gains):
        on = on or g >= threshold or (i < len(rules) and rules[i])
        tiers.append("capable" if on else "efficient")
    return tuple(tiers)


@dataclass(slots=True, frozen=True)
class Policy:
    """How the held-out latch scores a turn.

    Attributes:
        per_cost: Score = gain ÷ the predicted relative cost (else the gain itself).
        rules: The stage router's persistent-errors rule switches too.
    """

    per_cost: bool = False
    rules: bool = False

    @property
    def name(self) -> str:
        """``gain``, ``gain_per_cost``, with ``+ persistent_errors`` when the rule is on."""
        return ("gain_per_cost" if self.per_cost else "gain") + (" + persistent_errors" if self.rules else "")


def score_of(est: Estimate, per_cost: bool) -> float:
    """The decision score of an estimate: the gain, or the gain per unit of typical task cost."""
    return est.gain / est.rel_cost if per_cost else est.gain


def _gains(model: TrajectoryModel, run: Run, policy: Policy = Policy()) -> list[float]:
    return [score_of(model.estimate(x), policy.per_cost) for x in run.points]


def oob_scores(model: TrajectoryModel, run: Run, oob: list[set[str]], policy: Policy) -> list[float]:
    """Scores of a training run from the members whose bootstrap left its task out (all members
    when none did)."""
    key = f"{run.benchmark}/{run.task}"
    idx = [i for i, left in enumerate(oob) if key in left] or list(range(len(model.members)))
    cost = tuple(model.cost[i] for i in idx) if model.cost else ()
    sub = TrajectoryModel(model.dims, tuple(model.members[i] for i in idx), {}, cost=cost)
    return _gains(sub, run, policy)


def _first_crossing(gains: Sequence[float], threshold: float, rules: Sequence[bool]) -> int | None:
    for i, g in enumerate(gains):
        if g >= threshold or (i < len(rules) and rules[i]):
            return i
    return None


def _lost_and_baseline(
    runs: Sequence[tuple[str, Sequence[bool], list[float]]], outcomes: dict[str, TaskOutcome], threshold: float
) -> tuple[float, float]:
    """(points lost, always-efficient's points lost) of the latch, base case, tasks weighing the same."""
    per_task: dict[str, list[float]] = {}
    for task, rules, gains in runs:
        o = outcomes[task]
        k = _first_crossing(gains, threshold, rules)
        per_task.setdefault(task, []).append(o.p_efficient if k is None else o.p_capable)
    n = len(per_task)
    got = sum(sum(v) / len(v) for v in per_task.values()) / n
    cap = sum(outcomes[t].p_capable for t in per_task) / n
    eff = sum(outcomes[t].p_efficient for t in per_task) / n
    return 100.0 * (cap - got), 100.0 * (cap - eff)


def choose_threshold(
    corpus: Corpus,
    model: TrajectoryModel,
    oob: list[set[str]],
    keep_run: Callable[[Run], bool],
    banned: set[str],
    recover: float,
    policy: Policy = Policy(),
) -> float:
    """The highest threshold (the fewest switches) whose latch loses at most ``recover`` x
    always-efficient's points on the training runs, pooled over every training pair."""
    scored: list[tuple[list[tuple[str, Sequence[bool], list[float]]], dict[str, TaskOutcome]]] = []
    cache: dict[str, list[float]] = {}
    for benchmark in ("AgentDojo", "Terminal-Bench"):
        for e, c in training_pairs(corpus, benchmark):
            if banned.intersection((e, c)):
                continue
            outs = task_outcomes(corpus, benchmark, e, c)
            picked = [
                r
                for r in corpus.runs
                if r.benchmark == benchmark
                and keep_run(r)
                and r.task in outs
                and (r.model == e or benchmark != "AgentDojo")
            ]
            if not picked:
                continue
            for r in picked:
                if r.id not in cache:
                    cache[r.id] = oob_scores(model, r, oob, policy)
            scored.append(([(r.task, r.rules if policy.rules else (), cache[r.id]) for r in picked], outs))
    for t in sorted(THRESHOLDS, reverse=True):
        lost = eff = 0.0
        for runs, outs in scored:
            a, b = _lost_and_baseline(runs, outs, t)
            lost += a
            eff += b
        if lost <= recover * eff:
            return t
    return THRESHOLDS[0]


def _train(
    corpus: Corpus, config: TrainConfig, keep: Callable[[Run], bool], banned: set[str]
) -> tuple[TrajectoryModel, list[set[str]]]:
    rows = rows_for(corpus, keep_run=keep, exclude_models=banned)
    model = fit(rows, config)
    return model, oob_sets(rows.task, config)


def oob_sets(tasks: Sequence[str], config: TrainConfig) -> list[set[str]]:
    """The tasks each ensemble member's bootstrap left out (:func:`member_draws`, as :func:`fit` uses)."""
    keys = sorted(set(tasks))
    drawn = [set(draw) for draw in member_draws(tasks, config)]
    return [{k for i, k in enumerate(keys) if i not in d} for d in drawn]


def _held_out(benchmark: str, fold: str) -> Callable[[Run], bool]:
    """Which runs a fold may train on: AgentDojo's other suites (and every other benchmark), or,
    for another benchmark, every benchmark but it."""
    if benchmark == "AgentDojo":
        return lambda r: not (r.benchmark == "AgentDojo" and r.group == fold)
    return lambda r: r.benchmark != benchmark


def evaluate_pair(
    corpus: Corpus,
    benchmark: str,
    efficient: str,
    capable: str,
    config: TrainConfig,
    *,
    recover: float = 0.5,
    resamples: int = 1000,
    policy: Policy = Policy(),
) -> PairResult:
    """Scores one pair held out (see the module docstring)."""
    banned = {efficient, capable}
    outcomes = task_outcomes(corpus, benchmark, efficient, capable)
    if benchmark == "AgentDojo":
        folds = sorted({r.group for r in corpus.runs if r.benchmark == "AgentDojo"})
    else:
        folds = [benchmark]
    runs: list[CfRun] = []
    thresholds: dict[str, float] = {}
    for fold in folds:
        keep = _held_out(benchmark, fold)
        if benchmark == "AgentDojo":
            scored = [r for r in corpus.runs if r.benchmark == "AgentDojo" and r.group == fold and r.model == efficient]
        else:
            scored = [r for r in corpus.runs if r.benchmark == benchmark]
        model, oob = _train(corpus, config, keep, banned)
        t = choose_threshold(corpus, model, oob, keep, banned, recover, policy)
        thresholds[fold] = t
        runs.extend(
            CfRun(r.id, r.task, latch(_gains(model, r, policy), t, r.rules if policy.rules else ()))
            for r in scored
            if r.task in outcomes
        )
    used = {r.task for r in runs}
    outs = {k: v for k, v in outcomes.items() if k in used}
    report = simulate(runs, outs, resamples=resamples, cases=("base",))
    return PairResult(benchmark, efficient, capable, thresholds, report, runs, outs)


def pooled(results: Sequence[PairResult], resamples: int = 1000) -> Report:
    """One report over several pairs (each pair's tasks kept apart: task ids get the pair's prefix)."""
    runs: list[CfRun] = []
    outs: dict[str, TaskOutcome] = {}
    for res in results:
        prefix = f"{res.efficient}>{res.capable}/"
        runs.extend(CfRun(r.id, prefix + r.task, r.tiers) for r in res.runs)
        outs.update(
            {
                prefix + k: TaskOutcome(prefix + k, o.p_efficient, o.p_capable, o.cost_efficient, o.cost_capable)
                for k, o in res.outcomes.items()
            }
        )
    return simulate(runs, outs, resamples=resamples, cases=("base",))


def failure_auc(corpus: Corpus, config: TrainConfig, benchmark: str = "tau-bench") -> dict[str, Any]:
    """How well the turn-0 and last-turn gain estimates rank ``benchmark``'s failed runs above its
    resolved ones (AUC), from a model trained without that benchmark."""
    model, _ = _train(corpus, config, lambda r: r.benchmark != benchmark, set())
    runs = [r for r in corpus.runs if r.benchmark == benchmark]

    first = [(model.estimate(r.points[0]).gain, not r.resolved) for r in runs]
    last = [(model.estimate(r.points[-1]).gain, not r.resolved) for r in runs]
    peak = [(max(_gains(model, r)), not r.resolved) for r in runs]
    return {"runs": len(runs), "auc_turn0": rank_auc(first), "auc_last_turn": rank_auc(last), "auc_max": rank_auc(peak)}
