"""Who may talk to the proxy: API keys, ``Host`` (DNS rebinding), browser origins, content types.

Layer: ``server`` — imports ``api`` and below.

Runs before the body is read, on the headers alone. Every refusal is answered in the error
envelope of the endpoint's API (Anthropic's below ``/v1/messages``, OpenAI's elsewhere), so
SDKs raise their usual typed errors. See ``docs/security.md`` for the threat each check stops.
"""

from __future__ import annotations

import ipaddress
from dataclasses import field
from typing import TYPE_CHECKING

from switchyard._dataclass import dataclass
from switchyard.engine.reply import Reply
from switchyard.protocol.access import allowed_routes, current_caller, required_labels
from switchyard.protocol.errors import ErrorInfo
from switchyard.server.auth import ApiKey, Budgets, KeyRing, presented_key, seconds_to_midnight
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps

if TYPE_CHECKING:
    from switchyard.config.server import ServerConfig  # the schema loads with the config

# Paths answered without a key: liveness probes and the API description.
_OPEN_PATHS = frozenset({"/health", "/v1/health", "/openapi.json"})
_CORS_METHODS = "GET, POST, OPTIONS"
_EXPOSED = (
    "x-switchyard-selected-model, x-switchyard-route, x-switchyard-decision-source, "
    "x-switchyard-overhead-ms, x-switchyard-request-id"
)


def envelope(path: str) -> WireFormat:
    """The API whose error shape a path answers in."""
    if path.startswith(("/v1/messages", "/messages")):
        return WireFormat.ANTHROPIC_MESSAGES
    if path.startswith(("/v1/responses", "/responses")):
        return WireFormat.OPENAI_RESPONSES
    return WireFormat.OPENAI_CHAT


def error_reply(
    path: str, status: int, message: str, kind: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> Reply:
    """An error answer in the endpoint's envelope."""
    info = ErrorInfo(status=status, type=kind, code=code, message=message)
    body = dumps(get_codec(envelope(path)).encode_error(info))
    return Reply(status, {"content-type": "application/json", **(headers or {})}, body=body)


def is_loopback_host(host: str) -> bool:
    """Whether a ``Host`` value (port included or not) names this machine's loopback."""
    name = _host_name(host)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name of a ``Host`` value without its port (``[::1]:4000`` → ``::1``)."""
    name = host.strip().lower()
    if name.startswith("["):
        return name[1 : name.find("]")] if "]" in name else name[1:]
    return name.partition(":")[0] if name.count(":") == 1 else name


_BAD_HOST = frozenset(" \t,/@\\")
_host_ok: dict[str, bool] = {}
"""Whether a ``Host`` value is ``host[:port]``: a client sends the same one every time. Bounded."""


_SINGLE = frozenset({"content-length"})
"""Header names whose repeated lines are not joined: the HTTP parser has already checked that
repeated ``Content-Length`` lines agree."""


def header_fields(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's header lines by lower-cased name; the values of a name that comes on several
    lines joined by ``", "`` (RFC 9110 §5.3: a list-valued field may be split over lines).

    So two ``x-switchyard-require`` lines both apply (their labels add up), and two credentials
    make one value that matches no key, instead of the last line silently winning. Costs one
    comparison unless some name repeats.
    """
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
    if len(headers) == len(raw):
        return headers
    joined: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        joined[key] = f"{joined[key]}, {text}" if key in joined and key not in _SINGLE else text
    return joined


def host_problem(raw: list[tuple[bytes, bytes]], headers: dict[str, str], http_version: str) -> str | None:
    """Why a request's ``Host`` fields break RFC 9112 §3.2, or ``None``.

    An HTTP/1.1 request must carry exactly one ``Host``; any request with two (which a guard
    reading "the last one" would misjudge) or with a value that is no ``host[:port]`` is
    refused with 400. Costs one dict lookup unless some header name repeats.
    """
    host = headers.get("host")
    if host is None:
        return "HTTP/1.1 requests must carry a Host header (RFC 9112 §3.2)" if http_version == "1.1" else None
    if len(raw) != len(headers) and sum(1 for name, _ in raw if name.lower() == b"host") > 1:
        return "a request may carry only one Host header (RFC 9112 §3.2)"
    ok = _host_ok.get(host)
    if ok is None:
        if len(_host_ok) >= 256:
            _host_ok.clear()  # a flood of distinct values cannot grow it
        ok = _host_ok[host] = not _BAD_HOST.intersection(host)
    return None if ok else f"Host header {host!r} is not host[:port] (RFC 9112 §3.2)"


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


@dataclass(slots=True)
class Admission:
    """What the gate decided for one request.

    Attributes:
        reply: A refusal (or a preflight answer) to send instead of serving; ``None``: serve.
        headers: Extra response headers (CORS) for the answer.
        key: The API key that authenticated the request, if any.
    """

    reply: Reply | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    key: ApiKey | None = None


class Gate:
    """The checks of ``server:`` that run on every request's headers.

    Args:
        settings: The ``server:`` section.
        keys: The inbound keys (empty: none configured).
        budgets: Daily spend per key (needed when any key has a budget).
    """

    def __init__(self, settings: ServerConfig, keys: KeyRing, budgets: Budgets | None = None) -> None:
        self.settings = settings
        self.keys = keys
        self.budgets = budgets
        self._hosts = frozenset(settings.allowed_hosts)
        self._any_host = "*" in self._hosts
        # With keys, a rebinding page cannot authenticate, so Host is checked only when listed.
        self._check_host = not self._any_host and (not keys or bool(self._hosts))
        self._seen: dict[str, bool] = {}
        self._origins = frozenset(settings.allowed_origins)
        self._any_origin = "*" in self._origins

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request's ``Host`` may be answered (a request without one is no browser's)."""
        if not self._check_host or host is None:
            return True
        known = self._seen.get(host)
        if known is None:
            # Parsing costs microseconds; a client sends the same Host every time. Bounded, so
            # a flood of distinct Host values cannot grow it.
            if len(self._seen) >= 256:
                self._seen.clear()
            known = self._seen[host] = is_loopback_host(host) or _host_name(host) in self._hosts
        return known

    def origin_allowed(self, origin: str) -> bool:
        """Whether a browser ``Origin`` is in ``allowed_origins``."""
        return self._any_origin or origin.rstrip("/").lower() in self._origins

    def _cors(self, origin: str) -> list[tuple[bytes, bytes]]:
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", _EXPOSED.encode()),
        ]

    async def admit(self, method: str, path: str, headers: dict[str, str]) -> Admission:
        """Checks one request's headers; sets the key's context for the engine (which binds it to
        the request's decision record).

        Order: ``Host``, browser ``Origin`` (and CORS preflight), content type of bodies, API
        key, daily budget.
        """
        if not self.host_allowed(headers.get("host")):
            return Admission(
                error_reply(
                    path,
                    403,
                    f"host {headers.get('host')!r} is not allowed; add it to server.allowed_hosts",
                    "permission_error",
                    code="host_not_allowed",
                )
            )
        admission = Admission()
        origin = headers.get("origin")
        if origin is not None:
            if not self.origin_allowed(origin):
                return Admission(
                    error_reply(
                        path,
                        403,
                        f"browser origin {origin!r} is not allowed; add it to server.allowed_origins",
                        "permission_error",
                        code="origin_not_allowed",
                    )
                )
            if method == "OPTIONS":
                asked = headers.get("access-control-request-headers", "authorization, content-type")
                preflight = {
                    "access-control-allow-origin": origin,
                    "access-control-allow-methods": _CORS_METHODS,
                    "access-control-allow-headers": asked,
                    "access-control-max-age": "600",
                    "vary": "Origin",
                }
                admission.reply = Reply(204, preflight)
                return admission
            admission.headers = self._cors(origin)
        if method == "POST" and not _is_json(headers.get("content-type", "")):
            # A browser sends text/plain (or no type) without a CORS preflight: refusing every
            # non-JSON body closes the "simple request" route to a local proxy.
            admission.reply = error_reply(
                path,
                415,
                f"content-type must be application/json, got {headers.get('content-type', '(none)')!r}",
                "invalid_request_error",
                code="unsupported_media_type",
            )
            return admission
        if not self.keys:
            return admission
        if path.rstrip("/") in _OPEN_PATHS:
            # Open to anyone, but a valid key still counts: an admin key unlocks the operator's
            # view of /health (server/views.py). A wrong key is simply anonymous here.
            token = presented_key(headers)
            admission.key = self.keys.find(token) if token else None
            return admission
        return await self._authenticate(path, headers, admission)

    async def _authenticate(self, path: str, headers: dict[str, str], admission: Admission) -> Admission:
        token = presented_key(headers)
        key = self.keys.find(token) if token else None
        if key is None:
            message = "invalid API key" if token else "missing API key: send Authorization: Bearer <key> or x-api-key"
            admission.reply = error_reply(
                path,
                401,
                message,
                "authentication_error",
                code="invalid_api_key",
                headers={"www-authenticate": 'Bearer realm="switchyard"'},
            )
            return admission
        admission.key = key
        # Read by the engine as it opens this request's decision record, which then carries it
        # (booking and attribution read the record, not this request's context).
        current_caller.set(key.caller)
        allowed_routes.set(key.routes)
        required_labels.set((key.name, key.require_labels) if key.require_labels else None)
        if key.budget_usd_per_day is not None and self.budgets is not None:
            spent = await self.budgets.spent(key.name)
            if spent >= key.budget_usd_per_day:
                admission.reply = error_reply(
                    path,
                    429,
                    f"API key {key.name!r} has spent its budget for today "
                    f"(${spent:.4f} of ${key.budget_usd_per_day:g}); it resets at 00:00 UTC",
                    "rate_limit_error",
                    code="insufficient_quota",
                    # Waiting will not help before midnight: tell SDKs not to retry.
                    headers={"retry-after": str(seconds_to_midnight()), "x-should-retry": "false"},
                )
        return admission
