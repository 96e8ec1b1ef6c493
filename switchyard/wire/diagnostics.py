"""Diagnostics for lossy conversions: every loss is counted and logged once per kind.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

logger = logging.getLogger("switchyard.wire")

_lock = threading.Lock()
_counts: Counter[str] = Counter()
_reported = 0  # every report, never reset: tells a caller whether a step it ran reported one


def report(kind: str, detail: str) -> None:
    """Records a lossy conversion.

    Args:
        kind: Stable identifier, e.g. ``openai_chat.image_in_tool_result``.
        detail: What was lost, for the log line.
    """
    global _reported
    with _lock:
        _counts[kind] += 1
        _reported += 1
        first = _counts[kind] == 1
    if first:
        logger.warning("lossy conversion (%s): %s — further occurrences are only counted", kind, detail)


def reported() -> int:
    """Reports since start, across kinds and :func:`reset`: unchanged around a step that lost nothing."""
    return _reported


def counts() -> dict[str, int]:
    """Occurrences per diagnostic kind since start (or the last :func:`reset`)."""
    with _lock:
        return dict(_counts)


def reset() -> None:
    """Forgets all counts (tests)."""
    with _lock:
        _counts.clear()
