"""The experiment figures of a live router: ``GET /v1/stats`` → ``experiment`` and the dashboard's
routed-vs-control panel, over the records of the routes with an ``experiment:`` block.

Layer: ``engine``. A decision sink and a feedback listener keep the few fields
:func:`~switchyard.engine.experiment_stats.experiment_stats` reads, bounded (the oldest dropped
first); :meth:`ExperimentLog.view` computes the figures when asked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from switchyard.engine.experiment_stats import experiment_stats
from switchyard.engine.records import DecisionRecord
from switchyard.engine.target import Route

_FIELDS = (
    "request_id",
    "route",
    "tenant",
    "session_id",
    "status",
    "selected",
    "cost_usd",
    "feature_cost_usd",
    "experiment_cost_usd",
)
_Kept = tuple[Any, ...]


def _kept(record: DecisionRecord) -> _Kept | None:
    """What :func:`experiment_stats` reads of ``record``, as a tuple (a fifth of a dict's memory);
    ``None`` without an arm."""
    details = record.details
    arm = details.get("arm")
    if arm is None:
        return None
    return (
        record.request_id,
        record.route,
        record.tenant,
        record.session_id,
        record.status,
        record.selected,
        record.cost_usd,
        record.feature_cost_usd,
        record.experiment_cost_usd,
        record.router_cost.cost_usd,
        arm,
        details.get("would_cost_usd"),
        details.get("would_select"),
        details.get("mirror"),
        details.get("decision_only"),
    )


def _line(kept: _Kept) -> dict[str, Any]:
    line = dict(zip(_FIELDS, kept, strict=False))
    router, arm, would_cost, would_select, mirror, decision_only = kept[len(_FIELDS) :]
    line["router_cost"] = {"cost_usd": router}
    shown = {"arm": arm, "would_cost_usd": would_cost, "would_select": would_select}
    if mirror is not None:
        shown["mirror"] = mirror
    if decision_only:
        shown["decision_only"] = True
    line["details"] = shown
    return line


def record_line(record: DecisionRecord) -> dict[str, Any] | None:
    """The fields of ``record`` that :func:`experiment_stats` reads (``None`` without an arm)."""
    kept = _kept(record)
    return None if kept is None else _line(kept)


def record_lines(records: Iterable[DecisionRecord]) -> Iterator[dict[str, Any]]:
    """:func:`record_line` of each record that carries an arm."""
    for record in records:
        line = record_line(record)
        if line is not None:
            yield line


class ExperimentLog:
    """The latest experiment records and feedback reports, as decision-log lines.

    Args:
        size: Most records kept, and most reports (each the oldest dropped first).
    """

    def __init__(self, size: int = 20_000) -> None:
        self._records: deque[_Kept] = deque(maxlen=size)
        self._reports: deque[dict[str, Any]] = deque(maxlen=size)

    def __call__(self, record: DecisionRecord) -> None:
        """Keeps a record that carries an arm (a decision sink)."""
        kept = _kept(record)
        if kept is not None:
            self._records.append(kept)

    def feedback(self, line: dict[str, Any]) -> None:
        """Keeps one report's line (a feedback listener)."""
        self._reports.append(line)

    def view(self) -> dict[str, Any]:
        """Per route, what ``switchyard stats --experiment --json`` prints (``{}``: no records yet)."""
        if not self._records:
            return {}
        return experiment_stats([*map(_line, self._records), *self._reports])


def experiment_log(
    routes: Iterable[Route],
    sinks: list[Callable[[DecisionRecord], None]],
    listeners: list[Callable[[dict[str, Any]], None]],
) -> ExperimentLog | None:
    """An :class:`ExperimentLog`, added to ``sinks`` (decision records) and ``listeners``
    (feedback reports), when a route has an ``experiment:`` block; else ``None`` (nothing kept)."""
    if not any(r.experiment is not None for r in routes):
        return None
    log = ExperimentLog()
    sinks.append(log)
    listeners.append(log.feedback)
    return log


__all__ = ["ExperimentLog", "experiment_log", "record_line", "record_lines"]
