"""The dashboard over HTTP: its page, assets and JSON endpoints, and who may read them.

Layer: ``server``.

Paths (all ``GET``/``HEAD``):

* ``/dashboard/`` (``/dashboard`` redirects there), ``/dashboard/app.js``,
  ``/dashboard/style.css``: the page, shipped in the package; no data in them, so no key.
* ``/dashboard/api/summary?window_s=N``, ``/dashboard/api/sessions?limit=N&route=R&tenant=T``,
  ``/dashboard/api/session?key=KEY`` (a session row's ``key``: ``ROUTE:SESSION``, with the
  tenant's namespace before the session when there are inbound keys, so two tenants' same
  session id are two sessions): the data.

Who may read the data: with ``server.api_keys`` set, a request carrying an ``admin`` key
(``Authorization: Bearer``; the page asks for the key once and sends it as that header on its
own fetches — never in a URL or a cookie, so no other site can make a browser send it); a key
without ``admin`` gets 403. Without keys, only loopback clients (403 otherwise). So the
dashboard is the operator's view of every tenant (docs/security.md, "Tenancy model"): no
tenant's key reads it, and each session row names its tenant.

Every answer carries a strict Content-Security-Policy (scripts and styles from this origin
only, no inline code, no framing), ``X-Content-Type-Options: nosniff`` and no CORS headers: a
browser on another origin can neither read the data nor embed the page. A request whose
``Origin`` (or ``Sec-Fetch-Site``) says it comes from another site is refused, and so is a
``Host`` the proxy would not answer (DNS rebinding; ``server.allowed_hosts``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from switchyard.engine.reply import Reply
from switchyard.server.auth import KeyRing, presented_key
from switchyard.server.views import loopback_client
from switchyard.wire.json import dumps

if TYPE_CHECKING:
    # Built by ``for_switchyard`` (or the offline dashboard) when the dashboard is on: the
    # proxy imports this module for ``is_dashboard_path`` whether or not it is.
    from switchyard.server.dashboard.fleet import Fleet
    from switchyard.server.dashboard.views import Views

PREFIX = "/dashboard"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
_ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
    "/favicon.svg": ("favicon.svg", "image/svg+xml"),
}


def is_dashboard_path(path: str) -> bool:
    """Whether a request path belongs to the dashboard."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def _load_assets() -> dict[str, bytes]:
    from importlib import resources

    folder = resources.files("switchyard.server.dashboard").joinpath("static")
    return {name: folder.joinpath(name).read_bytes() for name, _ in _ASSETS.values()}


def _reply(status: int, body: bytes, content_type: str, **extra: str) -> Reply:
    return Reply(status, {"content-type": content_type, **_SECURITY_HEADERS, **extra}, body=body)


def _error(status: int, message: str, code: str, **extra: str) -> Reply:
    body = dumps({"error": {"message": message, "code": code}})
    return _reply(status, body, "application/json", **{"cache-control": "no-store", **extra})


class DashboardHttp:
    """Answers the dashboard's requests.

    Args:
        views: The data.
        keys: ``server.api_keys`` (empty: loopback clients only).
        host_allowed: The proxy's ``Host`` check (``Gate.host_allowed``).
    """

    def __init__(self, views: Views, keys: KeyRing, host_allowed: Any = None) -> None:
        self.views = views
        self.keys = keys
        self.host_allowed = host_allowed
        self.fleet: Fleet | None = None
        """Shares totals with the other replicas (a shared state store); started by the app."""
        self._assets = _load_assets()

    def handle(self, method: str, path: str, query: bytes, headers: Mapping[str, str], client: Any) -> Reply:
        """The answer to one request below ``/dashboard`` (headers lower-cased)."""
        if method not in ("GET", "HEAD"):
            return _error(405, f"method {method} not allowed on the dashboard", "method_not_allowed", allow="GET, HEAD")
        host = headers.get("host")
        if self.host_allowed is not None and not self.host_allowed(host):
            return _error(403, f"host {host!r} is not allowed; add it to server.allowed_hosts", "host_not_allowed")
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in _own_origins(host):
            return _error(403, "the dashboard answers its own page only (cross-origin request)", "origin_not_allowed")
        if headers.get("sec-fetch-site") == "cross-site":
            return _error(403, "the dashboard answers its own page only (cross-site request)", "origin_not_allowed")
        sub = path[len(PREFIX) :]
        if sub == "":
            return _reply(302, b"", "text/plain; charset=utf-8", location=f"{PREFIX}/")
        asset = _ASSETS.get(sub)
        if asset is not None:
            name, content_type = asset
            return _reply(200, self._assets[name], content_type, **{"cache-control": "no-cache"})
        if not sub.startswith("/api/"):
            return _error(404, f"no such dashboard page: {path}", "not_found")
        refused = self._refuse(headers, client)
        if refused is not None:
            return refused
        return self._api(sub[len("/api/") :], parse_qs(query.decode("latin-1")))

    def _refuse(self, headers: Mapping[str, str], client: Any) -> Reply | None:
        """Why this data request may not be answered (``None``: it may)."""
        if not self.keys:
            if loopback_client(client):
                return None
            return _error(
                403,
                "the dashboard answers loopback clients only while server.api_keys is empty",
                "loopback_only",
            )
        token = presented_key(headers)
        key = self.keys.find(token) if token else None
        if key is None:
            message = "invalid API key" if token else "missing API key: the dashboard needs an admin key"
            # No WWW-Authenticate: a browser would open its own login prompt over the page's.
            return _error(401, message, "invalid_api_key")
        if not key.admin:
            return _error(403, f"API key {key.name!r} is not an admin key (server.api_keys[].admin)", "not_admin")
        return None

    def _api(self, name: str, query: dict[str, list[str]]) -> Reply:
        try:
            if name == "summary":
                data: dict[str, Any] | None = self.views.summary(_number(query, "window_s"))
            elif name == "sessions":
                limit = int(_number(query, "limit") or 100)
                route, tenant = query.get("route", [None])[0], query.get("tenant", [None])[0]
                data = self.views.sessions(max(1, min(limit, 1000)), route, tenant)
            elif name == "session":
                key = query.get("key", [""])[0]
                data = self.views.session(key)
                if data is None:
                    return _error(404, "no such session in memory", "session_not_found")
            else:
                return _error(404, f"no such dashboard endpoint: {name}", "not_found")
        except ValueError as exc:
            return _error(400, str(exc), "invalid_request")
        return _reply(200, dumps(data), "application/json", **{"cache-control": "no-store"})


def _number(query: dict[str, list[str]], name: str) -> float | None:
    values = query.get(name)
    if not values or not values[0]:
        return None
    try:
        value = float(values[0])
    except ValueError:
        raise ValueError(f"{name} must be a number, got {values[0]!r}") from None
    if not 0 < value < math.inf:  # ``inf``, ``1e400`` and ``nan`` parse as floats
        raise ValueError(f"{name} must be a positive finite number, got {values[0]!r}")
    return value


def _own_origins(host: str | None) -> set[str]:
    """The origins of the page itself (the request's ``Host`` over http or https)."""
    if not host:
        return set()
    h = host.strip().lower()
    return {f"http://{h}", f"https://{h}"}


__all__ = ["CSP", "PREFIX", "DashboardHttp", "is_dashboard_path"]
