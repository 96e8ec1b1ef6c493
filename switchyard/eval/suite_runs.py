"""A suite pair's runs and what each is worth at every switch turn.

Layer: ``eval``.

For every run of the efficient model this builds a :class:`RunTable`: ``never`` — the run's
(resolve, USD) when the route never switches — and ``switched[k-1]`` — its (resolve, USD) when the
route's first switch to the capable tier is at turn ``k``. With a dataset of every model's own runs
(``outcomes: runs``) the efficient run's own outcome and messages give ``never``; after a switch the
outcome is the capable model's own run of the task and the cost is the efficient run's first
``k - 1`` turns plus the capable run continued from the handed-over context
(:func:`switchyard.eval.cache_cost.switched_cost`), cache-priced or at list price. With a paired
outcomes file it is the ``replay --outcomes`` base case: ``(p_e, C_e)`` and ``(p_c, f·C_e + C_c)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.cache_cost import CachePrice, TurnTokens, price_turns, switched_cost, turn_tokens
from switchyard.eval.counterfactual import TaskOutcome
from switchyard.eval.dataset import DatasetError, json_lines
from switchyard.eval.paired import read_outcomes, task_of
from switchyard.eval.replay import OUTCOME_FIELDS, Trajectory, run_line, succeeded
from switchyard.eval.suite import DatasetSpec, NoRuns, PairSpec, SplitSpec, Suite, SuiteError, pair_name

Value = tuple[float, float]
"""``(resolve, USD)``."""


@dataclass(slots=True)
class Line:
    """One run of a trajectories file.

    Attributes:
        traj: The run as the replay reads it.
        fields: The line's scalar fields (model, suite, ...), for ``runs_field`` and splits.
    """

    traj: Trajectory
    fields: dict[str, Any]

    @property
    def task(self) -> str:
        """The run's task id (its ``task_id``, else its ``id``)."""
        return self.traj.task or self.traj.id

    def resolved(self) -> float | None:
        """1.0 / 0.0 from the line's outcome field; ``None`` when it has none."""
        ok = succeeded(self.traj.outcome)
        return None if ok is None else float(ok)

    def turns(self) -> list[TurnTokens]:
        """Estimated tokens per assistant turn."""
        return turn_tokens(self.traj.messages)


def read_lines(path: Path) -> list[Line]:
    """Every run of a trajectories file.

    Raises:
        DatasetError: The file is missing, or a line is not a run (file and line named).
    """
    if not path.is_file():
        raise DatasetError(f"trajectories not found: {path}")
    out: list[Line] = []
    for where, number, obj in json_lines(path):
        obj, messages = run_line(where, obj)
        tools = obj.get("tools") if isinstance(obj.get("tools"), list) else None
        task = obj.get("task_id")
        outcome = {k: obj[k] for k in OUTCOME_FIELDS if k in obj}
        traj = Trajectory(obj["id"], number, messages, tools, outcome, None if task is None else str(task))
        scalars = {k: v for k, v in obj.items() if isinstance(v, str | int | float | bool) and k != "task_text"}
        out.append(Line(traj, scalars))
    return out


@dataclass(slots=True)
class RunTable:
    """What one run is worth: never switched, and first switched at each turn ``k`` (1-based)."""

    never: Value
    switched: list[Value]

    def at(self, k: int | None) -> Value:
        """The value with the first switch at ``k`` (``None``: never)."""
        return self.never if k is None else self.switched[k - 1]


@dataclass(slots=True)
class PairData:
    """A pair's runs, ready to be decided and scored.

    Attributes:
        pair: The pair's spec.
        name: Its name.
        pricing: ``cache``, ``list`` or ``outcomes``.
        runs: The efficient model's runs (or the stand-ins), in file order.
        tables: Run id → its values.
        outcomes: Task → the two models' task-level outcomes (means over the task's runs).
        skipped: Why runs were left out (reason → count).
        stand_in: Whether the runs are another model's (their decisions stand in for the
            efficient model's).
        scores: Run id → the route's ``Decision.score`` at each turn (``None`` where it gave
            none), filled in by the replay.
    """

    pair: PairSpec
    name: str
    pricing: str
    runs: list[Trajectory] = field(default_factory=list)
    tables: dict[str, RunTable] = field(default_factory=dict)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    stand_in: bool = False
    scores: dict[str, list[float | None]] = field(default_factory=dict)


def model_prices(suite: Suite, loaded: LoadedConfig, models: tuple[str, ...]) -> dict[str, CachePrice]:
    """Each model's price: a config target whose ``model`` is it, else the suite's ``prices:``.

    Raises:
        SuiteError: A model priced by neither.
    """
    by_model = {t.model: t.price for t in loaded.config.targets.values()}
    out: dict[str, CachePrice] = {}
    for m in models:
        if m in by_model:
            out[m] = CachePrice.from_price(by_model[m])
        elif m in suite.spec.prices:
            out[m] = CachePrice.from_price(suite.spec.prices[m])
        else:
            raise SuiteError(
                f"{suite.source}: no price for model {m!r}: add prices.{m} "
                "(input_per_mtok, output_per_mtok, cached_input_per_mtok, cache_write_per_mtok) "
                "or a target with this model id to the router config"
            )
    return out


class LineCache:
    """Trajectory files read once per suite run."""

    def __init__(self) -> None:
        self._files: dict[Path, list[Line]] = {}

    def get(self, path: Path) -> list[Line]:
        """The runs of ``path``."""
        if path not in self._files:
            self._files[path] = read_lines(path)
        return self._files[path]


def _mean(values: list[Value]) -> Value:
    return math.fsum(v[0] for v in values) / len(values), math.fsum(v[1] for v in values) / len(values)


def build_pair(
    suite: Suite,
    loaded: LoadedConfig,
    pair: PairSpec,
    *,
    split: SplitSpec | None,
    lines: LineCache,
    pricing: str | None = None,
) -> PairData:
    """The pair's runs and tables on the tasks of ``split``.

    ``pricing`` (``cache`` or ``list``) overrides a dataset of own runs' pricing.

    Raises:
        SuiteError: A model without a price; the efficient model has no runs in the file.
        NoRuns: No run of the efficient model is left to score (e.g. none in ``split``).
        DatasetError, PairedError: A malformed trajectories or outcomes file.
    """
    ds = suite.spec.datasets[pair.dataset]
    mode = ds.price_mode if not ds.own_runs or pricing is None else pricing
    data = PairData(pair, pair_name(pair), mode)
    all_lines = lines.get(suite.path(ds.trajectories))
    if ds.own_runs:
        _own(suite, loaded, ds, pair, split, all_lines, data)
    else:
        _paired(suite, ds, pair, split, all_lines, data)
    if not data.runs:
        why = "; ".join(f"{n} x {r}" for r, n in data.skipped.items()) or "no runs in the file"
        raise NoRuns(f"pair {data.name!r}: no run to score ({why})")
    return data


def _in_split(split: SplitSpec | None, line: Line) -> bool:
    return split is None or split.keeps(line.task, line.fields)


def _own(
    suite: Suite,
    loaded: LoadedConfig,
    ds: DatasetSpec,
    pair: PairSpec,
    split: SplitSpec | None,
    lines: list[Line],
    data: PairData,
) -> None:
    key = ds.runs_field or "model"
    models = (pair.efficient, pair.capable)
    prices = model_prices(suite, loaded, models)
    if data.pricing == "list":
        prices = {m: p.uncached() for m, p in prices.items()}
    capable: dict[str, list[Line]] = {}
    efficient: list[Line] = []
    for line in lines:
        model = line.fields.get(key)
        if model == pair.capable:
            capable.setdefault(line.task, []).append(line)
        elif model == pair.efficient:
            efficient.append(line)
    if not efficient:
        raise SuiteError(
            f"pair {data.name!r}: {ds.trajectories} has no run whose {key!r} is {pair.efficient!r}; "
            f"models there: {', '.join(sorted({str(x.fields.get(key)) for x in lines}))}"
        )
    cap_values: dict[str, list[tuple[float, list[TurnTokens]]]] = {}
    for task, runs in capable.items():
        got = [(r.resolved(), r.turns()) for r in runs]
        cap_values[task] = [(float(ok), turns) for ok, turns in got if ok is not None]
    per_task: dict[str, list[tuple[Value, Value]]] = {}
    for line in efficient:
        if not _in_split(split, line):
            continue
        ok = line.resolved()
        caps = cap_values.get(line.task)
        if ok is None:
            data.skipped["the run has no outcome field (is_resolved, success, resolved, reward)"] += 1
            continue
        if not caps:
            data.skipped["the capable model has no run (with an outcome) of the task"] += 1
            continue
        eff = line.turns()
        never = (ok, price_turns(eff, [pair.efficient] * len(eff), prices))
        switched = [
            _mean([(pc, switched_cost(eff, turns, k, prices, models)) for pc, turns in caps])
            for k in range(1, len(eff) + 1)
        ]
        data.runs.append(line.traj)
        data.tables[line.traj.id] = RunTable(never, switched)
        per_task.setdefault(line.task, []).append((never, switched[0]))
    for task, values in per_task.items():
        (pe, ce), (pc, cc) = _mean([v[0] for v in values]), _mean([v[1] for v in values])
        data.outcomes[task] = TaskOutcome(task, pe, pc, ce, cc)


def _paired(
    suite: Suite, ds: DatasetSpec, pair: PairSpec, split: SplitSpec | None, lines: list[Line], data: PairData
) -> None:
    outcomes = read_outcomes(suite.path(ds.outcomes), pair.efficient, pair.capable)
    data.stand_in = ds.runs_field is None
    for line in lines:
        if ds.runs_field is not None and line.fields.get(ds.runs_field) != pair.efficient:
            continue
        if not _in_split(split, line):
            continue
        o = outcomes.get(task_of({"task_id": line.traj.task}, line.traj.id))
        if o is None:
            data.skipped["no outcomes for its task in the outcomes file"] += 1
            continue
        n = len(line.traj.assistant_turns())
        never = (o.p_efficient, o.cost_efficient)
        switched = [(o.p_capable, (k - 1) / n * o.cost_efficient + o.cost_capable) for k in range(1, n + 1)]
        data.runs.append(line.traj)
        data.tables[line.traj.id] = RunTable(never, switched)
        data.outcomes[o.task] = o


def task_fields(lines: list[Line]) -> Mapping[str, Mapping[str, Any]]:
    """Task → the fields of its first line (for listing a split's tasks)."""
    out: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        out.setdefault(line.task, line.fields)
    return out


__all__ = [
    "Line",
    "LineCache",
    "PairData",
    "RunTable",
    "Value",
    "build_pair",
    "model_prices",
    "read_lines",
    "task_fields",
]
