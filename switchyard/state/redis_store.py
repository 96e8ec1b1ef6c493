"""Session state in Redis, shared by every replica, with a per-process fallback.

Layer: ``state`` — imports ``protocol`` and ``state.memory``; ``redis`` (redis-py's asyncio
client, the ``redis`` extra) is imported when the store is built, never by ``import switchyard``.

**Keys.** Every value is one JSON string under ``<prefix><route>:<session key>:<slot>``, e.g.
``switchyard:agent:3f2a…:escalation`` (``prefix`` from ``state.prefix``; the slot is the router's
own key: ``escalation``, ``affinity``, ``stage``, ``stage_judge`` …). Each write sets the key's
expiry to the TTL (``state.ttl_s`` unless the router gives its own), so an idle session vanishes
from Redis by itself. A request that only keeps its session alive calls :meth:`RedisStore.touch`:
one ``PEXPIRE``, no transaction.

**Races.** :meth:`RedisStore.update` is a read-modify-write under ``WATCH``/``MULTI``: when
another replica changed the key between the read and the write, the transaction aborts and is
retried on the new value. Within one process, updates of one key also queue on a local lock, so
50 concurrent turns of one session do not spin against each other.

**Degraded mode.** Every Redis operation waits at most ``state.timeout_s``. When Redis is down,
slow or answers an error, the store switches to this process's own copy of the state (a
:class:`~switchyard.state.memory.MemoryStore` that every read and write also fills while Redis
is healthy, so a replica continues from its last view of each session) and says so in
:meth:`status` (``/health``) and in metrics. The request goes on — a state backend never fails
a model call. While degraded, a background task pings Redis every ``state.retry_interval_s``;
when it answers, keys changed meanwhile are written back where Redis holds nothing or still
what this process last saw there (compare-and-set under ``WATCH``: a value another replica wrote
in the meantime wins) and the store resumes using Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import weakref
from typing import TYPE_CHECKING, Any

import orjson

from switchyard.protocol.redact import redact_url, redact_urls
from switchyard.protocol.session import Updater
from switchyard.state.memory import MemoryStore

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger("switchyard.state")

_MAX_DIRTY = 10_000


class RedisStore:
    """A :class:`~switchyard.protocol.session.StateStore` over Redis with a bounded wait.

    One instance may serve several event loops (the sync API runs its own): each loop gets its
    own client and connection pool.

    Args:
        url: Redis URL (``redis://host:6379/0``, ``rediss://`` for TLS, ``unix://`` sockets).
        prefix: Namespace put in front of every key.
        default_ttl_s: Expiry of a value when ``set`` gives none (``None``: never).
        timeout_s: Longest wait for one Redis operation before falling back.
        retry_interval_s: While degraded, seconds between pings.
        max_entries: Bound on the per-process copy.
        max_update_attempts: ``WATCH`` conflicts tolerated per update before it falls back.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "switchyard:",
        default_ttl_s: float | None = 3600.0,
        timeout_s: float = 0.25,
        retry_interval_s: float = 2.0,
        max_entries: int = 100_000,
        max_update_attempts: int = 100,
    ) -> None:
        # Imported here so a missing extra or a malformed URL fails at build time (ValueError),
        # not at the first request.
        from redis.asyncio.connection import parse_url

        parse_url(url)
        self.url = url
        # What logs and reports name: the URL without its password (docs/security.md).
        self.safe_url = redact_url(url)
        self.prefix = prefix
        self.default_ttl_s = default_ttl_s
        self.timeout_s = timeout_s
        self.retry_interval_s = retry_interval_s
        self.max_update_attempts = max_update_attempts
        self.local = MemoryStore(max_entries=max_entries, default_ttl_s=default_ttl_s)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Redis] = weakref.WeakKeyDictionary()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        self._reconnect: asyncio.Task[None] | None = None
        self._dirty: dict[str, dict[str, Any] | None] = {}
        self.degraded_since: float | None = None
        self.last_error: str | None = None
        self.outages = 0
        self.errors = 0
        self.conflicts = 0

    # -- status ------------------------------------------------------------------------------

    @property
    def degraded(self) -> bool:
        """Whether requests currently use the per-process copy instead of Redis."""
        return self.degraded_since is not None

    def status(self) -> dict[str, Any]:
        """The backend's state for ``/health`` and metrics."""
        return {
            "backend": "redis",
            "degraded": self.degraded,
            "degraded_for_s": None if self.degraded_since is None else round(time.monotonic() - self.degraded_since, 3),
            "last_error": self.last_error,
            "outages": self.outages,
            "errors": self.errors,
            "update_conflicts": self.conflicts,
        }

    # -- the store interface -----------------------------------------------------------------

    async def get(self, key: str) -> dict[str, Any] | None:
        client = self._client()
        if client is not None:
            try:
                raw = await asyncio.wait_for(client.get(self.prefix + key), self.timeout_s)
            except Exception as exc:  # any failure of the backend degrades, none fails the call
                self._degrade(exc)
            else:
                value = _decode(raw)
                if value is None:
                    await self.local.delete(key)
                else:
                    await self.local.set(key, value)
                return value
        return await self.local.get(key)

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        client = self._client()
        if client is not None:
            try:
                await asyncio.wait_for(
                    client.set(self.prefix + key, orjson.dumps(value), px=self._px(ttl_s)), self.timeout_s
                )
            except Exception as exc:
                self._degrade(exc)
            else:
                await self.local.set(key, value, ttl_s=ttl_s)
                return
        await self._mark_dirty(key)
        await self.local.set(key, value, ttl_s=ttl_s)

    async def delete(self, key: str) -> None:
        client = self._client()
        if client is not None:
            try:
                await asyncio.wait_for(client.delete(self.prefix + key), self.timeout_s)
            except Exception as exc:
                self._degrade(exc)
            else:
                await self.local.delete(key)
                return
        await self._mark_dirty(key)
        await self.local.delete(key)

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        async with self._lock(key):
            client = self._client()
            if client is not None:
                try:
                    new = await asyncio.wait_for(self._transact(client, key, fn, ttl_s), self.timeout_s)
                except Exception as exc:
                    self._degrade(exc)
                else:
                    if new is None:
                        await self.local.delete(key)
                    else:
                        await self.local.set(key, new, ttl_s=ttl_s)
                    return new
            await self._mark_dirty(key)
            return await self.local.update(key, fn, ttl_s=ttl_s)

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        client = self._client()
        if client is not None:
            try:
                existed = await asyncio.wait_for(self._expire(client, key, ttl_s), self.timeout_s)
            except Exception as exc:
                self._degrade(exc)
            else:
                # Keep the per-process copy in step with Redis, as ``get`` does.
                if existed:
                    await self.local.touch(key, ttl_s=ttl_s)
                else:
                    await self.local.delete(key)
                return existed
        # Degraded: like ``update``, a touched session is written back when Redis returns (Redis
        # may have expired it meanwhile, since nothing refreshed it there).
        await self._mark_dirty(key)
        return await self.local.touch(key, ttl_s=ttl_s)

    async def aclose(self) -> None:
        """Closes the current loop's client (and stops a reconnect task of this loop)."""
        loop = asyncio.get_running_loop()
        task, self._reconnect = self._reconnect, None
        if task is not None and task.get_loop() is loop:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        client = self._clients.pop(loop, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _transact(self, client: Redis, key: str, fn: Updater, ttl_s: float | None) -> dict[str, Any] | None:
        from redis.exceptions import WatchError

        name = self.prefix + key
        async with client.pipeline(transaction=True) as pipe:
            for attempt in range(self.max_update_attempts):
                try:
                    await pipe.watch(name)
                    new = fn(_decode(await pipe.get(name)))
                    pipe.multi()  # type: ignore[no-untyped-call]
                    if new is None:
                        pipe.delete(name)
                    else:
                        pipe.set(name, orjson.dumps(new), px=self._px(ttl_s))
                    await pipe.execute()
                    return new
                except WatchError:
                    # Another replica wrote between our read and our write: read again. A short
                    # random pause spreads replicas that collided on one session.
                    self.conflicts += 1
                    await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise RuntimeError(f"{self.max_update_attempts} conflicting writes to {name!r} in a row")

    async def _expire(self, client: Redis, key: str, ttl_s: float | None) -> bool:
        name = self.prefix + key
        px = self._px(ttl_s)
        if px is not None:
            return bool(await client.pexpire(name, px))
        # No TTL: like ``SET`` without ``PX``, the key then lives until deleted. ``PERSIST`` answers
        # 0 for a key that has no expiry too, so ``EXISTS`` rides along (one round trip still).
        async with client.pipeline(transaction=False) as pipe:
            pipe.persist(name)
            pipe.exists(name)
            _, exists = await pipe.execute()
        return bool(exists)

    def _px(self, ttl_s: float | None) -> int | None:
        ttl = ttl_s if ttl_s is not None else self.default_ttl_s
        return None if ttl is None else max(1, round(ttl * 1000))

    def _client(self) -> Redis | None:
        """This loop's client, or ``None`` while degraded (a reconnect task is then running)."""
        loop = asyncio.get_running_loop()
        if self.degraded_since is not None:
            self._ensure_reconnect(loop)
            return None
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._new_client()
        return client

    def _new_client(self) -> Redis:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # No retries inside redis-py: the bounded wait is ours, and a retry loop there would
        # spend it on a server that is down.
        return Redis.from_url(
            self.url,
            socket_timeout=self.timeout_s,
            socket_connect_timeout=self.timeout_s,
            retry=Retry(NoBackoff(), 0),
        )

    def _lock(self, key: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        locks = self._locks.get(loop)
        if locks is None:
            locks = self._locks[loop] = {}
        lock = locks.get(key)
        if lock is None:
            if len(locks) > 1024:  # drop idle locks so the map stays small
                for name in [n for n, held in locks.items() if not held.locked()]:
                    del locks[name]
            lock = locks[key] = asyncio.Lock()
        return lock

    def _degrade(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = _error_text(exc)
        if self.degraded_since is None:
            self.degraded_since = time.monotonic()
            self.outages += 1
            logger.warning(
                "state backend redis at %s unavailable (%s); serving with per-process state until it answers",
                self.safe_url,
                self.last_error,
            )
        with contextlib.suppress(RuntimeError):
            self._ensure_reconnect(asyncio.get_running_loop())

    async def _mark_dirty(self, key: str) -> None:
        """Remembers, before its first change while degraded, the value ``key`` had in Redis as
        far as this process knows (its copy mirrors Redis while Redis is healthy)."""
        if key not in self._dirty and len(self._dirty) < _MAX_DIRTY:
            self._dirty[key] = await self.local.get(key)

    def _ensure_reconnect(self, loop: asyncio.AbstractEventLoop) -> None:
        task = self._reconnect
        if task is not None and not task.done():
            return
        self._reconnect = loop.create_task(self._reconnect_loop(loop))

    async def _reconnect_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pings until Redis answers, writes back what changed meanwhile, then resumes."""
        while self.degraded_since is not None:
            await asyncio.sleep(self.retry_interval_s)
            old = self._clients.pop(loop, None)
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.aclose()
            client = self._new_client()
            try:
                await asyncio.wait_for(client.ping(), self.timeout_s)
                # Requests keep using the local copy while this runs; repeat for the keys they
                # changed meanwhile, so none is left behind when shared state resumes below
                # (no await between the last check and the switch).
                for _ in range(10):
                    await self._write_back(client)
                    if not self._dirty:
                        break
                if self._dirty:
                    raise RuntimeError("state kept changing during the write-back")
            except Exception as exc:
                self.last_error = _error_text(exc)
                with contextlib.suppress(Exception):
                    await client.aclose()
                continue
            self._clients[loop] = client
            logger.warning(
                "state backend redis at %s answers again after %.1f s; resuming shared state",
                self.safe_url,
                time.monotonic() - self.degraded_since,
            )
            self.degraded_since = None

    async def _write_back(self, client: Redis) -> None:
        """Writes back the keys changed while degraded — each only where Redis holds nothing or
        still what this process last saw there (compare-and-set), so a value another replica
        wrote during the outage wins, while a restarted, empty Redis gets this state back."""
        from redis.exceptions import WatchError

        dirty, self._dirty = self._dirty, {}
        try:
            for key in list(dirty):
                name = self.prefix + key
                value = await self.local.get(key)
                async with client.pipeline(transaction=True) as pipe:
                    await asyncio.wait_for(pipe.watch(name), self.timeout_s)
                    current = _decode(await asyncio.wait_for(pipe.get(name), self.timeout_s))
                    # Redis empty (restarted, or the key expired) or unchanged since we saw it.
                    if (current is None or current == dirty[key]) and current != value:
                        pipe.multi()  # type: ignore[no-untyped-call]
                        if value is None:
                            pipe.delete(name)
                        else:
                            pipe.set(name, orjson.dumps(value), px=self._px(None))
                        with contextlib.suppress(WatchError):  # written meanwhile: that value wins
                            await asyncio.wait_for(pipe.execute(), self.timeout_s)
                    elif current is not None and current != value:
                        await self.local.set(key, current)  # another replica's value wins here too
                del dirty[key]
        finally:
            for key, base in dirty.items():
                self._dirty.setdefault(key, base)


def _error_text(exc: BaseException) -> str:
    """An error for ``last_error`` and the log: a URL it quotes loses its credentials."""
    return redact_urls(f"{type(exc).__name__}: {exc}")[:300]


def _decode(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        logger.warning("ignoring a state value that is not JSON")
        return None
    return value if isinstance(value, dict) else None
