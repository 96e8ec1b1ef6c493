"""The trajectory router operated by a capable share ranked within its own traffic, held out.

Layer: ``eval``.

A gain threshold learned on one benchmark does not transfer to another (the estimate's scale
moves with task length and run length). The alternative checked here: choose the *share* of
runs to hand over on the training folds, then, on the scored traffic, switch the runs whose
score ranks in that top share **of the efficient model's own traffic in the same group** (an
AgentDojo suite, a benchmark) — what a live share controller converges to, computed here over
the whole group at once. The ranking reads no outcome, so it is legitimate on held-out runs;
only the share is learned, and only from training folds.

Two timings:

* ``turn0`` — rank by the turn-0 score (the task text alone) and switch at turn 0: no early
  turns paid twice;
* ``crossing`` — rank by the run's highest score and switch at the first turn whose score
  reaches the group's cut (the latch as deployed, with a calibrated cut).

The stage router's persistent-errors rule may switch a run earlier (``fired``).
:func:`rank_auc` is the diagnostic that bounds all of it: if the score does not rank the tasks a
switch rescues above the others, no operating point beats the random latch of the same share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from switchyard._dataclass import dataclass
from switchyard.eval.counterfactual import CAPABLE, EFFICIENT, TaskOutcome, run_value
from switchyard.eval.counterfactual import Run as CfRun

SHARES = tuple(round(0.05 * i, 2) for i in range(21))
"""Shares of runs the training-fold choice considers."""

TIMINGS = ("turn0", "crossing")


class ShareError(ValueError):
    """A bad share, timing or run (the message names it)."""


@dataclass(slots=True, frozen=True)
class ScoredRun:
    """One run's decision scores, as the router would have computed them.

    Attributes:
        id: Run id.
        task: Task id (a key of the pair's outcomes).
        group: The traffic the run is ranked within (e.g. ``AgentDojo/banking``).
        scores: The score at each decision point (at least one).
        fired: Per decision point, whether a run rule has fired by then (may be empty).
    """

    id: str
    task: str
    group: str
    scores: tuple[float, ...]
    fired: tuple[bool, ...] = ()


def _rank_key(run: ScoredRun, timing: str) -> float:
    return run.scores[0] if timing == "turn0" else max(run.scores)


def switch_points(runs: Sequence[ScoredRun], share: float, timing: str = "turn0") -> dict[str, int | None]:
    """Per run id, the 0-based decision point where the run switches (``None``: never).

    Within each group the ``ceil(share · n)`` runs with the highest rank key switch (ties at the
    cut switch together, as a threshold would): at turn 0 (``turn0``) or at the first point
    whose score reaches the cut (``crossing``); a fired run rule switches a run no later.

    Raises:
        ShareError: ``share`` outside [0, 1], an unknown ``timing``, or a run without scores.
    """
    if not 0.0 <= share <= 1.0:
        raise ShareError(f"share must be in [0, 1], got {share}")
    if timing not in TIMINGS:
        raise ShareError(f"unknown timing {timing!r}; timings: {', '.join(TIMINGS)}")
    groups: dict[str, list[ScoredRun]] = {}
    for r in runs:
        if not r.scores:
            raise ShareError(f"run {r.id!r} has no decision scores")
        groups.setdefault(r.group, []).append(r)
    out: dict[str, int | None] = {}
    for members in groups.values():
        keys = sorted((_rank_key(r, timing) for r in members), reverse=True)
        m = math.ceil(share * len(keys) - 1e-9)
        cut = keys[m - 1] if m > 0 else math.inf
        for r in members:
            ranked = [0] if timing == "turn0" and r.scores[0] >= cut else []
            if timing == "crossing":
                ranked = [i for i, s in enumerate(r.scores) if s >= cut][:1]
            fired = [i for i, f in enumerate(r.fired[: len(r.scores)]) if f][:1]
            both = ranked + fired
            out[r.id] = min(both) if both else None
    return out


def as_runs(runs: Sequence[ScoredRun], switches: Mapping[str, int | None]) -> list[CfRun]:
    """The runs as the counterfactual scores them: efficient up to the switch, capable after."""
    out = []
    for r in runs:
        k = switches[r.id]
        tiers = tuple(EFFICIENT if k is None or i < k else CAPABLE for i in range(len(r.scores)))
        out.append(CfRun(r.id, r.task, tiers))
    return out


def value(runs: Sequence[CfRun], outcomes: Mapping[str, TaskOutcome]) -> tuple[float, float, float]:
    """``(points lost, always-efficient's points lost, cost saved)`` against always-capable,
    base case (:func:`~switchyard.eval.counterfactual.run_value`), every task weighing the same."""
    per: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        per.setdefault(r.task, []).append(run_value("base", outcomes[r.task], r))
    if not per:
        raise ShareError("no runs to value")
    n = len(per)
    got = sum(sum(v[0] for v in vals) / len(vals) for vals in per.values()) / n
    cost = sum(sum(v[1] for v in vals) / len(vals) for vals in per.values())
    cap = sum(outcomes[t].p_capable for t in per) / n
    eff = sum(outcomes[t].p_efficient for t in per) / n
    cap_cost = sum(outcomes[t].cost_capable for t in per)
    saved = 1.0 - cost / cap_cost if cap_cost > 0 else 0.0
    return 100.0 * (cap - got), 100.0 * (cap - eff), saved


def choose_share(
    training: Sequence[tuple[Sequence[ScoredRun], Mapping[str, TaskOutcome]]],
    timing: str = "turn0",
    recover: float = 0.5,
) -> float:
    """The share whose latch, pooled over the training pairs, saves the most while losing at
    most ``recover`` x always-efficient's points (the whole-share 1.0 when none does).

    Args:
        training: Per training pair, its runs (scored by models that never saw them) and outcomes.
        timing: ``turn0`` or ``crossing`` (see :func:`switch_points`).
        recover: The share of always-efficient's points lost that is allowed.

    Raises:
        ShareError: No training pairs.
    """
    if not training:
        raise ShareError("no training pairs to choose a share on")
    best: tuple[float, float] | None = None
    for share in SHARES:
        lost = eff = saved = 0.0
        for runs, outcomes in training:
            a, b, s = value(as_runs(runs, switch_points(runs, share, timing)), outcomes)
            lost += a
            eff += b
            saved += s
        if lost <= recover * eff and (best is None or saved > best[1]):
            best = (share, saved)
    return best[0] if best else SHARES[-1]


def rank_auc(scored: Sequence[tuple[float, bool]]) -> float:
    """P(a positive's score > a negative's), ties counting half; NaN without both kinds."""
    pos = [s for s, y in scored if y]
    neg = [s for s, y in scored if not y]
    if not pos or not neg:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))
