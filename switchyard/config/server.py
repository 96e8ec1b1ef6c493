"""The proxy's own exposure settings (the ``server:`` section of the config).

Layer: ``config`` — imports ``protocol`` and ``routers.restrict`` (label validation).

Everything here protects the proxy from its callers: who may call it (inbound keys, hosts,
browser origins), how long a slow client may hold a connection, how big a request may be, and
how long a shutdown waits for open requests. ``docs/security.md`` explains what each setting
defends against; the defaults are safe for a proxy on 127.0.0.1.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from switchyard.routers.restrict import clean_labels

PathT = tuple[str | int, ...]

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ApiKeyConfig(_Strict):
    """One inbound API key (``server.api_keys[i]``).

    Attributes:
        name: Label written into decision records (``details.api_key``) and used for budgets.
        hash: ``sha256:<64 hex>`` of the key, as ``switchyard keys create`` prints it; the key
            itself is never stored in the config.
        key_env: Alternatively, the environment variable holding the key (hashed at start-up).
        routes: Routes (``model`` names) this key may use; ``["*"]`` (the default) means all.
        budget_usd_per_day: Spend allowed per UTC day, summed from the decision records'
            ``cost_usd``; further requests get 429 until midnight UTC. ``null``: no budget.
        admin: The key may read the operator's views: route, target and upstream details of
            ``/health``, deep health checks, every key's and route's figures in ``/v1/stats`` and
            ``/metrics``, and the dashboard. Other keys see only what concerns them.
        require_labels: Every request of this key is served only by targets carrying all of
            these labels (its router's choice, fallbacks and judge calls alike; see
            docs/restrictions.md).
    """

    name: str = Field(min_length=1)
    hash: str | None = None
    key_env: str | None = None
    routes: list[str] = Field(default_factory=lambda: ["*"])
    budget_usd_per_day: float | None = Field(default=None, ge=0.0)
    admin: bool = False
    require_labels: list[str] = Field(default_factory=list)

    @field_validator("require_labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        return clean_labels(value)

    @field_validator("hash")
    @classmethod
    def _hash(cls, value: str | None) -> str | None:
        if value is not None and not _HASH.match(value):
            raise ValueError("must be 'sha256:' followed by 64 lower-case hex digits (see `switchyard keys create`)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ApiKeyConfig:
        if (self.hash is None) == (self.key_env is None):
            raise ValueError("set exactly one of 'hash' and 'key_env'")
        return self


class TenantConfig(_Strict):
    """A group of inbound keys that share one tenant (``server.tenants.<name>``).

    Without this section every key is its own tenant, named after the key. A tenant owns the
    session state, Anthropic message threads and derived sessions of its keys' requests
    (docs/security.md, "Tenancy model"): keys of one tenant continue each other's sessions and
    threads; keys of different tenants never see each other's.

    Attributes:
        keys: Names of ``server.api_keys`` entries; each key belongs to at most one tenant.
    """

    keys: list[str] = Field(min_length=1)


def tenant_problems(api_keys: list[ApiKeyConfig], tenants: dict[str, TenantConfig]) -> list[tuple[PathT, str]]:
    """What is wrong with ``server.tenants``, each with its path below ``server``.

    A tenant's key must be a configured key, listed in one tenant only; a tenant may not take
    the name of a key outside it (that key is a tenant of that name already: their sessions
    would merge); tenants need keys to exist.
    """
    if not tenants:
        return []
    if not api_keys:
        return [(("tenants",), "needs server.api_keys: a tenant is a group of inbound keys")]
    names = {k.name for k in api_keys}
    known = ", ".join(sorted(names))
    owner: dict[str, tuple[str, int]] = {}
    problems: list[tuple[PathT, str]] = []
    for tenant, cfg in tenants.items():
        if not tenant.strip():
            problems.append((("tenants", tenant), "a tenant needs a name (not empty, not only spaces)"))
        for i, key in enumerate(cfg.keys):
            path: PathT = ("tenants", tenant, "keys", i)
            if key not in names:
                problems.append((path, f"no key named {key!r} in server.api_keys (names: {known})"))
            elif key in owner:
                first, j = owner[key]
                where = f"server.tenants.{first}.keys[{j}]"
                problems.append((path, f"key {key!r} is already listed at {where}; a key belongs to one tenant"))
            else:
                owner[key] = (tenant, i)
    for tenant in tenants:
        if tenant in names and tenant not in tenants[tenant].keys:
            problems.append(
                (
                    ("tenants", tenant),
                    f"{tenant!r} is the name of an API key outside this tenant, which is a tenant of that "
                    "name by itself: list the key in this tenant's keys, or name the tenant otherwise",
                )
            )
    return problems


def tenant_of_keys(api_keys: list[ApiKeyConfig], tenants: dict[str, TenantConfig]) -> dict[str, str]:
    """Each key's tenant by key name: the tenant that lists it, else the key's own name.

    Raises:
        ValueError: ``server.tenants`` is invalid (:func:`tenant_problems`), naming the path.
    """
    problems = tenant_problems(api_keys, tenants)
    if problems:
        path, message = problems[0]
        # The config's loader reports every problem, with lines; this is for a config built in code.
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        raise ValueError(f"server{where}: {message}")
    owner = {key: tenant for tenant, cfg in tenants.items() for key in cfg.keys}
    return {k.name: owner.get(k.name, k.name) for k in api_keys}


class ClientTimeoutsConfig(_Strict):
    """How long a caller may take (``server.client_timeouts``).

    Attributes:
        header_s: A connection must finish its request headers within this many seconds of
            connecting (or of its first byte after a keep-alive pause), else it is closed.
        body_s: The whole request body must arrive within this many seconds after the headers
            (else 408 and the connection is closed).
        keepalive_s: An idle keep-alive connection is closed after this many seconds.
        write_s: A streamed answer whose caller reads nothing for this many seconds while
            data waits is ended: its connection is dropped and the upstream read cancelled (the
            proxy holds at most 256 KiB of a stream the caller has not taken).
        max_connections: Open connections at once; one more is answered 503 and closed.
    """

    header_s: PositiveFloat = 10.0
    body_s: PositiveFloat = 60.0
    keepalive_s: PositiveFloat = 30.0
    write_s: PositiveFloat = 30.0
    max_connections: PositiveInt = 512


class RequestLimitsConfig(_Strict):
    """Caps on what one request may ask for (``server.limits``).

    Attributes:
        max_body_bytes: Largest request body (413 above, in the endpoint's error shape).
        max_messages: Most messages (Chat/Anthropic ``messages``, Responses ``input`` items)
            one request may carry (400 above).
        max_header_bytes: Longest request line or header field line, in bytes; the whole
            request head may hold four times this. Above: 431, before the rest is read.
        max_header_fields: Most header fields in one request (431 above).
    """

    max_body_bytes: PositiveInt = 32 * 1024 * 1024
    max_messages: PositiveInt = 10_000
    max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    max_header_fields: int = Field(default=100, ge=16)


class DashboardConfig(_Strict):
    """The built-in dashboard at ``/dashboard`` (``server.dashboard``; docs/deployment.md).

    Attributes:
        enabled: Serve the page and its data endpoints. Off by default. Without
            ``server.api_keys`` it answers loopback clients only; with keys, an ``admin`` key.
        window_s: Default time window of the windowed views, in seconds (the page can change it).
        max_records: Decision records kept in memory for the windowed views and the session
            explorer (a ring: the oldest go first).
        poll_s: How often an open page asks for fresh data, in seconds.
        prompt_preview_chars: Characters of each request's latest message kept with its record
            in memory for the session timeline (0: none). Never written to decision logs,
            metrics or spans.
    """

    enabled: bool = False
    window_s: PositiveInt = 3600
    max_records: PositiveInt = 10_000
    poll_s: float = Field(default=5.0, ge=1.0, le=300.0)
    prompt_preview_chars: int = Field(default=200, ge=0, le=10_000)


class ServerConfig(_Strict):
    """The ``server:`` section: exposure, client limits and shutdown of ``switchyard serve``.

    Attributes:
        api_keys: Inbound keys; when any is set, every endpoint but ``/health`` needs one
            (``Authorization: Bearer``, ``x-api-key`` or ``api-key``).
        allowed_hosts: ``Host`` header values (host names, no port) answered besides loopback
            names; ``"*"`` allows any. Checked when no ``api_keys`` are set (DNS rebinding).
        allowed_origins: Browser ``Origin`` values allowed to call the proxy (CORS preflight
            answered for them); requests from any other origin are refused with 403.
        client_timeouts: Deadlines for slow clients and the connection cap.
        limits: Request body and message-count caps.
        drain_s: On SIGTERM/SIGINT, how long open requests may go on before each open stream
            is ended with an error event (and each unanswered request with 503).
        dashboard: The built-in dashboard (off by default).
        deep_health_interval_s: Without ``api_keys``, ``GET /health?deep=1`` from loopback
            probes the backends at most once per this many seconds (all callers together); a
            deep check sooner reports the last round's results. Other callers never probe; with
            keys only admin keys do.
        tenants: Groups of ``api_keys`` that share one tenant (session state, threads), by
            tenant name; a key not listed is a tenant by itself (docs/security.md).
    """

    api_keys: list[ApiKeyConfig] = Field(default_factory=list)
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    client_timeouts: ClientTimeoutsConfig = Field(default_factory=ClientTimeoutsConfig)
    limits: RequestLimitsConfig = Field(default_factory=RequestLimitsConfig)
    drain_s: float = Field(default=20.0, ge=0.0)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    deep_health_interval_s: float = Field(default=10.0, ge=0.0)

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if origin != "*" and not re.match(r"^https?://[^/\s]+$", origin):
                raise ValueError(f"{origin!r} is not an origin: scheme://host[:port], no path (or '*')")
        return [o.rstrip("/").lower() for o in value]

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for host in value:
            if "/" in host or " " in host:
                raise ValueError(f"{host!r} is not a host name (no scheme, no path)")
        return [h.lower() for h in value]

    @model_validator(mode="after")
    def _unique_names(self) -> ServerConfig:
        names = [k.name for k in self.api_keys]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"api_keys: duplicate name(s) {', '.join(dupes)}")
        return self
