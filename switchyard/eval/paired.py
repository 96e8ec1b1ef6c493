"""Inputs of the agent-replay counterfactual: paired outcomes, tiers, runs; the per-run table.

Layer: ``eval``.

- The **outcomes** file is a ``switchyard eval`` dataset with one line per task: ``task_id`` (or
  ``id``), and per model ``models.<model>.score`` (resolve rate, 0-1; ``correct``/``resolved``
  are read as 1/0) and ``models.<model>.cost_usd`` (mean USD per trial).
- **Runs** come from a replay (one run per trajectory, its ``task_id``) or from a decision log
  (``switchyard serve --decision-log``, or the per-turn file ``switchyard replay --out``
  writes): one run per session id, its records in file order.
- A decision's **tier** is ``capable`` or ``efficient``: the route's two tier targets, a
  ``--tier TARGET=TIER`` flag, or a target whose ``model`` id is one of the two outcome models.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.config.load import LoadedConfig
from switchyard.eval.counterfactual import CAPABLE, EFFICIENT, Report, Run, TaskOutcome
from switchyard.eval.dataset import Dataset, DatasetError, MissingOutcome, json_lines, outcome
from switchyard.eval.evaluate import TierChoice
from switchyard.eval.replay import TurnDecision


class PairedError(ValueError):
    """The counterfactual cannot be set up as asked; the message names the flag or field."""


def task_of(fields: Mapping[str, Any], ident: str) -> str:
    """A line's task: its ``task_id`` when present, else its ``id``."""
    task = fields.get("task_id")
    return ident if task is None else str(task)


def dataset_models(path: str | Path) -> list[str]:
    """The model ids of an outcomes file (union over its lines, in first-seen order)."""
    seen: dict[str, None] = {}
    for item in Dataset(path):
        seen.update(dict.fromkeys(item.models))
    return list(seen)


def read_outcomes(
    path: str | Path, efficient_model: str, capable_model: str, *, models: Sequence[str] | None = None
) -> dict[str, TaskOutcome]:
    """Per task id, the two models' resolve rates and mean costs.

    ``models`` are the file's models when the caller has read them already (``dataset_models``).

    Raises:
        PairedError: A model is in no line of the file (the models it has are listed).
        DatasetError: A line lacks a model's outcome or ``cost_usd``, a rate is outside [0, 1],
            or two lines have the same task (file and line named).
    """
    data = Dataset(path)
    models = dataset_models(path) if models is None else models
    for flag, model in (("--efficient-model", efficient_model), ("--capable-model", capable_model)):
        if model not in models:
            raise PairedError(
                f"{flag} {model!r}: {data.name} has no such model; models in the file: {', '.join(models)}"
            )
    out: dict[str, TaskOutcome] = {}
    for item in data:
        where = f"{data.name}:{item.line}"
        task = task_of(item.fields, item.id)
        if task in out:
            raise DatasetError(f"{where}: task {task!r} appears twice; an outcomes file has one line per task")
        values: list[tuple[float, float]] = []
        for model in (efficient_model, capable_model):
            try:
                got = outcome(item, model, source=data.name)
            except MissingOutcome as exc:
                raise DatasetError(str(exc)) from None
            if not 0.0 <= got.quality <= 1.0:
                raise DatasetError(f"{where}: models.{model}.score must be a resolve rate in [0, 1], got {got.quality}")
            if got.cost_usd is None:
                raise DatasetError(f"{where}: models.{model}.cost_usd (mean USD per trial) is required")
            values.append((got.quality, got.cost_usd))
        (pe, ce), (pc, cc) = values
        out[task] = TaskOutcome(task, pe, pc, ce, cc)
    return out


def outcome_models(
    loaded: LoadedConfig, tiers: TierChoice, available: Sequence[str], efficient: str | None, capable: str | None
) -> tuple[str, str]:
    """The outcome models of the two tiers: the flags, else the tier target's ``model`` id.

    Raises:
        PairedError: A tier's target model is not in the outcomes file and no flag names one.
    """
    picked: list[str] = []
    for flag, given, target in (
        ("--efficient-model", efficient, tiers.efficient),
        ("--capable-model", capable, tiers.capable),
    ):
        if given is not None:
            picked.append(given)
            continue
        model = loaded.config.targets[target].model
        if model not in available:
            raise PairedError(
                f"target {target!r} (model {model!r}) has no outcomes in the outcomes file; name its outcome model "
                f"with {flag} MODEL; models in the file: {', '.join(available)}"
            )
        picked.append(model)
    if picked[0] == picked[1]:
        raise PairedError(f"the efficient and capable outcome models are both {picked[0]!r}")
    return picked[0], picked[1]


@dataclass(slots=True)
class TierMap:
    """Target → tier for one route.

    Attributes:
        capable: The capable target.
        efficient: The efficient target.
        explicit: ``--tier TARGET=TIER`` flags.
        by_model: Target → tier from the target's ``model`` id matching an outcome model.
    """

    capable: str
    efficient: str
    explicit: dict[str, str] = field(default_factory=dict)
    by_model: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        loaded: LoadedConfig,
        tiers: TierChoice,
        explicit: Mapping[str, str],
        models: tuple[str, str],
    ) -> TierMap:
        """From the route's tiers, the flags and the outcome models.

        Raises:
            PairedError: A ``--tier`` flag names an unknown target or tier.
        """
        targets = loaded.config.targets
        for target, tier in explicit.items():
            if target not in targets:
                raise PairedError(f"--tier {target}={tier}: {target!r} is not a target; targets: {', '.join(targets)}")
            if tier not in (CAPABLE, EFFICIENT):
                raise PairedError(f"--tier {target}={tier}: the tier must be 'capable' or 'efficient'")
        efficient_model, capable_model = models
        by_model = {
            name: CAPABLE if t.model == capable_model else EFFICIENT
            for name, t in targets.items()
            if t.model in (efficient_model, capable_model)
        }
        return cls(tiers.capable, tiers.efficient, dict(explicit), by_model)

    def tier(self, target: str) -> str | None:
        """The tier of ``target``; ``None`` when nothing maps it."""
        if target in self.explicit:
            return self.explicit[target]
        if target == self.capable:
            return CAPABLE
        if target == self.efficient:
            return EFFICIENT
        return self.by_model.get(target)

    def require(self, target: str, where: str) -> str:
        """The tier of ``target``.

        Raises:
            PairedError: Nothing maps it (the message names the ``--tier`` flag).
        """
        tier = self.tier(target)
        if tier is None:
            raise PairedError(
                f"{where}: the route picked target {target!r}, which is neither tier's target "
                f"(capable {self.capable!r}, efficient {self.efficient!r}); give --tier {target}=capable "
                f"or --tier {target}=efficient"
            )
        return tier


@dataclass(slots=True)
class Runs:
    """Runs ready to score, and the ones left out.

    Attributes:
        runs: Runs with outcomes and a decision at every point.
        skipped: Reason → number of runs.
        examples: Reason → the first run id it hit.
        router_calls: The router's own model calls over the kept runs.
        router_input_tokens: Their prompt tokens.
        router_output_tokens: Their generated tokens.
    """

    runs: list[Run] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    router_calls: int = 0
    router_input_tokens: int = 0
    router_output_tokens: int = 0

    def skip(self, reason: str, run: str) -> None:
        """Counts one left-out run."""
        self.skipped[reason] += 1
        self.examples.setdefault(reason, run)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no runs)."""
        return {
            "runs": len(self.runs),
            "skipped": sum(self.skipped.values()),
            "skipped_reasons": dict(self.skipped),
            "skipped_examples": self.examples,
            "router_calls": self.router_calls,
            "router_input_tokens": self.router_input_tokens,
            "router_output_tokens": self.router_output_tokens,
        }


@dataclass(slots=True)
class _Step:
    selected: str | None
    source: str
    reason: str
    router_usd: float
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    skipped: str | None = None
    tier: str | None = None


def _tier_of(step: _Step, tiers: TierMap, run_id: str) -> str:
    mapped = tiers.tier(step.selected) if step.selected is not None else None
    if mapped is not None:
        return mapped
    if step.tier is not None:
        return step.tier
    return tiers.require(step.selected or "", f"run {run_id!r}")


def _collect(groups: Iterable[tuple[str, str, list[_Step]]], tiers: TierMap, tasks: Mapping[str, TaskOutcome]) -> Runs:
    out = Runs()
    for run_id, task, steps in groups:
        if task not in tasks:
            out.skip("no outcomes for its task in the outcomes file", run_id)
            continue
        bad = next((s.skipped for s in steps if s.skipped is not None), None)
        if bad is not None:
            out.skip(f"a decision was skipped: {bad}", run_id)
            continue
        # The tier map (route tiers and flags) first; a logged record's own ``tier`` covers
        # targets the map does not know.
        picked = [_tier_of(s, tiers, run_id) for s in steps]
        out.runs.append(
            Run(
                run_id,
                task,
                tuple(picked),
                tuple(s.source for s in steps),
                tuple(s.reason for s in steps),
                math.fsum(s.router_usd for s in steps),
            )
        )
        out.router_calls += sum(s.calls for s in steps)
        out.router_input_tokens += sum(s.tokens_in for s in steps)
        out.router_output_tokens += sum(s.tokens_out for s in steps)
    return out


def runs_from_turns(turns: Iterable[TurnDecision], tiers: TierMap, tasks: Mapping[str, TaskOutcome]) -> Runs:
    """Runs from a replay's turns (grouped by trajectory, in turn order).

    A run is left out (and counted) when its task has no outcomes or any of its decisions was
    skipped (a judge that could not be reached: the route's choice is unknown there).

    Raises:
        PairedError: A decision picked a target without a tier.
    """
    groups: dict[str, tuple[str, list[_Step]]] = {}
    for t in turns:
        d = t.decided
        step = _Step(
            d.selected,
            d.source,
            d.reason,
            d.router_cost_usd,
            d.router_calls,
            d.router_input_tokens,
            d.router_output_tokens,
            d.skipped,
        )
        groups.setdefault(t.trajectory, (t.task or t.trajectory, []))[1].append(step)
    return _collect(((k, task, steps) for k, (task, steps) in groups.items()), tiers, tasks)


def read_session_tasks(path: str | Path) -> dict[str, str]:
    """``session_id`` → ``task_id`` from a JSONL file (one object per line).

    Raises:
        PairedError: The file is missing or a line lacks either field.
    """
    p = Path(path)
    if not p.is_file():
        raise PairedError(f"--sessions: file not found: {p}")
    out: dict[str, str] = {}
    for where, _, obj in json_lines(p, PairedError):
        if not isinstance(obj, dict) or not isinstance(obj.get("session_id"), str) or obj.get("task_id") is None:
            raise PairedError(f"{where}: each line needs a string 'session_id' and a 'task_id'")
        out[obj["session_id"]] = str(obj["task_id"])
    return out


def _router_cost(obj: Mapping[str, Any], where: str) -> tuple[float, int, int, int]:
    """``(usd, calls, input tokens, output tokens)`` from a decision record or a replay line."""
    rc = obj.get("router_cost")
    if isinstance(rc, Mapping):
        values = (rc.get("cost_usd", 0.0), rc.get("calls", 0), rc.get("input_tokens", 0), rc.get("output_tokens", 0))
    else:
        values = (
            obj.get("router_cost_usd", 0.0),
            obj.get("router_calls", 0),
            obj.get("router_input_tokens", 0),
            obj.get("router_output_tokens", 0),
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise DatasetError(f"{where}: the router cost fields must be numbers >= 0, got {v!r}")
    return float(values[0]), int(values[1]), int(values[2]), int(values[3])


def runs_from_log(
    path: str | Path,
    route: str,
    tiers: TierMap,
    tasks: Mapping[str, TaskOutcome],
    *,
    session_tasks: Mapping[str, str] | None = None,
    session_pattern: str | None = None,
) -> Runs:
    """Runs from a decision log: one per session id, its records of ``route`` in file order.

    Reads the records ``switchyard serve --decision-log`` writes (``session_id``, ``route``,
    ``selected``, ``tier``, ``source``, ``reason``, ``router_cost``, ``status``) and the lines
    ``switchyard replay --out`` writes (``session_id``, ``selected``, ``skipped``,
    ``router_cost_usd``, ``task_id``). A session's task: ``session_tasks`` (``--sessions``),
    else the first group of ``session_pattern`` (``--session-task``), else the line's ``task_id``,
    else the session id itself. Records with an error status are not decisions that served a
    turn and are left out; records without a session id cannot form runs and are counted. A
    session is keyed by tenant and id (the run is ``<tenant>/<session>`` with inbound keys);
    feedback lines are not decisions and are passed over.

    Raises:
        DatasetError: The file is missing, or a line is not a JSON object with the fields.
        PairedError: A decision picked a target without a tier; a bad ``session_pattern``.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"decision log not found: {p}")
    try:
        pattern = re.compile(session_pattern) if session_pattern else None
    except re.error as exc:
        raise PairedError(f"--session-task {session_pattern!r}: not a regular expression ({exc})") from None
    groups: dict[str, tuple[str, list[_Step]]] = {}
    out_of_session = 0
    for where, _, obj in json_lines(p):
        if not isinstance(obj, dict):
            raise DatasetError(f"{where}: each line must be a JSON object")
        if obj.get("object") == "switchyard.feedback":
            continue  # an outcome report (POST /v1/feedback), joined by score_log, not a decision
        if obj.get("route", route) != route:
            continue
        status = obj.get("status", 200)
        if isinstance(status, int) and status >= 400:
            continue
        session = obj.get("session_id")
        if not isinstance(session, str) or not session:
            out_of_session += 1
            continue
        selected = obj.get("selected")
        tier = obj.get("tier")
        if selected is not None and not isinstance(selected, str):
            raise DatasetError(f"{where}: 'selected' must be a string or null, got {selected!r}")
        if tier not in (None, CAPABLE, EFFICIENT):
            raise DatasetError(f"{where}: 'tier' must be 'capable', 'efficient' or null, got {tier!r}")
        skipped = obj.get("skipped") if isinstance(obj.get("skipped"), str) else None
        if selected is None and skipped is None:
            skipped = "the router chose no target"
        usd, calls, tin, tout = _router_cost(obj, where)
        step = _Step(
            selected, str(obj.get("source", "")), str(obj.get("reason", "")), usd, calls, tin, tout, skipped, tier
        )
        tenant = obj.get("tenant")
        key = f"{tenant}/{session}" if isinstance(tenant, str) else session  # ids are unique per tenant
        if key not in groups:
            groups[key] = (_session_task(session, obj, session_tasks, pattern), [])
        groups[key][1].append(step)
    runs = _collect(((k, task, steps) for k, (task, steps) in groups.items()), tiers, tasks)
    if out_of_session:
        runs.skipped["records without a session id (not part of any run)"] += out_of_session
    return runs


def _session_task(
    session: str, obj: Mapping[str, Any], mapping: Mapping[str, str] | None, pattern: re.Pattern[str] | None
) -> str:
    if mapping is not None and session in mapping:
        return mapping[session]
    if pattern is not None:
        m = pattern.search(session)
        if m is not None:
            return m.group(1) if m.groups() else m.group(0)
    task = obj.get("task_id")
    return session if task is None else str(task)


RUN_COLUMNS = (
    "run",
    "task",
    "n_turns",
    "first_switch_turn",
    "f",
    "switch_source",
    "switch_reason",
    "capable_calls",
    "router_cost_usd",
    "weight",
)


def write_runs(report: Report, path: str | Path) -> Path:
    """Writes the per-run table: CSV, or JSONL when the name ends in ``.jsonl``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in report.per_run]
    if out.suffix == ".jsonl":
        out.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        return out
    extra = [k for k in (rows[0] if rows else {}) if k not in RUN_COLUMNS]
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=[*RUN_COLUMNS, *extra])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" if v is None else v for k, v in r.items()})
    return out
