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
