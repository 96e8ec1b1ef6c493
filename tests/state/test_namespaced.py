"""The one namespaced store view shared by the engine (per route) and cascades (per stage)."""

from __future__ import annotations

from typing import Any

from switchyard.protocol.session import NamespacedStore
from switchyard.state.memory import MemoryStore


async def test_every_operation_lands_under_the_prefix() -> None:
    inner = MemoryStore()
    view = NamespacedStore(inner, "stage1.")
    await view.set("s", {"n": 1})
    assert await inner.get("stage1.s") == {"n": 1}
    assert await inner.get("s") is None
    assert await view.get("s") == {"n": 1}

    def bump(cur: dict[str, Any] | None) -> dict[str, Any]:
        return {"n": (cur or {"n": 0})["n"] + 1}

    assert await view.update("s", bump) == {"n": 2}
    assert await inner.get("stage1.s") == {"n": 2}
    await view.delete("s")
    assert await inner.get("stage1.s") is None
    assert inner.keys() == []


async def test_two_prefixes_do_not_see_each_other() -> None:
    inner = MemoryStore()
    await NamespacedStore(inner, "a:").set("k", {"x": 1})
    assert await NamespacedStore(inner, "b:").get("k") is None


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


async def test_memory_touch_restarts_the_idle_expiry_and_keeps_the_value() -> None:
    clock = Clock()
    store = MemoryStore(default_ttl_s=10, clock=clock)
    await store.set("k", {"n": 1})
    await store.set("short", {"n": 2}, ttl_s=1)
    clock.now += 9
    assert await store.touch("k") is True  # 10 s from now, the store's default
    clock.now += 9  # 18 s after the write: alive only because of the touch
    assert await store.get("k") == {"n": 1}
    assert await store.touch("k", ttl_s=100) is True
    clock.now += 50
    assert await store.get("k") == {"n": 1}
    assert await store.touch("short") is False  # expired before the touch: stays gone
    assert await store.get("short") is None
    assert await store.touch("never-set") is False
    assert store.keys() == ["k"]


async def test_memory_touch_counts_as_use_for_the_lru() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("old", {"n": 1})
    await store.set("new", {"n": 2})
    assert await store.touch("old") is True
    await store.set("third", {"n": 3})  # evicts the least recently used: "new", not "old"
    assert sorted(store.keys()) == ["old", "third"]


async def test_namespaced_touch_lands_under_the_prefix() -> None:
    clock = Clock()
    inner = MemoryStore(default_ttl_s=10, clock=clock)
    view = NamespacedStore(inner, "stage1.")
    await view.set("s", {"n": 1})
    clock.now += 9
    assert await view.touch("s", ttl_s=30) is True
    assert await NamespacedStore(inner, "stage2.").touch("s") is False
    clock.now += 20
    assert await inner.get("stage1.s") == {"n": 1}
