"""Totals of every replica, through the shared state store (``state.backend: redis``).

Layer: ``server``.

With the dashboard on and a shared store, each replica writes its "since start" figures — the
USD totals (overall and per route) and the reliability counters — under its own key every
``every_s`` seconds, from a background task (never on the request path), and lists itself in
a registry key (an atomic ``update``). The same task reads the registry back and sums the
replicas heard from within three times ``every_s``; the page shows that sum beside the replica's own
figures. Windows, sessions and timelines stay per replica (each has its own record ring). A
replica that stops drops out of the sum once its key is stale, so the fleet total is the sum
over the replicas alive now, each since its own start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from switchyard.protocol.session import StateStore
from switchyard.server.dashboard.views import Replica, TotalsSource

logger = logging.getLogger("switchyard.server")

REGISTRY_KEY = "switchyard:dashboard:replicas"
_SUMMED = (
    "requests",
    "answer_usd",
    "router_usd",
    "feature_usd",
    "experiment_usd",
    "total_usd",
    "always_capable_usd",
    "saved_usd",
)


def _replica_key(replica_id: str) -> str:
    return f"switchyard:dashboard:replica:{replica_id}"


def sum_totals(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Adds :meth:`Totals.to_dict` figures; the capable share is weighted by requests."""
    out: dict[str, Any] = {name: 0 for name in _SUMMED}
    capable = 0.0
    for part in parts:
        for name in _SUMMED:
            out[name] += part.get(name) or 0
        capable += (part.get("capable_share") or 0.0) * (part.get("requests") or 0)
    for name in _SUMMED[1:]:
        out[name] = round(out[name], 9)
    out["capable_share"] = round(capable / out["requests"], 6) if out["requests"] else 0.0
    baseline = out["always_capable_usd"]
    out["saved_share"] = round(out["saved_usd"] / baseline, 6) if baseline > 0 else None
    return out


class Fleet:
    """Publishes this replica's totals and reads everyone's.

    Args:
        store: The shared state store.
        replica: This process.
        totals: Its "since start" figures.
        every_s: Seconds between publications.
    """

    def __init__(self, store: StateStore, replica: Replica, totals: TotalsSource, *, every_s: float = 5.0) -> None:
        self.store = store
        self.replica = replica
        self.totals = totals
        self.every_s = every_s
        self.stale_s = 3 * every_s
        self.latest: dict[str, Any] | None = None
        """The last fleet view read (``None`` before the first)."""
        self._task: asyncio.Task[None] | None = None

    async def publish(self) -> None:
        """Writes this replica's figures and lists it in the registry."""
        now = time.time()
        usd = self.totals.usd()
        snapshot = {
            "replica": self.replica.to_dict(),
            "at": now,
            "total": usd.get("total", {}),
            "routes": usd.get("routes", {}),
            "counters": self.totals.reliability().get("counters", {}),
        }
        await self.store.set(_replica_key(self.replica.id), snapshot, ttl_s=self.stale_s)
        stale = self.stale_s

        def register(value: dict[str, Any] | None) -> dict[str, Any]:
            seen = {k: v for k, v in (value or {}).items() if isinstance(v, int | float) and now - v < stale}
            seen[self.replica.id] = now
            return seen

        await self.store.update(REGISTRY_KEY, register, ttl_s=10 * stale)

    async def read(self) -> dict[str, Any]:
        """The sum over the replicas heard from recently, and who they are."""
        now = time.time()
        registry = await self.store.get(REGISTRY_KEY) or {}
        snapshots = []
        for replica_id, at in sorted(registry.items()):
            if not isinstance(at, int | float) or now - at >= self.stale_s:
                continue
            found = await self.store.get(_replica_key(replica_id))
            if found is not None:
                snapshots.append(found)
        routes: dict[str, list[dict[str, Any]]] = {}
        counters: dict[str, int] = {}
        for snap in snapshots:
            for name, figures in (snap.get("routes") or {}).items():
                routes.setdefault(name, []).append(figures)
            for name, value in (snap.get("counters") or {}).items():
                if isinstance(value, int):
                    counters[name] = counters.get(name, 0) + value
        self.latest = {
            "read_at": now,
            "every_s": self.every_s,
            "replicas": [
                {
                    "id": s["replica"]["id"],
                    "started": s["replica"]["started"],
                    "at": s["at"],
                    "requests": s["total"].get("requests", 0),
                }
                for s in snapshots
            ],
            "total": sum_totals([s.get("total") or {} for s in snapshots]),
            "routes": {name: sum_totals(parts) for name, parts in sorted(routes.items())},
            "counters": counters,
        }
        return self.latest

    async def tick(self) -> None:
        """One publication and one read; a failing store is logged, never raised."""
        try:
            await self.publish()
            await self.read()
        except Exception as exc:  # the dashboard must never take serving down
            logger.warning("dashboard: could not share totals through the state store: %s", exc)

    async def _run(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self.every_s)

    def start(self) -> None:
        """Starts the background task in the running loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="switchyard-dashboard-fleet")

    async def stop(self) -> None:
        """Stops the background task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None


__all__ = ["REGISTRY_KEY", "Fleet", "sum_totals"]
