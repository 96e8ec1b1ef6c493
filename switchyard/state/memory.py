"""In-process session state: bounded, with idle expiry.

Layer: ``state`` — imports ``protocol`` only.
"""

from __future__ import annotations

import copy
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from switchyard.protocol.session import Updater


class MemoryStore:
    """An LRU map with per-entry idle TTL.

    Unlike a "drop an arbitrary key when full" map, the least recently *used* session is the
    one evicted, so an active long session is never dropped in favour of a stale one.

    Args:
        max_entries: Upper bound on stored sessions.
        default_ttl_s: Idle lifetime of an entry when ``set`` gives none (``None``: forever).
        clock: Monotonic seconds that expiries are measured in (tests pass a fake one).
    """

    def __init__(
        self,
        max_entries: int = 100_000,
        default_ttl_s: float | None = 3600.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._data: OrderedDict[str, tuple[float | None, dict[str, Any]]] = OrderedDict()
        self._max = max_entries
        self._ttl = default_ttl_s
        self._clock = clock

    def __len__(self) -> int:
        return len(self._data)

    async def get(self, key: str) -> dict[str, Any] | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if expires is not None and expires < self._clock():
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return _copy(value)

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        self._data[key] = (self._expiry(ttl_s), _copy(value))
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        item = self._data.get(key)
        if item is None:
            return False
        expires, value = item
        if expires is not None and expires < self._clock():
            del self._data[key]
            return False
        self._data[key] = (self._expiry(ttl_s), value)  # the stored copy itself: no copy needed
        self._data.move_to_end(key)
        return True

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        # No await between the read and the write: on one event loop nothing can interleave.
        new = fn(await self.get(key))
        if new is None:
            self._data.pop(key, None)
        else:
            await self.set(key, new, ttl_s=ttl_s)
        return new

    def _expiry(self, ttl_s: float | None) -> float | None:
        ttl = ttl_s if ttl_s is not None else self._ttl
        return None if ttl is None else self._clock() + ttl

    def keys(self) -> list[str]:
        """Keys currently held (expired ones included until they are next read)."""
        return list(self._data)


_SCALARS = (str, int, float, bool, type(None))


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    """A copy the caller cannot change the stored value through: a flat dict of scalars (the
    common per-session state, read and written on every turn) is copied in one step, anything
    nested deeply."""
    for item in value.values():
        if not isinstance(item, _SCALARS):
            return copy.deepcopy(value)
    return dict(value)
