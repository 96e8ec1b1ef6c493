"""The built-in dashboard and session explorer (``server.dashboard``; docs/deployment.md).

Layer: ``server``. Vanilla HTML, CSS and JavaScript shipped in the package (``static/``): no
build step, no CDN. :func:`for_switchyard` wires it to a live router; ``switchyard dashboard
--log`` serves the same page over a decision log (:mod:`switchyard.server.dashboard.offline`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.api import Switchyard
    from switchyard.config.server import ServerConfig
    from switchyard.server.auth import KeyRing
    from switchyard.server.dashboard.fleet import Fleet
    from switchyard.server.dashboard.http import DashboardHttp, is_dashboard_path
    from switchyard.server.dashboard.ring import RecordRing
    from switchyard.server.dashboard.views import Replica, Views

# The proxy imports ``dashboard.http`` (for ``is_dashboard_path``) with the dashboard off: the
# package's parts load when the dashboard is built (:func:`for_switchyard`) or named.
_LAZY = {
    "DashboardHttp": "switchyard.server.dashboard.http",
    "is_dashboard_path": "switchyard.server.dashboard.http",
    "Fleet": "switchyard.server.dashboard.fleet",
    "RecordRing": "switchyard.server.dashboard.ring",
    "Replica": "switchyard.server.dashboard.views",
    "Views": "switchyard.server.dashboard.views",
}


__getattr__ = lazy_attributes(__name__, _LAZY, globals())


class LiveTotals:
    """ "Since start" figures of a running router: its ledger and reliability counters."""

    def __init__(self, sy: Switchyard) -> None:
        self.sy = sy

    def usd(self) -> dict[str, Any]:
        """The ledger's totals (``GET /v1/stats`` → ``usd``, without its session list)."""
        snapshot = self.sy.ledger.snapshot(sessions=0)
        snapshot.pop("sessions", None)
        return snapshot

    def reliability(self) -> dict[str, Any]:
        """``GET /v1/stats`` → ``reliability``."""
        return self.sy.stats()

    def state(self) -> dict[str, Any]:
        """``GET /v1/stats`` → ``state``."""
        return self.sy.state_status()


def for_switchyard(sy: Switchyard, settings: ServerConfig, keys: KeyRing, host_allowed: Any = None) -> DashboardHttp:
    """The dashboard of a live router: registers the record ring as a decision callback."""
    from switchyard.server.dashboard.experiment import Outcomes
    from switchyard.server.dashboard.fleet import Fleet
    from switchyard.server.dashboard.http import DashboardHttp
    from switchyard.server.dashboard.ring import RecordRing
    from switchyard.server.dashboard.views import Replica, Views

    cfg = settings.dashboard
    ring = RecordRing(cfg.max_records)
    sy.on_decision(ring)
    totals, replica = LiveTotals(sy), Replica.this()
    outcomes = Outcomes(cfg.max_records)  # feedback reports for the routed-vs-control panel
    sy.feedback_store.listeners.append(outcomes)
    views = Views(ring, totals, replica, window_s=cfg.window_s, poll_s=cfg.poll_s, outcomes=outcomes)
    http = DashboardHttp(views, keys, host_allowed)
    if sy.state_status().get("backend", "memory") != "memory":
        # A shared store (Redis): every replica publishes its totals there (fleet.py).
        http.fleet = Fleet(sy.state_store, replica, totals, every_s=cfg.poll_s)
        views.fleet = lambda: http.fleet.latest if http.fleet is not None else None
    return http


__all__ = [
    "DashboardHttp",
    "Fleet",
    "LiveTotals",
    "RecordRing",
    "Replica",
    "Views",
    "for_switchyard",
    "is_dashboard_path",
]
