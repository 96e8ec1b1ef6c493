"""The agent-replay suite file: datasets by model pairs, prices and named task splits.

Layer: ``eval``. See docs/evaluation.md ("The agent suite") for the format; the shipped example is
``examples/eval/agent-suite.yaml``.

A **dataset** is a trajectories file (OpenAI Chat ``messages`` per run, a ``task_id``, an
outcome field) and where the outcomes come from:

- ``outcomes: runs`` — the file holds every model's own runs (``runs_field`` names the line field
  with the model id): the efficient model's runs are replayed, the capable model's run of the same
  task gives the outcome and cost after a switch, and cost is priced turn by turn from the
  messages (``pricing: cache`` or ``list``; :mod:`switchyard.eval.cache_cost`).
- ``outcomes: FILE`` — a paired outcomes file (``switchyard eval`` dataset: per task
  ``models.<model>.score`` and ``cost_usd``); the runs (all lines, or the efficient model's when
  ``runs_field`` is set) only drive the decisions, and cost is the file's (``pricing: outcomes``:
  ``f·C_e + C_c`` after a switch, as ``replay --outcomes`` prices it).

A **split** names a subset of tasks, so that what is tuned and what is scored can be kept apart:
``hash`` (a deterministic bucket of the task id), ``where`` / ``where_not`` (values of a line
field, e.g. AgentDojo's ``suite``). Conditions combine with *and*.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, ValidationError, model_validator

from switchyard._dataclass import dataclass
from switchyard.protocol.targets import Price

DATA_DIR_ENV = "SWITCHYARD_DATA_DIR"
"""Environment variable that overrides a suite's ``data_dir``."""


class SuiteError(ValueError):
    """The suite file is missing or malformed (the message names the file and the YAML path)."""


class NoRuns(SuiteError):
    """A pair has no run to score (none in its split, or every one left out; the message says why)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceSpec(Price):
    """A suite's ``prices:`` entry: the router config's ``price:`` keys, the two list prices
    required (a model priced 0 by omission would make every switch to it look free)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: NonNegativeFloat
    output_per_mtok: NonNegativeFloat


class DatasetSpec(_Model):
    """One dataset of the suite."""

    trajectories: str
    outcomes: str = "runs"
    runs_field: str | None = None
    pricing: Literal["cache", "list", "outcomes"] | None = None
    label: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> DatasetSpec:
        own = self.outcomes == "runs"
        if own and self.runs_field is None:
            raise ValueError("outcomes: runs needs runs_field (the line field naming each run's model)")
        if own and self.pricing == "outcomes":
            raise ValueError("pricing: outcomes needs an outcomes file (outcomes: FILE)")
        if not own and self.pricing in ("cache", "list"):
            raise ValueError(
                f"pricing: {self.pricing} needs every model's own runs (outcomes: runs); "
                "with an outcomes file cost is the file's (pricing: outcomes)"
            )
        return self

    @property
    def own_runs(self) -> bool:
        """Whether the outcomes and costs come from the models' own runs in the file."""
        return self.outcomes == "runs"

    @property
    def price_mode(self) -> str:
        """``cache``, ``list`` or ``outcomes`` (the default follows ``outcomes``)."""
        return self.pricing or ("cache" if self.own_runs else "outcomes")


class PairSpec(_Model):
    """One efficient → capable pair on one dataset."""

    dataset: str
    efficient: str
    capable: str
    name: str | None = None
    pooled: bool = True
    note: str | None = None


class HashSplit(_Model):
    """A deterministic bucket of the task id: ``sha256(salt + ":" + task_id) mod buckets``."""

    buckets: int = Field(ge=2)
    keep: list[int] = Field(min_length=1)
    salt: str = "switchyard"

    @model_validator(mode="after")
    def _in_range(self) -> HashSplit:
        bad = [k for k in self.keep if not 0 <= k < self.buckets]
        if bad:
            raise ValueError(f"keep {bad} outside 0..{self.buckets - 1}")
        return self

    def bucket(self, task: str) -> int:
        """The task's bucket."""
        digest = hashlib.sha256(f"{self.salt}:{task}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.buckets


class SplitSpec(_Model):
    """A named task subset; every condition given must hold."""

    hash: HashSplit | None = None
    where: dict[str, list[str]] = Field(default_factory=dict)
    where_not: dict[str, list[str]] = Field(default_factory=dict)
    note: str | None = None

    def keeps(self, task: str, fields: Mapping[str, Any]) -> bool:
        """Whether the task (with a line's ``fields``) is in the split.

        A ``where`` field the line lacks does not match; a ``where_not`` field it lacks does.
        """
        if self.hash is not None and self.hash.bucket(task) not in self.hash.keep:
            return False
        for key, values in self.where.items():
            if key not in fields or str(fields[key]) not in values:
                return False
        return all(key not in fields or str(fields[key]) not in values for key, values in self.where_not.items())


class SuiteSpec(_Model):
    """The whole suite file."""

    data_dir: str = "."
    datasets: dict[str, DatasetSpec] = Field(min_length=1)
    pairs: list[PairSpec] = Field(min_length=1)
    prices: dict[str, PriceSpec] = Field(default_factory=dict)
    splits: dict[str, SplitSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _links(self) -> SuiteSpec:
        seen: set[str] = set()
        for i, p in enumerate(self.pairs):
            if p.dataset not in self.datasets:
                raise ValueError(
                    f"pairs[{i}].dataset {p.dataset!r} is not a dataset; datasets: {', '.join(self.datasets)}"
                )
            if p.efficient == p.capable:
                raise ValueError(f"pairs[{i}]: efficient and capable are both {p.efficient!r}")
            name = pair_name(p)
            if name in seen:
                raise ValueError(f"pairs[{i}]: a second pair named {name!r}; give each pair its own name")
            seen.add(name)
        return self


def pair_name(p: PairSpec) -> str:
    """The pair's name: its ``name``, else ``<dataset>: <efficient> → <capable>``."""
    return p.name or f"{p.dataset}: {p.efficient} → {p.capable}"


@dataclass(slots=True)
class Suite:
    """A loaded suite file.

    Attributes:
        spec: The validated file.
        source: The file it came from.
        data_dir: Where the datasets' relative paths are resolved.
    """

    spec: SuiteSpec
    source: Path
    data_dir: Path

    def path(self, relative: str) -> Path:
        """A dataset path resolved against :attr:`data_dir`."""
        p = Path(relative)
        return p if p.is_absolute() else self.data_dir / p

    def split(self, name: str | None) -> SplitSpec | None:
        """The split ``name`` (``None``: all tasks).

        Raises:
            SuiteError: No such split (the file's splits are listed).
        """
        if name is None:
            return None
        got = self.spec.splits.get(name)
        if got is None:
            have = ", ".join(self.spec.splits) or "none"
            raise SuiteError(f"--split {name!r}: {self.source} defines no such split; splits: {have}")
        return got

    def pairs(self, names: list[str] | None = None) -> list[PairSpec]:
        """The pairs to score: all, or those named (in the file's order).

        Raises:
            SuiteError: A name that is no pair's.
        """
        if not names:
            return list(self.spec.pairs)
        known = {pair_name(p): p for p in self.spec.pairs}
        missing = [n for n in names if n not in known]
        if missing:
            raise SuiteError(f"--pair {missing[0]!r}: no such pair; pairs: {', '.join(known)}")
        return [p for p in self.spec.pairs if pair_name(p) in names]


def _render(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)


def load_suite(path: str | Path, *, data_dir: str | Path | None = None) -> Suite:
    """Reads and validates a suite file.

    The data folder is ``data_dir`` when given, else ``$SWITCHYARD_DATA_DIR``, else the file's
    ``data_dir`` relative to the file's folder.

    Raises:
        SuiteError: The file is missing, not YAML, or invalid (the YAML path is named).
    """
    p = Path(path)
    if not p.is_file():
        raise SuiteError(f"suite file not found: {p}")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SuiteError(f"{p}: not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{p}: a suite file is a mapping with datasets: and pairs:")
    try:
        spec = SuiteSpec.model_validate(raw)
    except ValidationError as exc:
        raise SuiteError(f"{p}: {_render(exc)}") from None
    if data_dir is not None:
        where = Path(data_dir)
    elif os.environ.get(DATA_DIR_ENV):
        where = Path(os.environ[DATA_DIR_ENV])
    else:
        where = (p.parent / spec.data_dir).resolve()
    return Suite(spec, p, where)


__all__ = [
    "DATA_DIR_ENV",
    "DatasetSpec",
    "HashSplit",
    "NoRuns",
    "PairSpec",
    "PriceSpec",
    "SplitSpec",
    "Suite",
    "SuiteError",
    "SuiteSpec",
    "load_suite",
    "pair_name",
]
