"""Backend health: probing upstream health endpoints, holding failed backends out of routing,
and the report served by ``GET /health``.

Layer: ``engine`` — the HTTP probe itself is the backend's (``probe_health``, see
:mod:`switchyard.clients.health`); this module decides when to probe and keeps the results in
the shared :class:`~switchyard.engine.health.Health`.

When backends are probed:

* on ``GET /health?deep=1`` — every probe-able ``llm_clients`` entry at once, concurrently, each
  bounded by its ``health_check.timeout_s`` (1 s by default);
* in the background every ``health_check.interval_s`` for clients that set it (the first probe
  runs as soon as the router serves);
* a backend found down is probed again after its hold: ``interval_s`` when set, else its
  circuit breaker's ``cooldown_s``.

Plain ``GET /health`` never probes: it reports the cached states, so liveness checks stay fast.

A ``down`` probe holds the client's targets out of routing: the fallback runner skips them
(``skipped: [{target, reason: "unhealthy"}]`` in the decision record) until a later probe says
the backend is up. The hold also expires by itself shortly after the next probe was due
(``interval`` or ``cooldown`` + ``timeout_s`` + 1 s), so a prober that stopped running can never
keep a backend out for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from switchyard._dataclass import dataclass
from switchyard.clients.health import Probe
from switchyard.engine.health import Health, HealthCheckPolicy

if TYPE_CHECKING:
    from switchyard.engine.target import Target

logger = logging.getLogger("switchyard.health")

_MIN_SLEEP_S = 0.05
_HOLD_SLACK_S = 1.0


@runtime_checkable
class HealthSource(Protocol):
    """A backend that can probe its upstream's health endpoint."""

    async def probe_health(self, path: str | None, timeout_s: float) -> Probe:
        """One bounded probe (see :mod:`switchyard.clients.health`)."""
        ...


@dataclass(slots=True)
class _Client:
    name: str
    backend: object
    policy: HealthCheckPolicy
    cooldown_s: float
    targets: list[str] = field(default_factory=list)

    @property
    def probeable(self) -> bool:
        return self.policy.enabled and isinstance(self.backend, HealthSource)

    @property
    def period_s(self) -> float:
        """How long after a probe the next one is due while the backend is down."""
        return self.policy.interval_s or self.cooldown_s

    @property
    def hold_s(self) -> float:
        return self.period_s + self.policy.timeout_s + _HOLD_SLACK_S


class BackendMonitor:
    """Probes the upstreams of an engine's targets, grouped by ``llm_clients`` entry.

    Args:
        targets: The engine's targets.
        health: Shared health state (probe results and holds are kept there).
        clock: Monotonic clock.
    """

    def __init__(
        self, targets: Mapping[str, Target], health: Health, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.health = health
        self._clock = clock
        self._clients: dict[str, _Client] = {}
        for name, target in targets.items():
            key = target.info.client or name
            found = self._clients.get(key)
            if found is None:
                rel = target.reliability
                found = self._clients[key] = _Client(key, target.backend, rel.health_check, rel.breaker.cooldown_s)
            found.targets.append(name)
        self._task: asyncio.Task[None] | None = None
        self._everything: asyncio.Future[None] | None = None
        self._wake = asyncio.Event()

    @property
    def running(self) -> bool:
        """Whether the background prober task is alive."""
        return self._task is not None and not self._task.done()

    @property
    def background(self) -> bool:
        """Whether some client asked for background probing (``health_check.interval_s``)."""
        return any(c.probeable and c.policy.interval_s for c in self._clients.values())

    # -- probing --------------------------------------------------------------------------------

    async def probe(self, clients: Iterable[str] | None = None) -> None:
        """Probes the named clients (default: all probe-able ones) concurrently; never raises.

        Probing everything while such a probe is already running joins it instead, so a burst
        of ``GET /health?deep=1`` sends each upstream one probe, not one per caller.
        """
        if clients is None:
            running = self._everything
            if running is None or running.done():
                running = self._everything = asyncio.ensure_future(self._probe(None))
            await asyncio.shield(running)
            return
        await self._probe(clients)

    async def _probe(self, clients: Iterable[str] | None) -> None:
        names = set(self._clients) if clients is None else set(clients)
        chosen = [c for n, c in self._clients.items() if n in names and c.probeable]
        if chosen:
            await asyncio.gather(*(self._probe_one(c) for c in chosen))
        if any(self.health.held(c.name) is not None for c in chosen):
            self.ensure_running()  # re-probe what is down after its hold

    async def _probe_one(self, client: _Client) -> None:
        source = client.backend
        assert isinstance(source, HealthSource)
        timeout = client.policy.timeout_s
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                result = await source.probe_health(client.policy.path, timeout)
        except TimeoutError:
            result = Probe("down", latency_ms=_ms(started), error=f"no answer within {timeout:g}s")
        except Exception as exc:  # a probe must never take the router down
            result = Probe("down", latency_ms=_ms(started), error=f"{type(exc).__name__}: {exc}")
        if self.health.record_probe(client.name, result, hold_s=client.hold_s):
            if result.state == "down":
                logger.warning(
                    "backend %r is down (%s at %s); targets %s are skipped until a probe says it is up "
                    "(next probe in %.0fs)",
                    client.name,
                    result.error,
                    result.url,
                    ", ".join(client.targets),
                    client.period_s,
                )
            else:
                logger.warning("backend %r is %s again (%s)", client.name, result.state, result.url)

    def _due(self, now: float) -> tuple[list[str], float | None]:
        """Clients due for a probe now, and when the next one will be (``None``: nothing to watch)."""
        due: list[str] = []
        wake: float | None = None
        for client in self._clients.values():
            if not client.probeable:
                continue
            probe, at = self.health.last_probe(client.name)
            if client.policy.interval_s:
                period = client.policy.interval_s
            elif probe is not None and probe.state == "down":
                period = client.cooldown_s
            else:
                continue
            at_next = now if at is None else at + period
            if at_next <= now:
                due.append(client.name)
                at_next = now + period
            wake = at_next if wake is None else min(wake, at_next)
        return due, wake

    # -- the background task ----------------------------------------------------------------------

    def ensure_running(self) -> None:
        """Starts the background prober in the running loop unless it runs already."""
        if self._task is not None and not self._task.done():
            self._wake.set()
            return
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="switchyard-health-probes")

    async def _run(self) -> None:
        while True:
            try:
                due, _ = self._due(self._clock())
                if due:
                    await self.probe(due)
                _, wake = self._due(self._clock())
            except Exception:  # keep probing; a bug here must not end health checks silently
                logger.exception("health probing failed")
                wake = self._clock() + 5.0
            if wake is None:
                return  # nothing scheduled: started again when a deep check finds a backend down
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(_MIN_SLEEP_S, wake - self._clock())):
                    await self._wake.wait()

    async def aclose(self) -> None:
        """Stops the background prober and any probe in flight."""
        for task in (self._task, self._everything):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._everything = None

    # -- the report -----------------------------------------------------------------------------

    def report(self, targets: Mapping[str, Target]) -> dict[str, Any]:
        """``status``, ``backends`` and ``targets`` for ``GET /health`` (no I/O).

        ``status`` is ``degraded`` when a backend is down, a breaker is not closed or a target
        was flagged for markup leaks, else ``ok``.
        """
        backends: dict[str, Any] = {}
        for client in self._clients.values():
            if client.probeable:
                view = self.health.backend(client.name)
                interval = client.policy.interval_s
                view["probed"] = f"every {interval:g}s" if interval else "on GET /health?deep=1"
            else:
                why = "health_check.enabled is false" if not client.policy.enabled else "no health endpoint"
                view = {"state": "not_probed", "reason": why}
            view["targets"] = list(client.targets)
            backends[client.name] = view
        report_targets: dict[str, Any] = {}
        degraded = any(b["state"] == "down" for b in backends.values())
        for name, target in targets.items():
            key = target.info.client or name
            breaker = self.health.state(name)
            held = self.health.held(key)
            problems: list[str] = []
            if held is not None:
                problems.append("backend_down")
            if breaker != "closed":
                problems.append(f"circuit_{breaker}")
            available = held is None and breaker != "open"
            entry: dict[str, Any] = {"client": key, "breaker": breaker, "available": available}
            leaks = self.health.leaks(name)
            if leaks is not None:
                entry["markup_leaks"] = leaks
                if leaks["flagged"]:
                    problems.append("markup_leak")
            entry["problems"] = problems
            degraded = degraded or bool(problems)
            report_targets[name] = entry
        return {"status": "degraded" if degraded else "ok", "backends": backends, "targets": report_targets}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


__all__ = ["BackendMonitor", "HealthSource"]
