"""The offline evaluation dataset: one JSON object per line, read as a stream.

Layer: ``eval`` — above ``api``/``config``, below ``cli``.

Each line is one request a router would have seen plus the recorded outcome of every model that
answered it::

    {"id": "q-17",
     "prompt": "What is 17 * 23?",                      # or "messages": [OpenAI chat messages]
     "models": {
        "gpt-4-1106-preview": {"correct": true, "cost_usd": 0.0031},
        "mixtral-8x7b":       {"correct": false, "input_tokens": 41, "output_tokens": 180}}}

Per model, the outcome is ``correct`` (bool; ``resolved`` is accepted as a synonym) or ``score``
(a number, higher is better), with optional ``cost_usd`` or ``input_tokens``/``output_tokens``
(priced with the target's ``price`` when ``cost_usd`` is absent). Any other top-level field is
kept for ``--where`` filters (e.g. ``benchmark``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import orjson

from switchyard._dataclass import dataclass

OUTCOME_KEYS = ("correct", "resolved", "score")
"""Keys that carry a model's outcome, in the order they are looked for."""


class DatasetError(ValueError):
    """The dataset cannot be used; the message names the file, the line and what to do."""


def json_lines(path: Path, error: type[ValueError] = DatasetError) -> Iterator[tuple[str, int, Any]]:
    """Streams the JSON values of a JSON-lines file, one a line, blank lines skipped.

    The one reader of the eval inputs (datasets, trajectories, decision logs, session maps), so
    that each names a bad line the same way.

    Args:
        path: The file (opened on the first ``next``).
        error: Raised for a line that is not JSON (each input has its own error class).

    Yields:
        ``(where, number, value)``: ``where`` is ``name:line`` for messages, ``number`` the
        1-based line.

    Raises:
        error: ``name:line: not valid JSON (why)``.
    """
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise error(f"{where}: not valid JSON ({exc})") from None
            yield where, number, value


class MissingOutcome(DatasetError):
    """One item has no recorded outcome for a mapped model (real logs have gaps).

    ``switchyard eval`` skips such items and counts them with this reason, unless ``--strict``.

    Attributes:
        reason: A short reason shared by every item with the same gap (for counting).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(slots=True, frozen=True)
class Outcome:
    """What one model achieved on one item.

    Attributes:
        quality: 1.0/0.0 for ``correct``, or the recorded ``score``.
        kind: ``"binary"`` (from ``correct``/``resolved``) or ``"score"``.
        cost_usd: Recorded cost, when the dataset has one.
        input_tokens: Recorded prompt tokens, when known.
        output_tokens: Recorded generated tokens, when known.
    """

    quality: float
    kind: str = "binary"
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class EvalItem:
    """One dataset line.

    Attributes:
        id: The item's ``id``.
        line: 1-based line number in the file.
        messages: The conversation a router sees (OpenAI Chat messages); ``None`` when the line
            has neither ``prompt`` nor ``messages``.
        models: The raw per-model outcome objects.
        fields: Every other top-level field (for filters and reports).
    """

    id: str
    line: int
    messages: list[dict[str, Any]] | None
    models: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Filter:
    """Keeps items whose field ``key`` (dotted for nested objects) equals one of ``values``.

    Values compare as text: JSON ``true``/``false``/``null`` as those words, numbers as written
    by Python (``3``, ``0.5``).
    """

    key: str
    values: frozenset[str]

    def accepts(self, item: EvalItem) -> bool:
        """Whether ``item`` passes."""
        if self.key == "id":
            return item.id in self.values
        if self.key.startswith("models."):
            found, value = _model_field(item.models, self.key[len("models.") :])
            return found and as_text(value) in self.values
        found, value = walk(item.fields, self.key.split("."))
        return found and as_text(value) in self.values


def walk(value: Any, parts: Sequence[str]) -> tuple[bool, Any]:
    """Follows ``parts`` (a dotted field path, split) through nested mappings: ``(found, value)``."""
    for part in parts:
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _model_field(models: Mapping[str, Any], rest: str) -> tuple[bool, Any]:
    """``models.<model>.<field>``: model ids often hold dots (``gpt-4.1``), so the longest
    model id that prefixes ``rest`` wins before the remaining dotted path is walked."""
    best = ""
    for name in models:
        if (rest == name or rest.startswith(name + ".")) and len(name) > len(best):
            best = name
    if not best:
        return False, None
    tail = rest[len(best) + 1 :]
    return walk(models[best], tail.split(".") if tail else [])


def as_text(value: Any) -> str:
    """A JSON scalar as the text ``--where`` compares against."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_filters(specs: Iterable[str]) -> list[Filter]:
    """``["benchmark=mmlu", "benchmark=gsm8k", "split=test"]`` → one filter per key (same key: OR).

    Raises:
        ValueError: A spec is not ``KEY=VALUE``.
    """
    grouped: dict[str, set[str]] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--where takes KEY=VALUE, got {spec!r}")
        grouped.setdefault(key.strip(), set()).add(value.strip())
    return [Filter(k, frozenset(v)) for k, v in grouped.items()]


def read_ids(path: str | Path) -> frozenset[str]:
    """Ids listed one per line (blank lines and ``#`` comments ignored)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read id list {path}: {exc}") from None
    return frozenset(s for raw in text.splitlines() if (s := raw.strip()) and not s.startswith("#"))


def outcome(item: EvalItem, model: str, *, source: str = "", target: str | None = None) -> Outcome:
    """The outcome of ``model`` on ``item``.

    Args:
        item: A dataset item.
        model: The dataset's model id.
        source: The file name, for messages.
        target: The config target mapped to ``model``, for messages.

    Raises:
        MissingOutcome: The item has no outcome for ``model`` (model absent, or no outcome
            key); the message lists the models the item does have.
        DatasetError: The outcome is malformed.
    """
    where = f"{source}:{item.line}" if source else f"line {item.line}"
    raw = item.models.get(model)
    if raw is None:
        mapped = f" (mapped from target {target!r})" if target else ""
        have = ", ".join(item.models) or "none"
        raise MissingOutcome(
            f"{where}: item {item.id!r} has no outcome for model {model!r}{mapped}; "
            f"models in this item: {have}. Map targets to dataset models with --map TARGET=MODEL.",
            f"no outcome for model {model!r}: not in the item",
        )
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where}: models.{model} must be an object, got {type(raw).__name__}")
    quality: float | None = None
    kind = "binary"
    for key in OUTCOME_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if key == "score":
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise DatasetError(f"{where}: models.{model}.score must be a finite number, got {value!r}")
        elif not isinstance(value, bool):
            raise DatasetError(f"{where}: models.{model}.{key} must be true or false, got {value!r}")
        quality = float(value)
        kind = "score" if key == "score" else "binary"
        break
    if quality is None:
        raise MissingOutcome(
            f"{where}: models.{model} has no outcome: give 'correct' (true/false) or 'score' (a number)",
            f"no outcome for model {model!r}: no correct/resolved/score value",
        )
    cost = raw.get("cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0):
        raise DatasetError(f"{where}: models.{model}.cost_usd must be a number >= 0 or null, got {cost!r}")
    return Outcome(
        quality=quality,
        kind=kind,
        cost_usd=None if cost is None else float(cost),
        input_tokens=_tokens(raw, "input_tokens", where, model),
        output_tokens=_tokens(raw, "output_tokens", where, model),
    )


def _tokens(raw: Mapping[str, Any], key: str, where: str, model: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DatasetError(f"{where}: models.{model}.{key} must be a whole number >= 0, got {value!r}")
    return value


class Dataset:
    """A JSONL dataset read lazily, line by line (the file is never held in memory).

    Args:
        path: The ``.jsonl`` file.
        filters: Keep only items every filter accepts.
        ids: Keep only these ids.
        limit: Stop after this many kept items.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        filters: Sequence[Filter] = (),
        ids: frozenset[str] | None = None,
        limit: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.filters = list(filters)
        self.ids = ids
        self.limit = limit
        if not self.path.is_file():
            raise DatasetError(f"dataset not found: {self.path}")

    @property
    def name(self) -> str:
        """The file name, for messages."""
        return self.path.name

    def __iter__(self) -> Iterator[EvalItem]:
        # islice stops before reading the line after the last kept item.
        return itertools.islice(self._kept(), None if self.limit is None else max(self.limit, 0))

    def _kept(self) -> Iterator[EvalItem]:
        seen: set[str] = set()
        for where, number, obj in json_lines(self.path):
            item = _item(obj, where, number)
            if item.id in seen:
                raise DatasetError(f"{where}: duplicate id {item.id!r}")
            seen.add(item.id)
            if self.ids is not None and item.id not in self.ids:
                continue
            if not all(f.accepts(item) for f in self.filters):
                continue
            yield item

    def count(self) -> int:
        """Items this dataset yields (one pass over the file; for progress bars)."""
        if not self.filters and self.ids is None:
            with self.path.open("rb") as fh:
                lines = sum(1 for raw in fh if raw.strip())
            return lines if self.limit is None else min(lines, self.limit)
        return sum(1 for _ in self)

    def first(self) -> EvalItem:
        """The first item (to resolve model mappings before a run).

        Raises:
            DatasetError: The dataset (after filters) is empty.
        """
        for item in self:
            return item
        detail = " after --where/--ids filters" if self.filters or self.ids is not None else ""
        raise DatasetError(f"{self.name}: no items{detail}")

    def first_with_models(self, scan: int = 2000) -> EvalItem:
        """The first item, carrying the union of the model ids of the first ``scan`` items.

        Mapping checks read the dataset's models from it: with gaps in the logs the very first
        item may lack a model that the rest of the file has.

        Raises:
            DatasetError: The dataset (after filters) is empty.
        """
        first: EvalItem | None = None
        models: dict[str, Any] = {}
        for n, item in enumerate(self):
            if first is None:
                first = item
            for name, raw in item.models.items():
                models.setdefault(name, raw)
            if n + 1 >= scan:
                break
        if first is None:
            return self.first()  # raises the "no items" error
        return EvalItem(first.id, first.line, first.messages, models, first.fields)


def _item(obj: Any, where: str, number: int) -> EvalItem:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: each line must be a JSON object, got {type(obj).__name__}")
    ident = obj.get("id")
    if not isinstance(ident, str | int) or isinstance(ident, bool) or ident == "":
        raise DatasetError(f"{where}: 'id' (a non-empty string) is required")
    models = obj.get("models", {})
    if not isinstance(models, dict):
        raise DatasetError(f"{where}: 'models' must be an object mapping model id -> outcome")
    return EvalItem(
        id=str(ident),
        line=number,
        messages=_messages(obj, where),
        models=models,
        fields={k: v for k, v in obj.items() if k not in ("id", "prompt", "messages", "models")},
    )


def _messages(obj: Mapping[str, Any], where: str) -> list[dict[str, Any]] | None:
    messages = obj.get("messages")
    if messages is not None:
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise DatasetError(f"{where}: 'messages' must be a non-empty list of chat message objects")
        return messages
    prompt = obj.get("prompt")
    if prompt is None:
        return None
    if not isinstance(prompt, str):
        raise DatasetError(f"{where}: 'prompt' must be a string, got {type(prompt).__name__}")
    return [{"role": "user", "content": prompt}]
