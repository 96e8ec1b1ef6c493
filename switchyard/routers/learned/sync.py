"""One controlled threshold for every replica of a route: batched writes to the shared store.

Layer: ``routers`` — imports ``protocol`` only.

Each replica decides with its own :class:`~switchyard.routers.learned.control.ThresholdController`
and books its decisions locally. Every ``sync_every`` decisions (or ``sync_s`` seconds, checked
on the next decision) it appends the decisions booked since its last write to the route's shared
window in the state store — one ``update`` (a Redis transaction) for the whole batch, never one
per request — and reads the merged window back: both replicas then compute the threshold from
the same recent scores. The shared value holds the newest ``max(window, feedback_window)``
decisions of all replicas in time order, plus the count of decisions ever merged.

A store that fails (Redis down) costs nothing but the sharing: the controller keeps working on
this replica's own decisions, and the unsent batch (bounded) is written on the next success.
"""

from __future__ import annotations

import logging
from typing import Any

from switchyard.protocol.session import StateStore
from switchyard.routers.learned.control import Observation, ThresholdController

logger = logging.getLogger("switchyard.routers.learned")

KEY = "~threshold-control"
"""The key of the shared window inside the route's namespace (no session id starts with ``~``)."""

TTL_S = 7 * 24 * 3600.0
"""Idle lifetime of the shared window: a route idle for a week starts again from its warm start."""


def merged(current: dict[str, Any] | None, batch: list[list[float]], keep: int, threshold: float) -> dict[str, Any]:
    """The shared value after appending ``batch`` (pure: the store may call it twice)."""
    rows = [*(current or {}).get("obs", []), *batch]
    rows.sort(key=lambda r: r[0])
    seen = int((current or {}).get("seen", 0)) + len(batch)
    return {"obs": rows[-keep:], "seen": seen, "threshold": round(threshold, 6)}


class SharedControl:
    """A controller plus its batched link to the shared store.

    Args:
        controller: This replica's controller.
    """

    def __init__(self, controller: ThresholdController) -> None:
        self.controller = controller
        self._pending: list[Observation] = []
        self._last_sync: float | None = None
        self.syncs = 0
        self.sync_failures = 0
        self._syncing = False  # one write in flight: concurrent decisions must not send a batch twice

    def book(self, obs: Observation) -> None:
        """Books one decision locally (and for the next write)."""
        self.controller.observe(obs)
        self._pending.append(obs)
        if len(self._pending) > self.controller.keep:  # a long outage: only the newest matter
            del self._pending[: len(self._pending) - self.controller.keep]

    def due(self, now: float) -> bool:
        """Whether the next write is due (``sync_every`` decisions or ``sync_s`` seconds)."""
        spec = self.controller.spec
        if not self._pending or self._syncing:
            return False
        if len(self._pending) >= spec.sync_every:
            return True
        if self._last_sync is None:
            self._last_sync = now
            return False
        return now - self._last_sync >= spec.sync_s

    async def sync(self, store: StateStore, now: float) -> bool:
        """Writes the pending batch and adopts the merged window; ``False`` when the store failed."""
        batch = [o.to_list() for o in self._pending]
        keep = self.controller.keep
        threshold = self.controller.threshold()
        self._syncing = True
        try:
            value = await store.update(KEY, lambda cur: merged(cur, batch, keep, threshold), ttl_s=TTL_S)
        except Exception as exc:  # sharing is an optimisation: never fail a request over it
            self.sync_failures += 1
            logger.warning("threshold control: shared store unavailable, deciding locally: %s", exc)
            self._last_sync = now
            return False
        finally:
            self._syncing = False
        del self._pending[: len(batch)]
        self._last_sync = now
        self.syncs += 1
        if value:
            rows = [Observation.from_list(r) for r in value.get("obs", [])]
            if rows:
                self.controller.merge(rows, seen=int(value.get("seen", 0)))
        return True

    def state(self) -> dict[str, Any]:
        """The controller's state plus the sharing counters."""
        return {
            **self.controller.state(),
            "pending": len(self._pending),
            "syncs": self.syncs,
            "sync_failures": self.sync_failures,
        }
