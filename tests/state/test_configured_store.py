"""The engine serves from the store ``state:`` configures, with its limits (issue 44): an empty
configured store is still that store (a store has a length, so ``store or default`` would have
swapped a fresh, empty one for a 100,000-entry, one-hour default)."""

from __future__ import annotations

from typing import Any

from switchyard.api import Switchyard
from switchyard.engine.core import Engine
from switchyard.state.memory import MemoryStore

CONFIG: dict[str, Any] = {
    "llm_clients": {"up": {"base_url": "http://127.0.0.1:9/v1"}},
    "targets": {"t": {"client": "up", "model": "m"}},
    "routes": {"r": {"type": "passthrough", "target": "t"}},
    "state": {"backend": "memory", "max_entries": 3, "ttl_s": 60},
}


def test_an_empty_store_given_to_the_engine_is_the_one_it_uses() -> None:
    store = MemoryStore(max_entries=1)
    assert len(store) == 0
    assert Engine({}, {}, store=store).store is store


async def test_the_configured_limits_bound_the_engine_s_sessions() -> None:
    sy = Switchyard.from_config(CONFIG)
    try:
        engine = sy.engine
        assert engine.store is sy.state_store
        route_store = engine.routes["r"].store
        assert route_store is not None
        for i in range(10):
            await route_store.set(f"session-{i}", {"turn": i})
        assert isinstance(engine.store, MemoryStore) and len(engine.store) == 3  # state.max_entries
        assert await route_store.get("session-9") == {"turn": 9} and await route_store.get("session-0") is None
    finally:
        await sy.aclose()
