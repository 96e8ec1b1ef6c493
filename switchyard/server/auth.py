"""Inbound API keys: who may call the proxy, which routes each key may use, and its daily budget.

Layer: ``server`` — imports ``api`` and below.

Keys are long random tokens (``switchyard keys create``: 32 random bytes), so the config stores
only their SHA-256 — a slow password hash would add nothing against guessing a 256-bit secret
and would cost milliseconds per request. A presented key is hashed once and looked up in a dict;
the secret itself is never logged or written to a decision record (only the key's ``name``).

Budgets are summed from the decision records' ``cost_usd`` per key and UTC day, kept in the
router's state store (``state:``), so replicas sharing a Redis store share the spend. A record
is booked to the key bound to it when its request was admitted (``DecisionRecord.caller``),
never to the key of whatever request is running when the record reaches the sinks: under
``switchyard serve`` that is after the reply, often during the next request (``later.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from switchyard._dataclass import dataclass
from switchyard.protocol.access import Caller

if TYPE_CHECKING:
    from switchyard.config.server import ApiKeyConfig, TenantConfig  # the schema loads with the config
    from switchyard.engine.records import DecisionRecord
    from switchyard.protocol.session import StateStore

logger = logging.getLogger("switchyard.server")

KEY_PREFIX = "sy-"
_DAY_S = 86_400.0


def new_key() -> str:
    """A fresh inbound API key (``sy-`` and 43 URL-safe characters: 256 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The form stored in the config: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One configured key, without its secret.

    Attributes:
        name: Its label (in decision records as ``details.api_key``).
        routes: Routes it may use; ``None``: all.
        budget_usd_per_day: Spend allowed per UTC day, or ``None``.
        admin: May read the operator's views (see ``ApiKeyConfig.admin``).
        require_labels: Labels every target serving this key's requests must carry.
        tenant: Whose session state and threads its requests use (``server.tenants``; the
            key's own name when no tenant lists it).
    """

    name: str
    routes: frozenset[str] | None
    budget_usd_per_day: float | None
    admin: bool = False
    require_labels: frozenset[str] = frozenset()
    tenant: str = ""

    def __post_init__(self) -> None:
        if not self.tenant:  # a key is its own tenant unless server.tenants groups it
            object.__setattr__(self, "tenant", self.name)

    @property
    def caller(self) -> Caller:
        """What a request this key authenticated carries to its decision record."""
        return Caller(self.name, self.tenant)


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``Authorization: Bearer``, ``x-api-key`` (Anthropic SDKs)
    or ``api-key`` (Azure-style clients), in that order."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return headers.get("x-api-key") or headers.get("api-key") or None


class KeyRing:
    """The configured keys, by hash.

    Args:
        keys: ``server.api_keys``.
        environ: Where ``key_env`` names are looked up (default ``os.environ``).
        tenants: ``server.tenants`` (each key not listed is its own tenant).

    Raises:
        ValueError: A ``key_env`` variable is unset or empty, or ``tenants`` is invalid.
    """

    def __init__(
        self,
        keys: list[ApiKeyConfig],
        environ: Mapping[str, str] | None = None,
        tenants: dict[str, TenantConfig] | None = None,
    ) -> None:
        from switchyard.config.server import tenant_of_keys

        env = os.environ if environ is None else environ
        tenant_of = tenant_of_keys(keys, tenants or {})
        self._by_hash: dict[str, ApiKey] = {}
        for i, cfg in enumerate(keys):
            digest = cfg.hash
            if cfg.key_env is not None:
                secret = env.get(cfg.key_env, "")
                if not secret:
                    raise ValueError(f"server.api_keys[{i}].key_env: environment variable {cfg.key_env} is not set")
                digest = hash_key(secret)
            assert digest is not None  # the config model requires hash or key_env
            routes = None if "*" in cfg.routes else frozenset(cfg.routes)
            labels = frozenset(cfg.require_labels)
            tenant = tenant_of[cfg.name]
            self._by_hash[digest] = ApiKey(cfg.name, routes, cfg.budget_usd_per_day, cfg.admin, labels, tenant)

    def __bool__(self) -> bool:
        return bool(self._by_hash)

    def find(self, key: str) -> ApiKey | None:
        """The entry for a presented key, or ``None``."""
        return self._by_hash.get(hash_key(key))

    def limits(self) -> dict[str, float]:
        """Each budgeted key's USD per UTC day, by key name (what :class:`Budgets` books against)."""
        return {k.name: k.budget_usd_per_day for k in self._by_hash.values() if k.budget_usd_per_day is not None}


def _day(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))


def seconds_to_midnight(now: float | None = None) -> int:
    """Seconds until the next UTC midnight (when daily budgets start over)."""
    t = time.time() if now is None else now
    return max(1, int(_DAY_S - t % _DAY_S))


class Budgets:
    """Per-key daily spend, fed by decision records and kept in the state store.

    Args:
        store: Where the spend is kept (the router's state store).
        limits: Each budgeted key's USD per UTC day, by key name.
        refresh_s: How long a read of the store is reused.

    Reads are cached for ``refresh_s`` so a key with a budget costs at most one store read per
    second (other replicas' spend is seen within that time); this process's own spend is added
    at once.
    """

    def __init__(self, store: StateStore, limits: Mapping[str, float], *, refresh_s: float = 1.0) -> None:
        self.store = store
        self.limits = dict(limits)  # key name -> USD per UTC day
        self.refresh_s = refresh_s
        self._cache: dict[str, tuple[float, float]] = {}  # store key -> (spent, read at)
        self._writes: set[asyncio.Task[None]] = set()

    @staticmethod
    def _key(name: str) -> str:
        return f"switchyard:budget:{name}:{_day()}"

    async def spent(self, name: str) -> float:
        """USD this key spent today (UTC)."""
        key = self._key(name)
        cached = self._cache.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self.refresh_s:
            return cached[0]
        value = await self.store.get(key)
        spent = float(value.get("usd", 0.0)) if value else 0.0
        if cached is not None:
            spent = max(spent, cached[0])  # our own write may not have landed yet
        self._cache[key] = (spent, now)
        return spent

    def record(self, record: DecisionRecord) -> None:
        """Decision-record callback: books the record's cost to the key its request came with."""
        caller = record.caller
        if caller is None or caller.key not in self.limits:
            return
        cost = record.total_cost_usd
        if cost <= 0:
            return
        key = self._key(caller.key)
        spent, at = self._cache.get(key, (0.0, 0.0))
        self._cache[key] = (spent + cost, at)
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to persist from
            task = asyncio.get_running_loop().create_task(self._add(key, cost))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def settle(self) -> None:
        """Waits for the spend still being written to the store (at shutdown: none is lost)."""
        while self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def _add(self, key: str, cost: float) -> None:
        def add(value: dict[str, Any] | None) -> dict[str, Any]:
            return {"usd": float((value or {}).get("usd", 0.0)) + cost}

        try:
            # Atomic in the store (a WATCH/MULTI transaction on Redis), so replicas sharing the
            # store never lose each other's spend.
            await self.store.update(key, add, ttl_s=2 * _DAY_S)
        except Exception:  # a failing store must not break serving; the cache still counts
            logger.exception("could not store the spend of %s", key)
