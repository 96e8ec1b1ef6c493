"""The dashboard's routed-vs-control panel: the numbers of ``switchyard stats --experiment``
over the records in memory and the feedback reports received since start.

Layer: ``server``. The page shows it on its Decisions view, per route with an ``experiment:``
block (docs/rollout.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from switchyard.engine.experiment_log import record_lines
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


def experiment_view(records: Iterable[DecisionRecord], outcomes: Outcomes | None) -> dict[str, Any]:
    """Per route: arms, routed vs control, shadow's predicted saving (``{}``: no experiment)."""
    lines: list[dict[str, Any]] = list(record_lines(records))
    if not lines:
        return {}
    return experiment_stats([*lines, *(outcomes.lines() if outcomes is not None else ())])


__all__ = ["Outcomes", "experiment_view"]
