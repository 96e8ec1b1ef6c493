"""The dashboard's only work on the request path: one append to a bounded ring.

Layer: ``server``.

Every finished :class:`~switchyard.engine.records.DecisionRecord` is appended, numbered, to a
``deque`` of fixed length (the oldest falls out). Nothing is computed, copied or serialised
per request: the views (:mod:`switchyard.server.dashboard.views`) fold the new records in when
a page asks for data, so a dashboard nobody looks at costs one ``deque.append`` per request
(``benchmarks/dashboard_overhead.py`` measures it).
"""

from __future__ import annotations

import itertools
from collections import deque

from switchyard.engine.records import DecisionRecord

Numbered = tuple[int, DecisionRecord]


class RecordRing:
    """The most recent ``size`` decision records, each with its sequence number (from 1).

    A decision sink: ``ring(record)``. Safe to call from several threads (``deque.append`` and
    ``next`` on a counter are single, atomic C calls).

    Args:
        size: How many records to keep.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: deque[Numbered] = deque(maxlen=size)
        self._seq = itertools.count(1)

    def __call__(self, record: DecisionRecord) -> None:
        self._items.append((next(self._seq), record))

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self) -> list[Numbered]:
        """The records now in the ring, oldest first."""
        # ``list(deque)`` runs in C without releasing the GIL; a concurrent append from another
        # thread can still make an iteration fail on builds without one, so it is retried.
        for _ in range(100):
            try:
                return list(self._items)
            except RuntimeError:  # "deque mutated during iteration"
                continue
        return []


__all__ = ["Numbered", "RecordRing"]
