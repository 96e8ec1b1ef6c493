"""What each caller may read of the operator's views: ``/health``, ``/v1/stats``, ``/metrics``.

Layer: ``server`` — imports ``api`` and below.

The rule (``docs/security.md``, "Operator views"):

* the **operator** is an admin key (``server.api_keys[].admin``) or, when no keys are configured,
  a caller on this machine's loopback (the documented local set-up);
* ``GET /health`` answers everyone (liveness), but only the operator gets routes, targets and
  upstream URLs; anyone else gets ``status`` alone;
* ``?deep=1`` probes the upstreams only for the operator: at once for an admin key; without keys,
  for loopback callers at most once per ``server.deep_health_interval_s`` all together (later
  calls read that round's results). Anyone else's deep check probes nothing, so no caller but
  the operator can turn health checks into upstream load or have a probe hold a backend out;
* with keys configured, ``/v1/stats`` and ``/metrics`` (every route's spend, every key's session
  ids) are for admin keys only: 403 for any other key.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from typing import Any

from switchyard.api import wants_deep  # re-exported: the server asks the same question as dispatch
from switchyard.server.auth import ApiKey

HIDDEN = "route, target and backend details need an admin key (server.api_keys[].admin)"


def loopback_client(client: Any) -> bool:
    """Whether an ASGI ``scope["client"]`` (``(host, port)`` or ``None``) is this machine."""
    if not client:
        return False
    try:
        return ipaddress.ip_address(str(client[0])).is_loopback
    except ValueError:
        return False


class HealthPolicy:
    """Who sees what of ``/health``, and when a deep check may probe.

    Args:
        keyed: Whether ``server.api_keys`` is set.
        interval_s: ``server.deep_health_interval_s``.
        clock: Monotonic clock.
    """

    def __init__(self, keyed: bool, interval_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.keyed = keyed
        self.interval_s = interval_s
        self._clock = clock
        self._last_round: float | None = None

    def operator(self, key: ApiKey | None, client: Any) -> bool:
        """Whether the caller may read the operator's views."""
        if self.keyed:
            return key is not None and key.admin
        return loopback_client(client)

    def may_probe(self, key: ApiKey | None, operator: bool) -> bool:
        """Whether a deep check by this caller probes now (and counts as the latest round)."""
        if key is not None and key.admin:
            return True
        if self.keyed or not operator:
            return False
        now = self._clock()
        if self._last_round is not None and now - self._last_round < self.interval_s:
            return False
        self._last_round = now
        return True


def health_view(report: dict[str, Any], operator: bool, deep: str | None) -> dict[str, Any]:
    """The ``/health`` body for this caller: the whole report for the operator, else ``status``.

    Args:
        report: :meth:`Switchyard.health`'s report.
        operator: Whether the caller may read it all.
        deep: Why a requested deep check did not probe, if it did not.
    """
    view = dict(report) if operator else {"status": report.get("status", "ok"), "detail": HIDDEN}
    if deep is not None:
        view["deep"] = deep
    return view


__all__ = ["HIDDEN", "HealthPolicy", "health_view", "loopback_client", "wants_deep"]
