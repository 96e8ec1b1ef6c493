"""``switchyard tune --decision-log``: a route's threshold fitted on the user's own logged
sessions joined with their feedback, cross-validated by session.

Layer: ``eval``.

**What a decision log can support.** A logged session shows what the route *did*, not what
another setting would have done. Replaying another setting needs, per turn, the number the
setting is compared with. The trajectory router (``type: trajectory``) logs it: every turn it
decides carries ``score`` = the net gain of switching now, compared with ``threshold``, and the
first switch latches the session on the capable model. So a threshold θ' is replayed **exactly**
on every turn the efficient model served: the session would have switched at the first such turn
whose score is ≥ θ' (or, failing that, where the log switched). Two things the log cannot say:

* **After the logged switch** the router latched and scored nothing: a higher threshold that
  would *not* have switched there has no scores to go on. Such a session (*censored*) is assumed
  to switch where the log did; its saving under θ' is a lower bound. The count is printed.
The stage router (``type: stage_router``) logs, per turn, the signals its cascade read and (with
run rules on) the run's counts (``details.signals``, ``details.run_tally``): its decision under
another ``confidence_threshold``, ``persistent_errors.repeats`` or ``turn_budget`` is recomputed
from them by the router's own functions (:mod:`switchyard.eval.log_stage`), exactly. Its first
capable turn is the session's switch, as the agent suite's latch counterfactual counts it.

* **The outcome after a would-be earlier switch** was never observed. It comes from the sessions
  the capable model served whole — the control arm (``experiment: {control_share: …}``) and shadow
  sessions — with feedback: a session switched earlier than logged is scored with their mean
  outcome (the "base case" of the counterfactual replay: after the switch the task is the capable
  model's own). A session whose switch does not move keeps its own logged outcome. Without such
  sessions the outcome after a switch is unknown and tuning refuses.

**Cost.** A turn served by the efficient model that θ' sends to the capable one costs the
record's ``baseline_cost_usd`` (the same tokens at the capable target's price; the served model's
tokens stand in, and no cache write is charged for the switch); the router's own cost stays.

**The rule and its check** are those of the suite tune (:mod:`switchyard.eval.tune`): among the
grid's values and the current one, those losing at most ``max_points_lost`` points against
always-capable (the capable sessions' mean outcome), the one saving the most cost; kept when the
best one's session-bootstrap intervals overlap the current one's on both measures ("too few to
tell"), and refused outright below ``min_sessions`` routed sessions with feedback.

**Held-out numbers.** Sessions are split into ``folds`` folds; for each, the rule chooses on the
other folds and the fold is scored under that choice and under the current threshold. The
held-out rows (each session scored once, by a choice that never saw it) and their paired
difference, with session-bootstrap 95 % intervals, are what tuning is worth on these sessions.
A change those rows show losing on one measure without gaining on the other (:func:`holds_up`)
is not made: the current value is kept.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.joined_log import JoinedLog
from switchyard.protocol.intervals import rank_interval as _interval

CAPABLE_ARMS = frozenset({"control", "shadow"})
"""Arms whose sessions the capable model (the baseline) served whole."""


class LogTuneError(ValueError):
    """The log cannot support the tuning asked for (the reason names the numbers)."""


@dataclass(slots=True, frozen=True)
class Turn:
    """One logged request of a routed session, as the replay needs it."""

    score: float | None
    capable: bool
    by_threshold: bool
    cost: float
    capable_cost: float
    router_cost: float
    details: Mapping[str, Any] | None = None


Decider = Callable[[Turn, float], bool]
"""Whether a logged turn would go to the capable target under a value of the tuned setting."""


def trajectory_decider(turn: Turn, value: float) -> bool:
    """A ``type: trajectory`` turn under ``threshold: value``: its logged score against the
    value; a turn another rule decided (``persistent_errors``) keeps its logged decision."""
    if turn.by_threshold and turn.score is not None:
        return turn.score >= value
    return turn.capable


@dataclass(slots=True, frozen=True)
class LogSession:
    """A routed session with feedback: its turns and its outcome."""

    key: tuple[str | None, str]
    turns: tuple[Turn, ...]
    outcome: float

    @property
    def logged_switch(self) -> int | None:
        """The index of the first turn the capable model served."""
        return next((i for i, t in enumerate(self.turns) if t.capable), None)


def _number(obj: Mapping[str, Any], name: str) -> float:
    value = obj.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _turn(obj: Mapping[str, Any], capable_target: str, threshold_source: str) -> Turn:
    router = obj.get("router_cost")
    extra = _number(router, "cost_usd") if isinstance(router, Mapping) else 0.0
    cost = _number(obj, "cost_usd")
    base = obj.get("baseline_cost_usd")
    capable = obj.get("selected") == capable_target or obj.get("tier") == "capable"
    score = obj.get("score")
    return Turn(
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        capable=capable,
        by_threshold=obj.get("source") == threshold_source,
        cost=cost,
        capable_cost=float(base) if isinstance(base, int | float) and not isinstance(base, bool) else cost,
        router_cost=extra + _number(obj, "feature_cost_usd"),
        details=details if isinstance(details := obj.get("details"), Mapping) else None,
    )


@dataclass(slots=True)
class LogData:
    """The routed sessions with an outcome, and the capable-served sessions' outcomes."""

    routed: list[LogSession]
    capable_outcomes: list[float]
    without_outcome: int
    outcome: str


def sessions_from(
    joined: JoinedLog,
    *,
    capable_target: str,
    outcome: str = "resolved",
    threshold_source: str = "trajectory",
) -> LogData:
    """The joined log's sessions, split into routed ones (replayed) and capable-served ones."""
    routed: list[LogSession] = []
    capable: list[float] = []
    missing = 0
    for session in joined.sessions.values():
        value = session.outcome.get(outcome)
        if value is None:
            missing += 1
            continue
        if session.arm in CAPABLE_ARMS:
            capable.append(value)
            continue
        turns = tuple(_turn(r, capable_target, threshold_source) for r in session.records)
        routed.append(LogSession(session.key, turns, value))
    # Folds and resamples draw session indices: in key order, the same sessions give the same
    # numbers whatever order concurrent sessions reached the log in.
    routed.sort(key=lambda s: (s.key[0] or "", s.key[1]))
    return LogData(routed, capable, missing, outcome)


def replay_one(session: LogSession, threshold: float, decide: Decider = trajectory_decider) -> tuple[int | None, bool]:
    """Where ``session`` switches under ``threshold``, and whether that rests on the censoring
    assumption (a setting that would not have switched at the logged switch, past which the
    log shows the capable model's run, not the efficient one's)."""
    logged = session.logged_switch
    end = len(session.turns) if logged is None else logged
    for i in range(end):
        if decide(session.turns[i], threshold):
            return i, False
    if logged is None:
        return None, False
    return logged, not decide(session.turns[logged], threshold)


@dataclass(slots=True, frozen=True)
class Scored:
    """Per-session numbers of one threshold: cost, always-capable cost, outcome."""

    cost: list[float]
    capable_cost: list[float]
    outcome: list[float]
    moved: int
    censored: int


def score(
    sessions: Sequence[LogSession], threshold: float, capable_rate: float, decide: Decider = trajectory_decider
) -> Scored:
    """Each session under ``threshold`` (see the module docstring for the assumptions)."""
    cost: list[float] = []
    cap: list[float] = []
    out: list[float] = []
    moved = censored = 0
    for s in sessions:
        switch, cens = replay_one(s, threshold, decide)
        censored += cens
        at = len(s.turns) if switch is None else switch
        cost.append(sum((t.capable_cost if i >= at else t.cost) + t.router_cost for i, t in enumerate(s.turns)))
        cap.append(sum(t.capable_cost for t in s.turns))
        if switch != s.logged_switch:
            moved += 1
            out.append(capable_rate)
        else:
            out.append(s.outcome)
    return Scored(cost, cap, out, moved, censored)


def measures(found: Scored, capable_rate: float, idx: Iterable[int] | None = None) -> tuple[float, float]:
    """``(points lost against always-capable, share of cost saved)`` over ``idx`` (all by default)."""
    rows = list(range(len(found.cost))) if idx is None else list(idx)
    if not rows:
        return 0.0, 0.0
    mean = sum(found.outcome[i] for i in rows) / len(rows)
    cap = sum(found.capable_cost[i] for i in rows)
    saved = 1.0 - sum(found.cost[i] for i in rows) / cap if cap > 0 else 0.0
    return 100.0 * (capable_rate - mean), saved


def _draws(found: Sequence[Scored], capable_rate: float, resamples: int, seed: int) -> list[list[tuple[float, float]]]:
    """Each ``Scored``'s measures on the same session resamples (so that differences are paired)."""
    rng = random.Random(seed)
    n = len(found[0].cost) if found else 0
    draws: list[list[tuple[float, float]]] = [[] for _ in found]
    for _ in range(resamples if n else 0):
        idx = [rng.randrange(n) for _ in range(n)]
        for k, f in enumerate(found):
            draws[k].append(measures(f, capable_rate, idx))
    return draws


def _intervals(draws: list[list[tuple[float, float]]]) -> list[dict[str, tuple[float, float]]]:
    return [
        {"points_lost": _interval([d[0] for d in fd]), "cost_saved": _interval([d[1] for d in fd])} if fd else {}
        for fd in draws
    ]


def bootstrap(
    found: Sequence[Scored], capable_rate: float, resamples: int, seed: int
) -> list[dict[str, tuple[float, float]]]:
    """Session-bootstrap 95 % intervals of each ``Scored``'s measures, same resamples for all
    (so that differences are paired)."""
    return _intervals(_draws(found, capable_rate, resamples, seed))


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def choose(
    sessions: Sequence[LogSession],
    grid: Sequence[float],
    current: float,
    capable_rate: float,
    *,
    max_points_lost: float,
    resamples: int,
    seed: int,
    decide: Decider = trajectory_decider,
) -> tuple[float, str, list[dict[str, Any]]]:
    """The rule on ``sessions``: the chosen threshold, the verdict and every value's numbers."""
    values = [current] + [v for v in grid if v != current]
    found = [score(sessions, v, capable_rate, decide) for v in values]
    ivs = bootstrap(found, capable_rate, resamples, seed)
    rows: list[dict[str, Any]] = []
    for v, f, iv in zip(values, found, ivs, strict=True):
        lost, saved = measures(f, capable_rate)
        rows.append(
            {
                "value": v,
                "current": v == current,
                "points_lost": lost,
                "cost_saved": saved,
                "intervals": iv,
                "moved": f.moved,
                "censored": f.censored,
            }
        )
    ok = [r for r in rows if r["points_lost"] <= max_points_lost] or [rows[0]]
    best = max(ok, key=lambda r: (r["cost_saved"], r["current"]))
    if best["current"]:
        return current, "kept: the current setting is the best within the budget", rows
    now = rows[0]
    if all(_overlap(best["intervals"][m], now["intervals"][m]) for m in ("points_lost", "cost_saved")):
        return current, "kept: too few to tell", rows
    return float(best["value"]), "changed", rows


def folds_of(sessions: Sequence[LogSession], k: int, seed: int) -> list[list[int]]:
    """``k`` folds of session indices, shuffled with ``seed`` (a session lies in one fold)."""
    order = list(range(len(sessions)))
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


def tune_log(
    data: LogData,
    grid: Sequence[float],
    current: float,
    *,
    max_points_lost: float = 2.0,
    folds: int = 5,
    min_sessions: int = 30,
    min_capable: int = 10,
    resamples: int = 1000,
    seed: int = 0,
    decide: Decider = trajectory_decider,
) -> dict[str, Any]:
    """The whole of ``tune --decision-log``: choice on all sessions, k-fold held-out rows.

    ``decide`` replays one logged turn under one value (:func:`trajectory_decider` for a
    trajectory route's threshold; :func:`switchyard.eval.log_stage.stage_decider` for a stage
    router's settings).

    Raises:
        LogTuneError: Fewer than ``min_capable`` capable-served sessions with feedback (the
            outcome after a would-be switch is unknown) or fewer routed sessions than folds.
    """
    routed, capable = data.routed, data.capable_outcomes
    if len(capable) < min_capable:
        raise LogTuneError(
            f"{len(capable)} control/shadow session(s) with a {data.outcome!r} report, need {min_capable}: "
            "the outcome after a would-be switch comes from sessions the capable model served whole "
            "(set experiment: {control_share: 0.1} and post feedback, docs/rollout.md)"
        )
    if len(routed) < max(folds, 2):
        raise LogTuneError(f"{len(routed)} routed session(s) with a {data.outcome!r} report: too few to replay")
    rate = sum(capable) / len(capable)

    def rule(on: Sequence[LogSession]) -> tuple[float, str, list[dict[str, Any]]]:
        return choose(
            on, grid, current, rate, max_points_lost=max_points_lost, resamples=resamples, seed=seed, decide=decide
        )

    chosen, verdict, rows = rule(routed)
    notes: list[str] = []
    if len(routed) < min_sessions:
        notes.append(
            f"refused: {len(routed)} routed sessions with feedback, fewer than --min-sessions {min_sessions}; "
            f"keeping the current value {current:g}"
        )
        chosen, verdict = current, "kept: too few sessions to tell"
    held_choice: dict[int, float] = {}
    for fold in folds_of(routed, folds, seed):
        inside = set(fold)
        train = [s for i, s in enumerate(routed) if i not in inside]
        pick, _, _ = rule(train)
        for i in fold:
            held_choice[i] = pick
    now = score(routed, current, rate, decide)
    per_session = [score([s], held_choice[i], rate, decide) for i, s in enumerate(routed)]
    tuned = Scored(
        [p.cost[0] for p in per_session],
        [p.capable_cost[0] for p in per_session],
        [p.outcome[0] for p in per_session],
        sum(p.moved for p in per_session),
        sum(p.censored for p in per_session),
    )
    # One set of resamples gives both arms' intervals and their paired difference.
    draws = _draws([now, tuned], rate, resamples, seed + 1)
    ivs = _intervals(draws)
    diff = _paired_difference(now, tuned, rate, draws)
    if verdict == "changed" and not holds_up(diff):
        iv_lost, iv_saved = diff["intervals"]["points_lost"], diff["intervals"]["cost_saved"]
        notes.append(
            f"the change does not hold up on held-out folds: tuned - current points lost {diff['points_lost']:+.1f} "
            f"[{iv_lost[0]:+.1f}, {iv_lost[1]:+.1f}], cost saved {100 * diff['cost_saved']:+.1f} points "
            f"[{100 * iv_saved[0]:+.1f}, {100 * iv_saved[1]:+.1f}]; keeping the current value {current:g}"
        )
        chosen, verdict = current, "kept: the choice does not hold up on held-out folds"
    held = []
    for name, f, iv in (("current", now, ivs[0]), ("tuned (chosen per fold)", tuned, ivs[1])):
        lost, saved = measures(f, rate)
        held.append({"name": name, "points_lost": lost, "cost_saved": saved, "intervals": iv, "censored": f.censored})
    if any(r["censored"] for r in rows):
        notes.append(
            "censored sessions (a higher threshold past the logged switch, where the router scored no more "
            "turns) are assumed to switch where the log did: their saving is a lower bound"
        )
    return {
        "sessions": len(routed),
        "capable_sessions": len(capable),
        "without_outcome": data.without_outcome,
        "outcome": data.outcome,
        "capable_rate": rate,
        "current": current,
        "chosen": chosen,
        "verdict": verdict,
        "max_points_lost": max_points_lost,
        "rows": rows,
        "folds": folds,
        "fold_choices": sorted({held_choice[i] for i in held_choice}),
        "held_out": held,
        "held_out_difference": diff,
        "bootstrap": {"resamples": resamples, "seed": seed},
        "notes": notes,
    }


def holds_up(diff: Mapping[str, Any]) -> bool:
    """Whether a change chosen on all sessions holds up on held-out folds: it does not, when the
    k-fold paired difference shows a loss on one measure (its 95 % interval wholly on the losing
    side) without a gain on the other."""
    iv = diff.get("intervals") or {}
    if not iv:
        return True
    (lost_lo, lost_hi), (saved_lo, saved_hi) = iv["points_lost"], iv["cost_saved"]
    return not ((saved_hi < 0 and lost_hi >= 0) or (lost_lo > 0 and saved_lo <= 0))


def _paired_difference(
    now: Scored, tuned: Scored, rate: float, draws: list[list[tuple[float, float]]]
) -> dict[str, Any]:
    """Tuned minus current on the same held-out sessions, from ``_draws([now, tuned], ...)``."""
    lost = [b[0] - a[0] for a, b in zip(draws[0], draws[1], strict=True)]
    saved = [b[1] - a[1] for a, b in zip(draws[0], draws[1], strict=True)]
    a, b = measures(now, rate), measures(tuned, rate)
    return {
        "points_lost": b[0] - a[0],
        "cost_saved": b[1] - a[1],
        "intervals": {"points_lost": _interval(lost), "cost_saved": _interval(saved)} if lost else {},
    }


__all__ = [
    "CAPABLE_ARMS",
    "Decider",
    "LogData",
    "LogSession",
    "LogTuneError",
    "Scored",
    "Turn",
    "choose",
    "folds_of",
    "holds_up",
    "replay_one",
    "score",
    "sessions_from",
    "trajectory_decider",
    "tune_log",
]
