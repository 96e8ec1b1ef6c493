"""Reading back the proxy's decision log (``switchyard serve --decision-log FILE``).

Layer: ``eval``.

Each line is one :class:`~switchyard.engine.records.DecisionRecord` as JSON. Calibration uses
these fields of it:

- ``route`` — to keep only the route being calibrated;
- ``score`` — the router's probability that the capable model is needed (``null`` when the
  router decided without one: such requests keep their ``selected`` target);
- ``selected`` — the target that served the request;
- ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens`` — to
  price each request on either tier for ``--budget-usd`` (the served model's token counts stand
  in for the other model's).

Lines that are not JSON objects, and records with an error ``status``, are counted and skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.protocol.response import Usage


class DecisionLogError(ValueError):
    """The decision log cannot be read (file and line named)."""


@dataclass(slots=True, frozen=True)
class LoggedDecision:
    """The fields of one decision record that calibration uses."""

    line: int
    route: str
    score: float | None
    selected: str | None
    usage: Usage
    cost_usd: float
    status: int


@dataclass(slots=True)
class LogStats:
    """What reading a log skipped."""

    lines: int = 0
    other_routes: int = 0
    failed: int = 0
    unreadable: int = 0


def read_decision_log(
    path: str | Path, route: str | None = None, stats: LogStats | None = None
) -> Iterator[LoggedDecision]:
    """Streams the records of ``route`` (all routes when ``None``) that were served (status < 400).

    Args:
        path: The JSONL file.
        route: Keep only this route's records.
        stats: Filled with counts of skipped lines.

    Raises:
        DecisionLogError: The file cannot be opened, or a record's field has the wrong type.
    """
    stats = stats if stats is not None else LogStats()
    p = Path(path)
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise DecisionLogError(f"cannot read decision log {p}: {exc}") from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            stats.lines += 1
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                stats.unreadable += 1
                continue
            if isinstance(obj, dict) and obj.get("object") == "switchyard.feedback":
                continue  # an outcome report (POST /v1/feedback), not a decision
            if not isinstance(obj, dict) or not isinstance(obj.get("route"), str):
                stats.unreadable += 1
                continue
            if route is not None and obj["route"] != route:
                stats.other_routes += 1
                continue
            record = _record(obj, number, p.name)
            if record.status >= 400:
                stats.failed += 1
                continue
            yield record


def _record(obj: dict[str, Any], number: int, name: str) -> LoggedDecision:
    where = f"{name}:{number}"
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float) or math.isnan(score)):
        raise DecisionLogError(f"{where}: 'score' must be a number or null, got {score!r}")
    selected = obj.get("selected")
    if selected is not None and not isinstance(selected, str):
        raise DecisionLogError(f"{where}: 'selected' must be a string or null, got {selected!r}")
    tokens: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
        value = obj.get(key, 0) or 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DecisionLogError(f"{where}: {key!r} must be a whole number >= 0, got {value!r}")
        tokens[key] = value
    status = obj.get("status", 200)
    cost = obj.get("cost_usd", 0.0) or 0.0
    return LoggedDecision(
        line=number,
        route=obj["route"],
        score=None if score is None else float(score),
        selected=selected,
        usage=Usage(**tokens),
        cost_usd=float(cost) if isinstance(cost, int | float) else 0.0,
        status=status if isinstance(status, int) and not isinstance(status, bool) else 200,
    )
