"""Training rows from an evaluation dataset: task text plus per-target outcomes.

Layer: ``probe`` — reads datasets with :mod:`switchyard.eval.dataset` (same format as
``switchyard eval``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.dataset import Dataset, DatasetError, EvalItem, Filter, outcome
from switchyard.eval.good_enough import GoodEnough
from switchyard.protocol.errors import SwitchyardError
from switchyard.routers.learned.views import TextView, view_text
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat


@dataclass(slots=True)
class Rows:
    """Dataset rows as arrays.

    Attributes:
        ids: Item ids.
        texts: Task text per item (its first user message, as the router reads it).
        fields: Other top-level fields per item (``benchmark`` …).
        quality: Per target, outcome per item (``NaN`` when the item lacks that model).
        binary: Per target, whether every known outcome is 0/1.
        scored: Per target, per item: whether the outcome is a graded ``score`` (not
            ``correct``), which :meth:`good` cuts at its outcome type's bar.
    """

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    quality: dict[str, Any] = field(default_factory=dict)
    binary: dict[str, bool] = field(default_factory=dict)
    scored: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: Sequence[int]) -> Rows:
        """The rows at ``index``."""
        import numpy as np

        idx = np.asarray(index, dtype=np.int64)
        quality = {t: q[idx] for t, q in self.quality.items()}
        return Rows(
            [self.ids[i] for i in idx],
            [self.texts[i] for i in idx],
            [self.fields[i] for i in idx],
            quality,
            {t: bool(np.all(np.isnan(q) | (q == 0) | (q == 1))) for t, q in quality.items()},
            {t: q[idx] for t, q in self.scored.items()},
        )

    def concat(self, other: Rows) -> Rows:
        """These rows followed by ``other``'s (same targets)."""
        import numpy as np

        return Rows(
            self.ids + other.ids,
            self.texts + other.texts,
            self.fields + other.fields,
            {t: np.concatenate([q, other.quality[t]]) for t, q in self.quality.items()},
            {t: self.binary[t] and other.binary[t] for t in self.binary},
            {t: np.concatenate([q, other.scored[t]]) for t, q in self.scored.items()},
        )

    def good(self, targets: Sequence[str], rule: GoodEnough) -> Any:
        """``[n, len(targets)]`` good-enough labels (``NaN`` unknown): ``correct`` outcomes as
        they are, graded ones cut at their row's ``outcome_type`` bar
        (:mod:`switchyard.eval.good_enough`).

        Raises:
            GoodEnoughError: A graded outcome whose type has no bar.
        """
        import numpy as np

        out = np.full((len(self.ids), len(targets)), np.nan, dtype=np.float32)
        for j, t in enumerate(targets):
            q, scored = self.quality[t], self.scored[t]
            for i in range(len(self.ids)):
                kind = self.fields[i].get("outcome_type")
                out[i, j] = rule.label(float(q[i]), binary=not bool(scored[i]), outcome_type=kind)
        return out

    def sources(self) -> list[str]:
        """Per row, its source for per-source weights: the ``benchmark`` field, else ``-``."""
        return [str(f.get("benchmark", "-")) for f in self.fields]

    def labels(self, targets: Sequence[str]) -> Any:
        """``[n, len(targets)]`` outcomes (``NaN`` unknown)."""
        import numpy as np

        return np.stack([self.quality[t] for t in targets], axis=1).astype(np.float32)


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Text of the first user message (string content or text parts)."""
    for msg in messages:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
            )
        return ""
    return ""


def row_text(messages: Sequence[Mapping[str, Any]], view: TextView, turns: int = 6) -> str:
    """What a learned route with ``input: view`` reads from a dataset row's messages.

    The row is decoded as an OpenAI Chat request and passed through the serving code's own
    view (:func:`switchyard.routers.learned.views.view_text`), so training reads what the
    router reads. A row that does not decode falls back to its first user message.
    """
    if view == "first_user":
        return first_user_text(messages)
    try:
        request = get_codec(WireFormat.OPENAI_CHAT).decode_request({"model": "-", "messages": list(messages)})
    except SwitchyardError:
        return first_user_text(messages)
    return view_text(request, view, turns)


def read_rows(
    path: str | Path,
    mapping: Mapping[str, str | Sequence[str]],
    *,
    filters: Sequence[Filter] = (),
    ids: frozenset[str] | None = None,
    view: TextView = "conversation",
    turns: int = 6,
    seen: Callable[[EvalItem, bool], None] | None = None,
) -> tuple[Rows, int]:
    """Reads the items ``filters`` and ``ids`` keep.

    Args:
        path: The JSONL dataset.
        mapping: Target name → the dataset's model id, or several ids (datasets mixed into one
            training set name their models differently): the first one an item holds is read.
        filters: Keep items every filter accepts.
        ids: Keep only these ids.
        view: Which text of each row is read (the route's ``input``).
        turns: Messages kept by the ``conversation`` view.
        seen: Called with each item kept, in file order, and whether it became a row (``False``:
            skipped), so that a caller can select from one read what it would read several times.

    Returns:
        ``(rows, skipped)``: items without a user text are skipped and counted.

    Raises:
        DatasetError: A malformed line or outcome.
    """
    import numpy as np

    rows = Rows()
    values: dict[str, list[float]] = {t: [] for t in mapping}
    scored: dict[str, list[bool]] = {t: [] for t in mapping}
    models = {t: (m,) if isinstance(m, str) else tuple(m) for t, m in mapping.items()}
    skipped = 0
    source = Path(path).name
    item: EvalItem
    for item in Dataset(path, filters=filters, ids=ids):
        text = row_text(item.messages or [], view, turns) if item.messages else ""
        has_text = bool(text.strip())
        if seen is not None:
            seen(item, has_text)
        if not has_text:
            skipped += 1
            continue
        for target, names in models.items():
            model = next((m for m in names if m in item.models), None)
            if model is not None:
                got = outcome(item, model, source=source, target=target)
                values[target].append(got.quality)
                scored[target].append(got.kind == "score")
            else:
                values[target].append(float("nan"))
                scored[target].append(False)
        rows.ids.append(item.id)
        rows.texts.append(text)
        rows.fields.append(item.fields)
    for target, vals in values.items():
        q = np.asarray(vals, dtype=np.float64)
        rows.quality[target] = q
        rows.binary[target] = bool(np.all(np.isnan(q) | (q == 0) | (q == 1)))
        rows.scored[target] = np.asarray(scored[target], dtype=bool)
    return rows, skipped


__all__ = ["DatasetError", "Rows", "first_user_text", "read_rows"]
