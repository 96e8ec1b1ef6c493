"""Whether a reload of ``serve --workers`` would serve nothing: checked before any worker moves.

Layer: ``server``.

A config file saved half-written (an editor's save mid-edit, a ``kubectl cp`` cut short) can
still validate: without ``routes:`` every request is a 404, and without the routes callers use
every one of *their* requests is. A reload refuses

* a config with no routes at all — always (a proxy that routes nothing serves nothing);
* a config with none of the routes (or aliases) that served traffic in the last
  :data:`RECENT_S` seconds, unless the reload is forced (``switchyard reload --force``, i.e.
  ``SIGUSR1`` instead of ``SIGHUP``) or the config names a ``default_route`` that every such
  request would fall back to.

The supervisor learns which routes served traffic from its workers: each worker writes a
``T <route>`` line on its status pipe the first time a route answers and then at most once per
:data:`REPORT_EVERY_S` per route (:class:`ServedRoutes`), so what the supervisor knows is at most
that old and costs the worker one dict lookup per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import orjson

from switchyard.config.load import LoadedConfig
from switchyard.engine.records import DecisionRecord

RECENT_S = 60.0
"""How far back "routes that served traffic" looks."""

REPORT_EVERY_S = 10.0
"""How often, at most, a worker tells its supervisor that a route is still serving."""

SERVED = b"T"
"""The status line a worker writes when a route served a request: ``T`` and the route's name as JSON."""


def served_line(route: str) -> bytes:
    """The status line telling the supervisor that ``route`` served a request."""
    return SERVED + orjson.dumps(route) + b"\n"


class ServedRoutes:
    """A worker's decision sink that tells the supervisor which routes serve traffic.

    Args:
        tell: Writes one status line to the supervisor (never blocks, never raises).
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, tell: Callable[[bytes], None], *, clock: Callable[[], float] = time.monotonic) -> None:
        self._tell = tell
        self._clock = clock
        self._told: dict[str, float] = {}

    def __call__(self, record: DecisionRecord) -> None:
        now = self._clock()
        last = self._told.get(record.route)
        if last is not None and now - last < REPORT_EVERY_S:
            return
        if last is None and len(self._told) >= 10_000:
            self._told.clear()  # routes are the config's, but stay bounded whatever comes
        self._told[record.route] = now
        self._tell(served_line(record.route))


class RecentRoutes:
    """What the supervisor heard: each route's last report, in its own monotonic time.

    Args:
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heard: dict[str, float] = {}

    def heard(self, line: bytes) -> None:
        """Takes one ``T`` status line (other lines are not its business)."""
        if not line.startswith(SERVED):
            return
        try:
            route = orjson.loads(line[len(SERVED) :])
        except orjson.JSONDecodeError:
            return
        if isinstance(route, str):
            if len(self._heard) >= 10_000 and route not in self._heard:
                self._heard.clear()
            self._heard[route] = self._clock()

    def recent(self) -> list[str]:
        """The routes that served traffic in the last :data:`RECENT_S` seconds, sorted."""
        since = self._clock() - RECENT_S - REPORT_EVERY_S  # a report is up to REPORT_EVERY_S late
        return sorted(name for name, at in self._heard.items() if at >= since)


def refusal(loaded: LoadedConfig, recent: Iterable[str], *, force: bool = False) -> str | None:
    """Why a reload to ``loaded`` must be refused (see the module), or ``None``.

    Args:
        loaded: The new config, validated.
        recent: The routes that served traffic lately (:meth:`RecentRoutes.recent`).
        force: The operator asked to apply it anyway (only the recent-routes rule yields).
    """
    if not loaded.routes:
        return "the new config has no routes: every request would get 404 (was the file saved half-written?)"
    served = sorted(set(recent))
    if force or not served or loaded.config.default_route in loaded.routes:
        return None
    names = set(loaded.routes)
    for spec in loaded.routes.values():
        names.update(spec.aliases)
    if names.intersection(served):
        return None
    shown = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
    return (
        f"the new config has none of the routes that served traffic in the last {RECENT_S:g}s ({shown}): "
        "their callers would get 404. If that is what you want, apply it with "
        "`switchyard reload --force <supervisor pid>` (SIGUSR1)"
    )


def dropped(loaded: LoadedConfig, recent: Iterable[str]) -> list[str]:
    """The routes that served traffic lately and that the new config no longer has (a warning)."""
    names = set(loaded.routes)
    for spec in loaded.routes.values():
        names.update(spec.aliases)
    return sorted(set(recent) - names)
