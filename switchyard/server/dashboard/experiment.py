"""The dashboard's routed-vs-control panel: the numbers of ``switchyard stats --experiment``
over the records in memory and the feedback reports received since start.

Layer: ``server``. The page shows it on its Decisions view, per route with an ``experiment:``
block (docs/rollout.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from switchyard.engine.experiment_stats import experiment_stats
from switchyard.engine.records import DecisionRecord


class Outcomes:
    """The latest feedback reports (their decision-log lines), bounded: a feedback listener.

    Args:
        size: Most reports kept (the oldest are dropped first).
    """

    def __init__(self, size: int) -> None:
        self._lines: deque[dict[str, Any]] = deque(maxlen=size)

    def __call__(self, line: dict[str, Any]) -> None:
        """Keeps one report's line (called by the feedback store after each report)."""
        self._lines.append(line)

    def lines(self) -> list[dict[str, Any]]:
        """The reports kept, oldest first."""
        return list(self._lines)


def _lines(records: Iterable[DecisionRecord]) -> Iterator[dict[str, Any]]:
    """The fields :func:`experiment_stats` reads, for the records that carry an arm."""
    for record in records:
        details = record.details
        arm = details.get("arm")
        if arm is None:
            continue
        yield {
            "request_id": record.request_id,
            "route": record.route,
            "tenant": record.tenant,
            "session_id": record.session_id,
            "status": record.status,
            "cost_usd": record.cost_usd,
            "feature_cost_usd": record.feature_cost_usd,
            "router_cost": {"cost_usd": record.router_cost.cost_usd},
            "details": {"arm": arm, "would_cost_usd": details.get("would_cost_usd")},
        }


def experiment_view(records: Iterable[DecisionRecord], outcomes: Outcomes | None) -> dict[str, Any]:
    """Per route: arms, routed vs control, shadow's predicted saving (``{}``: no experiment)."""
    lines: list[dict[str, Any]] = list(_lines(records))
    if not lines:
        return {}
    return experiment_stats([*lines, *(outcomes.lines() if outcomes is not None else ())])


__all__ = ["Outcomes", "experiment_view"]
