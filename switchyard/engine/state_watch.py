"""What a request changed in its session's state, for ``POST /v1/decision``.

Layer: ``engine``.

A decide-only caller (a gateway with its own HTTP client) wants to see what routing did to the
session: a streak that grew, a hold that started, a latch. :func:`watch` puts a
:class:`StateChanges` in a context variable for one request; the engine wraps that request's
session store with :func:`watched`, which records the value each key had before the request
first touched it and the value it left behind. Proxied requests set no watch and get the store
itself back (one context-variable read).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

import orjson

from switchyard.protocol.session import StateStore, Updater

_watch: ContextVar[StateChanges | None] = ContextVar("switchyard_state_watch", default=None)


def _copy(value: dict[str, Any] | None) -> dict[str, Any] | None:
    # Routers may mutate what they read; a JSON round trip is a deep copy of JSON state.
    return None if value is None else dict(orjson.loads(orjson.dumps(value)))


class StateChanges:
    """Per state key: its value before the request first touched it, and after."""

    def __init__(self) -> None:
        self._before: dict[str, dict[str, Any] | None] = {}
        self._after: dict[str, dict[str, Any] | None] = {}

    def seen(self, key: str, value: dict[str, Any] | None) -> None:
        """Notes a value read (the *before* of a later write, when it is the first sight)."""
        if key not in self._before:
            self._before[key] = _copy(value)

    def wrote(self, key: str, value: dict[str, Any] | None) -> None:
        """Notes the value now stored (``None``: deleted)."""
        self._after[key] = _copy(value)

    def knows(self, key: str) -> bool:
        """Whether the value before this request is known."""
        return key in self._before

    def to_list(self) -> list[dict[str, Any]]:
        """``[{"key", "before", "after"}]`` for every key written with a different value, by key."""
        out = []
        for key in sorted(self._after):
            before, after = self._before.get(key), self._after[key]
            if before != after:
                out.append({"key": key, "before": before, "after": after})
        return out


class WatchedStore:
    """A store that reports reads and writes to a :class:`StateChanges` (same interface)."""

    def __init__(self, inner: StateStore, changes: StateChanges) -> None:
        self._inner = inner
        self._changes = changes

    async def _learn(self, key: str) -> None:
        if not self._changes.knows(key):
            self._changes.seen(key, await self._inner.get(key))

    async def get(self, key: str) -> dict[str, Any] | None:
        value = await self._inner.get(key)
        self._changes.seen(key, value)
        return value

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        await self._learn(key)
        await self._inner.set(key, value, ttl_s=ttl_s)
        self._changes.wrote(key, value)

    async def delete(self, key: str) -> None:
        await self._learn(key)
        await self._inner.delete(key)
        self._changes.wrote(key, None)

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        last: list[dict[str, Any] | None] = []

        def recorded(current: dict[str, Any] | None) -> dict[str, Any] | None:
            # A store with optimistic concurrency may call fn again: the last call's input is
            # the value this update replaced.
            last[:] = [_copy(current)]
            return fn(current)

        result = await self._inner.update(key, recorded, ttl_s=ttl_s)
        if last:
            self._changes.seen(key, last[0])
        self._changes.wrote(key, result)
        return result

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        return await self._inner.touch(key, ttl_s=ttl_s)


def watched(store: StateStore) -> StateStore:
    """``store`` itself, or a :class:`WatchedStore` over it while a watch is on (see :func:`watching`)."""
    changes = _watch.get()
    return store if changes is None else WatchedStore(store, changes)


def watch() -> tuple[StateChanges, Token[StateChanges | None]]:
    """Starts recording the state changes of the request routed next in this context; pass
    the token to :func:`unwatch` when it has been routed."""
    changes = StateChanges()
    return changes, _watch.set(changes)


def unwatch(token: Token[StateChanges | None]) -> None:
    """Ends the watch :func:`watch` started."""
    _watch.reset(token)
