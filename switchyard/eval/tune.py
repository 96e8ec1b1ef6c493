"""``switchyard tune``: one route setting chosen on a suite's training split, scored on its test split.

Layer: ``eval``.

The loop (docs/rollout.md, step 4): every value of one route setting (``--grid
confidence_threshold=0.3,0.5,0.7``) and the config's own setting are replayed on the **train**
split of a suite file (:func:`~switchyard.eval.suite_replay.run_suite`: the recorded runs, the
latch counterfactual, a task bootstrap). The rule, fixed before any number is seen: among the
settings whose points lost on train are within ``max_points_lost``, the one that saves the most
cost. Then both the config's setting and the chosen one are scored once on the **test** split,
which the choice never saw; that pair of rows — with their 95 % intervals and the random-latch
null — is what the tuned setting is worth.

**Too few to tell.** When the chosen setting's train intervals overlap the current setting's on
both measures (cost saved and points lost), the data cannot tell them apart: the current setting
is kept, and the numbers are printed. Overlapping 95 % intervals is a conservative test (it keeps
the current setting more often than a paired test would); it is the one the tool applies.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.config.nested import split
from switchyard.eval.agent_replay import with_setting
from switchyard.eval.latch import PairScore, PooledScore
from switchyard.eval.suite import Suite
from switchyard.eval.suite_replay import SuiteResult, run_suite
from switchyard.eval.suite_runs import LineCache

UNSET = "(unset)"
"""How a setting the config does not name is shown (the router's default applies)."""


@dataclass(slots=True)
class Point:
    """One setting's numbers on one split, for the group the choice reads.

    Attributes:
        value: The setting (:data:`UNSET` for a key the config leaves out).
        current: Whether it is the config's own setting.
        group: The pooled group (or the single pair) read.
        points_lost: The route's points lost against always-capable.
        cost_saved: The route's share of cost saved against always-capable.
        intervals: ``points_lost`` / ``cost_saved`` / ``..._vs_null``: ``(low, high)``.
        null_points_lost: The random latch's points lost.
        null_cost_saved: The random latch's cost saved.
    """

    value: Any
    current: bool
    group: str
    points_lost: float
    cost_saved: float
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    null_points_lost: float = 0.0
    null_cost_saved: float = 0.0
    pairs: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per pair: ``(points lost, cost saved)`` of the route."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "value": self.value,
            "current": self.current,
            "group": self.group,
            "points_lost": self.points_lost,
            "cost_saved": self.cost_saved,
            "intervals": {k: {"low": lo, "high": hi} for k, (lo, hi) in self.intervals.items()},
            "null": {"points_lost": self.null_points_lost, "cost_saved": self.null_cost_saved},
            "pairs": {name: {"points_lost": lost, "cost_saved": saved} for name, (lost, saved) in self.pairs.items()},
        }


@dataclass(slots=True)
class TuneResult:
    """What ``switchyard tune`` found.

    Attributes:
        route: The route.
        key: The setting tuned (a dotted path in the route's block).
        current: The config's setting (:data:`UNSET` when it names none).
        chosen: The setting to use: the current one when nothing better was told apart.
        verdict: ``changed``, ``kept: best`` (the current setting is the best on train),
            ``kept: too few to tell`` or ``kept: none within the budget``.
        train: Every setting on the train split (the current one first).
        test: The current and (when changed) the chosen setting on the test split.
        max_points_lost: The budget of the rule.
        notes: What the replay said (pairs left out of a split …).
    """

    route: str
    key: str
    current: Any
    chosen: Any
    verdict: str
    train: list[Point]
    test: list[Point]
    train_split: str
    test_split: str
    max_points_lost: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "route": self.route,
            "key": self.key,
            "current": self.current,
            "chosen": self.chosen,
            "verdict": self.verdict,
            "max_points_lost": self.max_points_lost,
            "train_split": self.train_split,
            "test_split": self.test_split,
            "train": [p.to_dict() for p in self.train],
            "test": [p.to_dict() for p in self.test],
            "notes": self.notes,
        }


def current_value(loaded: LoadedConfig, route: str, key: str) -> Any:
    """The config's ``routes.<route>.<key>`` (:data:`UNSET` when it names none)."""
    node: Any = loaded.raw.get("routes", {}).get(route)
    for part in split(key):
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return UNSET
    return copy.deepcopy(node)


def _group(result: SuiteResult) -> PairScore | PooledScore:
    """The numbers the choice reads: the pooled group of all pairs (else the last, the widest),
    or the only pair."""
    score = result.score
    if score.pooled:
        return next((g for g in score.pooled if g.name.startswith("all")), score.pooled[-1])
    if len(score.pairs) == 1:
        return score.pairs[0]
    raise ValueError("the suite has several pairs and no pooled group: name one pair with --pair")


def _point(result: SuiteResult, value: Any, current: bool) -> Point:
    group = _group(result)
    route, null = group.row("route"), group.row("random latch")
    return Point(
        value=value,
        current=current,
        group=group.name,
        points_lost=route.points_lost,
        cost_saved=route.cost_saved,
        intervals={k: (iv.low, iv.high) for k, iv in group.intervals.items()},
        null_points_lost=null.points_lost,
        null_cost_saved=null.cost_saved,
        pairs={p.name: (p.row("route").points_lost, p.row("route").cost_saved) for p in result.score.pairs},
    )


def _overlap(a: Point, b: Point, key: str) -> bool:
    """Whether the two settings' intervals of ``key`` overlap (``True`` without intervals)."""
    ia, ib = a.intervals.get(key), b.intervals.get(key)
    if ia is None or ib is None:
        return True
    return ia[0] <= ib[1] and ib[0] <= ia[1]


def choose(points: Sequence[Point], max_points_lost: float) -> tuple[Point, str]:
    """The rule of the module docstring: ``(setting to use, verdict)``; ``points[0]`` is current."""
    current = points[0]
    feasible = [p for p in points if p.points_lost <= max_points_lost]
    if not feasible:
        return current, "kept: none within the budget"
    best = max(feasible, key=lambda p: p.cost_saved)  # the first of equals: the current setting
    if best is current or (best.cost_saved <= current.cost_saved and best.points_lost >= current.points_lost):
        return current, "kept: best"
    if _overlap(best, current, "cost_saved") and _overlap(best, current, "points_lost"):
        return current, "kept: too few to tell"
    return best, "changed"


async def tune_suite(
    loaded: LoadedConfig,
    route: str,
    suite: Suite,
    key: str,
    values: Sequence[Any],
    *,
    train: str,
    test: str,
    max_points_lost: float = 2.0,
    **kw: Any,
) -> TuneResult:
    """Chooses ``key`` among ``values`` on split ``train``; scores the current and the chosen
    setting on split ``test`` (``kw``: :func:`run_suite`'s options: pairs, resamples, seed …).

    Raises:
        ValueError: ``train`` and ``test`` are the same split, or no group to read.
        PairedError, ConfigError, SuiteError: As :func:`run_suite` and
            :func:`~switchyard.eval.agent_replay.with_setting`.
    """
    if train == test:
        raise ValueError(f"--train and --test are both {train!r}: a setting chosen on its test tasks says nothing")
    now = current_value(loaded, route, key)
    # Every replay below reads the same trajectory files: read them once (as sweep_suite does).
    kw["lines"] = kw.get("lines") or LineCache()
    first = await run_suite(loaded, route, suite, split=train, **kw)
    points, notes = [_point(first, now, True)], list(first.notes)
    for value in values:
        if value == now:
            continue
        result = await run_suite(with_setting(loaded, route, key, value), route, suite, split=train, **kw)
        points.append(_point(result, value, False))
    chosen, verdict = choose(points, max_points_lost)
    scored = [_point(await run_suite(loaded, route, suite, split=test, **kw), now, True)]
    if chosen is not points[0]:
        tuned = with_setting(loaded, route, key, chosen.value)
        result = await run_suite(tuned, route, suite, split=test, **kw)
        scored.append(_point(result, chosen.value, False))
        notes += result.notes
    return TuneResult(route, key, now, chosen.value, verdict, points, scored, train, test, max_points_lost, notes)


__all__ = ["UNSET", "Point", "TuneResult", "choose", "current_value", "tune_suite"]
