"""``switchyard replay --outcomes``: a route's runs scored by the agent-replay counterfactual.

Layer: ``eval``.

Walks every run through the route's real decision path (:func:`switchyard.eval.replay.replay`:
one session per run, judges called through the engine and booked) — or reads the decisions a
proxy logged — maps each decision to a tier, and scores the runs with
:func:`switchyard.eval.counterfactual.simulate`. A sweep repeats the replay with one route
setting changed (a dotted path into the route's YAML block).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Any, Unpack

import yaml

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig, load_config
from switchyard.config.nested import split
from switchyard.eval.counterfactual import CASES, Report, Row, Scoring, TaskOutcome, simulate
from switchyard.eval.evaluate import TierChoice, resolve_tiers
from switchyard.eval.offline import route_spec
from switchyard.eval.paired import (
    PairedError,
    Runs,
    TierMap,
    dataset_models,
    outcome_models,
    read_outcomes,
    runs_from_log,
    runs_from_turns,
)
from switchyard.eval.replay import TurnDecision, replay

ROUTER_COST_RULE = "the router's own model calls (a judge) are paid on every decision of a run and added to its cost"


@dataclass(slots=True)
class Setup:
    """What scoring needs besides the runs.

    Attributes:
        tiers: The route's capable/efficient targets.
        models: ``(efficient, capable)`` outcome models.
        tier_map: Target → tier.
        outcomes: Task → outcomes.
    """

    tiers: TierChoice
    models: tuple[str, str]
    tier_map: TierMap
    outcomes: dict[str, TaskOutcome]


def prepare(
    loaded: LoadedConfig,
    route: str,
    outcomes_path: str | Path,
    *,
    capable_target: str | None = None,
    efficient_target: str | None = None,
    capable_model: str | None = None,
    efficient_model: str | None = None,
    tier_flags: Mapping[str, str] | None = None,
) -> Setup:
    """Resolves the tiers, the outcome models and reads the outcomes.

    Raises:
        PairedError: The route declares no tiers and no flags name them; unmapped models.
        EvalError: Bad ``--capable-target/--efficient-target`` flags.
        DatasetError: The outcomes file is malformed.
    """
    tiers = resolve_tiers(loaded, route, capable_target, efficient_target)
    if tiers is None:
        raise PairedError(
            f"route {route!r} declares no capable/efficient targets; "
            "give --capable-target TARGET --efficient-target TARGET"
        )
    available = dataset_models(outcomes_path)
    models = outcome_models(loaded, tiers, available, efficient_model, capable_model)
    tier_map = TierMap.build(loaded, tiers, tier_flags or {}, models)
    return Setup(tiers, models, tier_map, read_outcomes(outcomes_path, *models, models=available))


@dataclass(slots=True)
class AgentReplay:
    """A scored replay.

    Attributes:
        route: Route name.
        router: Route type.
        setup: Tiers, models and outcomes.
        runs: The runs scored and those left out.
        report: The counterfactual.
        source: Where the decisions came from (``replay`` or ``decision log``).
        setting: ``(key, value)`` for a sweep point.
        notes: Remarks printed under the tables.
        reported: With a decision log, the sessions' own feedback (:func:`reported_outcomes`).
    """

    route: str
    router: str
    setup: Setup
    runs: Runs
    report: Report
    source: str
    setting: tuple[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    reported: dict[str, Any] | None = None

    def to_dict(self, *, per_run: bool = False) -> dict[str, Any]:
        """JSON-ready."""
        tasks_with_runs = {r.task for r in self.runs.runs}
        return {
            "route": self.route,
            "router": self.router,
            "source": self.source,
            "tiers": {"capable": self.setup.tiers.capable, "efficient": self.setup.tiers.efficient},
            "models": {"efficient": self.setup.models[0], "capable": self.setup.models[1]},
            "outcome_tasks": len(self.setup.outcomes),
            "outcome_tasks_without_runs": len(set(self.setup.outcomes) - tasks_with_runs),
            **self.runs.to_dict(),
            "router_cost": ROUTER_COST_RULE,
            **({"setting": {"key": self.setting[0], "value": self.setting[1]}} if self.setting else {}),
            "notes": self.notes,
            **({"reported": self.reported} if self.reported is not None else {}),
            **self.report.to_dict(per_run=per_run),
        }


def _score(
    loaded: LoadedConfig, route: str, setup: Setup, runs: Runs, source: str, **sim: Unpack[Scoring]
) -> AgentReplay:
    if not runs.runs:
        why = "; ".join(f"{n} x {r}" for r, n in runs.skipped.items()) or "no runs in the input"
        raise PairedError(f"no run could be scored ({why})")
    report = simulate(runs.runs, setup.outcomes, **sim)
    return AgentReplay(route, route_spec(loaded, route).type, setup, runs, report, source)


async def score_replay(
    loaded: LoadedConfig,
    route: str,
    trajectories: str | Path,
    setup: Setup,
    *,
    first_only: bool = False,
    limit: int | None = None,
    concurrency: int = 1,
    progress: bool | None = None,
    on_turn: Callable[[TurnDecision], None] | None = None,
    **sim: Unpack[Scoring],
) -> AgentReplay:
    """Replays ``trajectories`` through ``route`` and scores the runs.

    ``oracle_points``, ``resamples`` and ``seed`` go to :func:`~switchyard.eval.counterfactual.simulate`
    (its defaults where left out).

    Raises:
        PairedError: Nothing could be scored, or a decision picked a target without a tier.
        DatasetError: A malformed trajectories file.
    """
    summary = await replay(
        loaded,
        route,
        trajectories,
        tiers=setup.tiers,
        limit=limit,
        concurrency=concurrency,
        progress=progress,
        on_turn=on_turn,
        first_only=first_only,
    )
    runs = runs_from_turns(summary.turns, setup.tier_map, setup.outcomes)
    return _score(loaded, route, setup, runs, "replay", **sim)


def score_log(
    loaded: LoadedConfig,
    route: str,
    log: str | Path,
    setup: Setup,
    *,
    session_tasks: Mapping[str, str] | None = None,
    session_pattern: str | None = None,
    **sim: Unpack[Scoring],
) -> AgentReplay:
    """Scores the decisions a decision log holds (one run per session).

    ``oracle_points``, ``resamples`` and ``seed`` go to :func:`~switchyard.eval.counterfactual.simulate`
    (its defaults where left out).

    Raises:
        PairedError: Nothing could be scored, or a decision picked a target without a tier.
        DatasetError: A malformed log.
    """
    runs = runs_from_log(
        log, route, setup.tier_map, setup.outcomes, session_tasks=session_tasks, session_pattern=session_pattern
    )
    scored = _score(loaded, route, setup, runs, "decision log", **sim)
    scored.reported = reported_outcomes(log, route)
    return scored


def reported_outcomes(log: str | Path, route: str) -> dict[str, Any]:
    """What the sessions' own feedback says (``POST /v1/feedback`` lines of the log, joined by
    tenant and session or request id, the latest report winning): the check on the counterfactual.

    Returns:
        ``{sessions, with_feedback, unmatched, <outcome>: {n, mean, low, high}}`` per outcome kind.
    """
    from switchyard.engine.joined_log import OUTCOMES, join_log
    from switchyard.eval.dataset import json_lines
    from switchyard.protocol.intervals import mean_interval

    joined = join_log((obj for _, _, obj in json_lines(Path(log)) if isinstance(obj, dict)), route=route)
    sessions = list(joined.sessions.values())
    found: dict[str, Any] = {
        "sessions": len(sessions),
        "with_feedback": sum(1 for s in sessions if s.outcome),
        "unmatched": len(joined.unmatched),
    }
    for name in OUTCOMES:
        values = [s.outcome[name] for s in sessions if name in s.outcome]
        if values:
            found[name] = mean_interval(values)
    return found


def parse_sweep(spec: str) -> tuple[str, list[Any]]:
    """``"confidence_threshold=0.3,0.5,0.7"`` → ``("confidence_threshold", [0.3, 0.5, 0.7])``.

    Each value is read as YAML (``0.5`` a number, ``true`` a boolean, ``efficient_first`` text).

    Raises:
        PairedError: No ``=``, no key or no value.
    """
    key, sep, values = spec.partition("=")
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not key.strip() or not parts:
        raise PairedError(f"--sweep {spec!r}: expected KEY=v1,v2,... (e.g. confidence_threshold=0.3,0.5,0.7)")
    try:
        parsed = [yaml.safe_load(v) for v in parts]
    except yaml.YAMLError as exc:
        raise PairedError(f"--sweep {spec!r}: a value is not valid YAML ({exc})") from None
    return key.strip(), parsed


def with_setting(loaded: LoadedConfig, route: str, key: str, value: Any) -> LoadedConfig:
    """``loaded`` with ``routes.<route>.<key>`` set to ``value``, validated again.

    ``key`` is a dotted path inside the route's block (``stages[1].threshold``); every part but
    the last must exist. Relative paths keep resolving against the original config's folder.

    Raises:
        PairedError: The path does not exist in the route's block.
        ConfigError: The changed config does not validate (the YAML path is named).
    """
    raw = copy.deepcopy(loaded.raw)
    node: Any = raw.get("routes", {}).get(route)
    where = f"routes.{route}"
    parts = split(key)
    if not parts or not isinstance(parts[-1], str):
        raise PairedError(f"--sweep {key}: the last part of the path must be a key")
    for part in parts[:-1]:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise PairedError(f"--sweep {key}: {where}[{part}] is not in the config")
            node, where = node[part], f"{where}[{part}]"
        else:
            if not isinstance(node, dict) or part not in node:
                raise PairedError(f"--sweep {key}: {where}.{part} is not in the config")
            node, where = node[part], f"{where}.{part}"
    if not isinstance(node, dict):
        raise PairedError(f"--sweep {key}: {where} is not a mapping")
    node[parts[-1]] = value
    changed = load_config(raw)
    return replace(changed, source=loaded.source, base_dir=loaded.base_dir)


@dataclass(slots=True)
class SweepPoint:
    """One value of a sweep and the route's rows at it (per case)."""

    value: Any
    result: AgentReplay

    def route_row(self, case: str = "base") -> Row:
        """The route's row in ``case``."""
        return self.result.report.case(case).row("route")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the route's and the null's rows per case, and the intervals."""
        out: dict[str, Any] = {"value": self.value, "runs": len(self.result.runs.runs)}
        for case in self.result.report.cases:
            out[case.case] = {
                "route": case.row("route").to_dict(),
                "null": case.row("random latch").to_dict(),
                "intervals": {k: v.to_dict() for k, v in case.intervals.items()},
            }
        return out


async def sweep(
    loaded: LoadedConfig,
    route: str,
    key: str,
    values: Sequence[Any],
    score: Callable[[LoadedConfig], Any],
) -> list[SweepPoint]:
    """Scores the route once per value of ``key``; ``score`` is awaited with each config.

    Raises:
        PairedError, ConfigError: As :func:`with_setting`.
    """
    points: list[SweepPoint] = []
    for value in values:
        result: AgentReplay = await score(with_setting(loaded, route, key, value))
        result.setting = (key, value)
        points.append(SweepPoint(value, result))
    return points


__all__ = [
    "CASES",
    "AgentReplay",
    "Setup",
    "SweepPoint",
    "parse_sweep",
    "prepare",
    "score_log",
    "score_replay",
    "sweep",
    "with_setting",
]
