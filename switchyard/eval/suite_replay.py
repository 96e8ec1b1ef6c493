"""``switchyard replay --suite``: a route replayed on every pair of a suite, scored in one table.

Layer: ``eval``.

For each pair the efficient model's own runs (or a dataset's stand-in runs) are walked turn by
turn through the route's real decision path (:func:`switchyard.eval.replay.replay`, one session
per run), each decision mapped to a tier, and the runs scored by :func:`switchyard.eval.latch.score_suite`
against the pair's recorded outcomes and (cache-)priced costs. A sweep repeats the whole suite
with one route setting changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.agent_replay import with_setting
from switchyard.eval.counterfactual import Run
from switchyard.eval.evaluate import TierChoice, resolve_tiers
from switchyard.eval.latch import SuiteScore, score_suite
from switchyard.eval.offline import route_spec
from switchyard.eval.paired import PairedError, TierMap, runs_from_turns
from switchyard.eval.replay import TurnDecision, replay
from switchyard.eval.suite import NoRuns, Suite, SuiteError, pair_name
from switchyard.eval.suite_runs import LineCache, PairData, build_pair, task_fields


@dataclass(slots=True)
class SuiteResult:
    """A scored suite.

    Attributes:
        route: Route name.
        router: Route type.
        config: The router config's source.
        suite: The suite file.
        split: The split scored (``None``: all tasks).
        score: Rows and intervals.
        decisions: Decisions made (assistant turns replayed).
        seconds: Wall time of the replay and the scoring.
        setting: ``(key, value)`` of a sweep point.
    """

    route: str
    router: str
    config: str | None
    suite: str
    split: str | None
    score: SuiteScore
    decisions: int
    seconds: float
    setting: tuple[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "route": self.route,
            "router": self.router,
            "config": self.config,
            "suite": self.suite,
            "split": self.split,
            "decisions": self.decisions,
            "seconds": self.seconds,
            **({"setting": {"key": self.setting[0], "value": self.setting[1]}} if self.setting else {}),
            "notes": self.notes,
            **self.score.to_dict(),
        }


def _tiers(loaded: LoadedConfig, route: str, capable: str | None, efficient: str | None) -> TierChoice:
    tiers = resolve_tiers(loaded, route, capable, efficient)
    if tiers is None:
        raise PairedError(
            f"route {route!r} declares no capable/efficient targets; "
            "give --capable-target TARGET --efficient-target TARGET"
        )
    return tiers


async def run_suite(
    loaded: LoadedConfig,
    route: str,
    suite: Suite,
    *,
    split: str | None = None,
    pairs: Sequence[str] | None = None,
    pricing: str | None = None,
    capable_target: str | None = None,
    efficient_target: str | None = None,
    tier_flags: Mapping[str, str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    oracle_points: float = 6.0,
    concurrency: int = 1,
    lines: LineCache | None = None,
    on_turn: Callable[[str, TurnDecision], None] | None = None,
) -> SuiteResult:
    """Replays every pair of ``suite`` (or those named in ``pairs``) through ``route`` and scores them.

    Args:
        loaded: The router config.
        route: Route name.
        suite: The suite.
        split: Score only the tasks of this split of the suite file.
        pairs: Pair names (default: all).
        pricing: ``cache`` or ``list``: override the pricing of datasets of own runs.
        capable_target: The capable tier's target (default: the route's).
        efficient_target: The efficient tier's target (default: the route's).
        tier_flags: Other targets' tiers (``TARGET -> capable|efficient``).
        resamples: Task-bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
        oracle_points: The oracle's points-lost budget.
        concurrency: Runs replayed at once.
        lines: Trajectory files already read (a sweep reads them once).
        on_turn: Called with the pair's name and every turn's decision, in turn order within a run.

    Raises:
        SuiteError: Bad split, pair, price or an empty pair.
        PairedError: The route has no tiers; a decision picked a target without a tier.
        DatasetError: A malformed file.
    """
    started = time.perf_counter()
    tiers = _tiers(loaded, route, capable_target, efficient_target)
    chosen = suite.pairs(list(pairs) if pairs else None)
    split_spec = suite.split(split)
    cache = lines or LineCache()
    scored: list[tuple[PairData, list[Run]]] = []
    decisions = 0
    notes: list[str] = []
    for pair in chosen:
        try:
            data = build_pair(suite, loaded, pair, split=split_spec, lines=cache, pricing=pricing)
        except NoRuns:
            if split is None:
                raise
            notes.append(f"{pair_name(pair)}: no task of split {split!r}; left out")
            continue
        name = data.name

        def seen(turn: TurnDecision, name: str = name) -> None:
            if on_turn is not None:
                on_turn(name, turn)

        summary = await replay(
            loaded, route, data.runs, tiers=tiers, concurrency=concurrency, progress=False, on_turn=seen
        )
        decisions += len(summary.turns)
        for t in summary.turns:
            data.scores.setdefault(t.trajectory, []).append(t.decided.score)
        tier_map = TierMap.build(loaded, tiers, dict(tier_flags or {}), (pair.efficient, pair.capable))
        runs = runs_from_turns(summary.turns, tier_map, data.outcomes)
        data.skipped.update(runs.skipped)
        if not runs.runs:
            raise SuiteError(f"pair {data.name!r}: every run was left out ({dict(runs.skipped)})")
        scored.append((data, runs.runs))
    if not scored:
        raise SuiteError(f"no pair has tasks in split {split!r}")
    score = score_suite(
        scored,
        resamples=resamples,
        seed=seed,
        oracle_points=oracle_points,
        labels={k: d.label or k for k, d in suite.spec.datasets.items()},
    )
    return SuiteResult(
        route,
        route_spec(loaded, route).type,
        None if loaded.source is None else str(loaded.source),
        str(suite.source),
        split,
        score,
        decisions,
        time.perf_counter() - started,
        notes=notes,
    )


async def sweep_suite(
    loaded: LoadedConfig, route: str, suite: Suite, key: str, values: Sequence[Any], **kw: Any
) -> list[SuiteResult]:
    """The suite once per value of route setting ``key`` (a dotted path into the route's block).

    Raises:
        PairedError, ConfigError: As :func:`~switchyard.eval.agent_replay.with_setting`.
        SuiteError: As :func:`run_suite`.
    """
    lines = kw.pop("lines", None) or LineCache()
    out: list[SuiteResult] = []
    for value in values:
        result = await run_suite(with_setting(loaded, route, key, value), route, suite, lines=lines, **kw)
        result.setting = (key, value)
        out.append(result)
    return out


def split_tasks(suite: Suite, split: str | None) -> dict[str, list[str]]:
    """Per dataset, the task ids of ``split`` (all tasks when ``None``), sorted.

    For training and tuning on what is not scored: the complement of a split is the dataset's
    other tasks.

    Raises:
        SuiteError: No such split. DatasetError: A malformed file.
    """
    spec = suite.split(split)
    cache = LineCache()
    out: dict[str, list[str]] = {}
    for name, ds in suite.spec.datasets.items():
        fields = task_fields(cache.get(suite.path(ds.trajectories)))
        out[name] = sorted(t for t, f in fields.items() if spec is None or spec.keeps(t, f))
    return out


__all__ = ["SuiteResult", "run_suite", "split_tasks", "sweep_suite"]
