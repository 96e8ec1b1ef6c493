"""The Redis state store against a real redis-server: values, TTLs, atomic updates, outages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from _redis import RedisServer

from switchyard.state import MemoryStore, NamespacedStore
from switchyard.state.redis_store import RedisStore

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path).start()
    try:
        yield srv
    finally:
        srv.stop()


def raw(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def bump(current: dict[str, Any] | None) -> dict[str, Any]:
    return {"n": (current or {}).get("n", 0) + 1}


async def test_values_live_under_the_prefix_with_the_ttl(server: RedisServer) -> None:
    store = RedisStore(server.url, prefix="sy:", default_ttl_s=60)
    await store.set("agent:s1:escalation", {"streak": 2, "latched": False})
    await store.set("agent:s1:affinity", {"target": "capable"}, ttl_s=5)
    assert await store.get("agent:s1:escalation") == {"streak": 2, "latched": False}
    direct = raw(server)
    assert sorted(direct.keys("*")) == ["sy:agent:s1:affinity", "sy:agent:s1:escalation"]
    assert 55_000 < direct.pttl("sy:agent:s1:escalation") <= 60_000
    assert 0 < direct.pttl("sy:agent:s1:affinity") <= 5_000
    await store.delete("agent:s1:affinity")
    assert await store.get("agent:s1:affinity") is None
    assert direct.keys("*") == ["sy:agent:s1:escalation"]
    assert store.status()["degraded"] is False
    await store.aclose()


async def test_a_second_store_sees_what_the_first_wrote(server: RedisServer) -> None:
    a, b = RedisStore(server.url), RedisStore(server.url)
    await NamespacedStore(a, "route:").set("s:slot", {"x": 1})
    assert await NamespacedStore(b, "route:").get("s:slot") == {"x": 1}
    assert await b.get("route:s:slot") == {"x": 1}
    await a.aclose()
    await b.aclose()


async def test_concurrent_updates_from_two_replicas_lose_nothing(server: RedisServer) -> None:
    # Two stores = two replicas with their own connections; 50 updates each, all at once.
    a, b = RedisStore(server.url, timeout_s=5), RedisStore(server.url, timeout_s=5)
    await asyncio.gather(*(s.update("k", bump) for _ in range(50) for s in (a, b)))
    assert await a.get("k") == {"n": 100}
    assert a.status()["degraded"] is False and b.status()["degraded"] is False
    await a.aclose()
    await b.aclose()


async def test_update_returning_none_deletes(server: RedisServer) -> None:
    store = RedisStore(server.url)
    await store.set("k", {"n": 1})
    assert await store.update("k", lambda _: None) is None
    assert raw(server).exists("switchyard:k") == 0
    await store.aclose()


async def test_memory_store_update_matches(server: RedisServer) -> None:
    memory = MemoryStore()
    await asyncio.gather(*(memory.update("k", bump) for _ in range(50)))
    assert await memory.get("k") == {"n": 50}


_STATS_CLIENT = {"info", "config|resetstat", "hello", "client|setinfo"}  # the counting client's own


def store_commands(server: RedisServer) -> dict[str, int]:
    """Calls per command since the last ``CONFIG RESETSTAT`` (``INFO commandstats``), less the
    ones of the client that asks."""
    with raw(server) as direct:
        stats = direct.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    return {name: n for name, n in calls.items() if name not in _STATS_CLIENT}


async def test_touch_restarts_the_expiry_with_one_command(server: RedisServer) -> None:
    store = RedisStore(server.url, prefix="sy:", default_ttl_s=60)
    await store.set("k", {"n": 1}, ttl_s=5)
    direct = raw(server)
    assert 0 < direct.pttl("sy:k") <= 5_000
    direct.config_resetstat()
    assert await store.touch("k") is True  # the store's default TTL
    assert store_commands(server) == {"pexpire": 1}  # no WATCH/GET/MULTI/SET/EXEC
    assert 55_000 < direct.pttl("sy:k") <= 60_000
    assert await store.touch("k", ttl_s=120) is True
    assert 115_000 < direct.pttl("sy:k") <= 120_000
    assert direct.get("sy:k") == '{"n":1}'  # the value is not rewritten
    assert await store.touch("missing") is False
    assert direct.exists("sy:missing") == 0  # a touch never creates a key
    await store.aclose()


async def test_touch_without_a_ttl_makes_the_key_permanent_like_set(server: RedisServer) -> None:
    store = RedisStore(server.url, default_ttl_s=None)
    await store.set("k", {"n": 1}, ttl_s=5)
    assert await store.touch("k") is True
    assert raw(server).pttl("switchyard:k") == -1
    assert await store.touch("k") is True  # already permanent: still reported as existing
    assert await store.touch("missing") is False
    await store.aclose()


async def test_touch_while_degraded_keeps_the_session_for_the_write_back(server: RedisServer) -> None:
    store = RedisStore(server.url, timeout_s=0.3, retry_interval_s=0.1)
    await store.set("k", {"n": 1})
    server.kill()
    assert await store.touch("k") is True  # answered from this process's copy
    assert store.degraded
    server.start()  # same port, empty data: Redis lost the session
    deadline = time.monotonic() + 15
    while store.degraded and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not store.degraded
    assert raw(server).get("switchyard:k") == '{"n":1}'
    await store.aclose()


async def test_outage_degrades_within_the_bounded_wait_and_resumes(server: RedisServer) -> None:
    store = RedisStore(server.url, timeout_s=0.3, retry_interval_s=0.1)
    await store.set("k", {"n": 1})
    server.kill()
    started = time.monotonic()
    assert await store.update("k", bump) == {"n": 2}  # from this process's own copy
    assert time.monotonic() - started < 5.0  # bounded (0.3 s per operation), margin for a busy machine
    status = store.status()
    assert status["degraded"] is True and status["outages"] == 1
    # While degraded, calls do not try Redis at all: every try would fail and count an error.
    errors = store.errors
    for _ in range(20):
        await store.update("k", bump)
    assert store.errors == errors
    assert await store.get("k") == {"n": 22}
    server.start()  # same port, empty data
    deadline = time.monotonic() + 15
    while store.degraded and time.monotonic() < deadline:
        await store.get("k")
        await asyncio.sleep(0.05)
    assert not store.degraded
    # What changed during the outage was written back, and new writes reach Redis again.
    assert raw(server).get("switchyard:k") == '{"n":22}'
    await store.update("k", bump)
    assert raw(server).get("switchyard:k") == '{"n":23}'
    await store.aclose()


async def test_a_hung_redis_costs_one_bounded_wait_then_nothing(server: RedisServer) -> None:
    store = RedisStore(server.url, timeout_s=0.2, retry_interval_s=0.1)
    await store.set("k", {"n": 1})
    server.pause()
    try:
        started = time.monotonic()
        assert await store.update("k", bump) == {"n": 2}
        # The bounded wait (0.2 s), then the local copy; the upper bound only says "not hung".
        assert 0.15 < time.monotonic() - started < 5.0
        assert store.degraded and "Timeout" in str(store.status()["last_error"])
        errors = store.errors
        assert await store.get("k") == {"n": 2}
        assert store.errors == errors  # degraded: Redis is not waited for again (no new timeout)
    finally:
        server.resume()
    deadline = time.monotonic() + 15
    while store.degraded and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not store.degraded
    # Redis still held what this process saw before the hang, so the change made meanwhile
    # was written back (compare-and-set) and later updates build on it.
    assert raw(server).get("switchyard:k") == '{"n":2}'
    assert await store.update("k", bump) == {"n": 3}
    await store.aclose()


async def test_write_back_never_overwrites_a_newer_value(server: RedisServer) -> None:
    store = RedisStore(server.url, timeout_s=0.3, retry_interval_s=0.1)
    server.kill()
    await store.set("k", {"who": "degraded replica"})
    assert store.degraded
    server.start()
    raw(server).set("switchyard:k", '{"who": "other replica"}')
    deadline = time.monotonic() + 15
    while store.degraded and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert await store.get("k") == {"who": "other replica"}
    await store.aclose()


def test_bad_url_fails_at_build_time() -> None:
    with pytest.raises(ValueError):
        RedisStore("http://localhost:6379")


def test_two_in_process_routers_share_a_latch_through_the_sync_api(server: RedisServer) -> None:
    # The sync API runs its own event loop thread: the store keeps one client per loop.
    import orjson
    from _configs import skeleton_config

    from switchyard.api import Switchyard
    from switchyard.testing import FakeModel, FakeUpstream, serve_fake
    from switchyard.testing.judges import escalation_brain

    fake = serve_fake(FakeUpstream([FakeModel("fake-judge", brain=escalation_brain(lambda view: True))]))
    config = skeleton_config(fake.port)
    config["targets"]["judge"] = {"client": "local", "model": "fake-judge"}
    config["routes"]["watched"] = {
        "type": "llm_classifier",
        "mode": "escalation",
        "confirmations": 1,
        "classifier_target": "judge",
        "strong_target": "capable",
        "weak_target": "efficient",
    }
    config["state"] = {"backend": "redis", "url": server.url, "timeout_s": 1.0}
    first, second = Switchyard.from_config(config), Switchyard.from_config(config)
    try:
        body = orjson.dumps({"model": "watched", "messages": [{"role": "user", "content": "go"}]})
        headers = {"x-switchyard-session-id": "sync"}
        one = first.run_sync(first.dispatch("POST", "/v1/chat/completions", body, headers))
        assert one.headers["x-switchyard-selected-model"] == "capable"  # latched at once
        two = second.run_sync(second.dispatch("POST", "/v1/chat/completions", body, headers))
        assert two.headers["x-switchyard-decision-source"] == "latched"
        assert first.state_status()["degraded"] is False
    finally:
        first.close()
        second.close()
        fake.stop()
    assert raw(server).exists("switchyard:watched:sync:escalation") == 1


async def test_daily_budgets_of_two_replicas_add_up_exactly(server: RedisServer) -> None:
    # Inbound-key budgets (server/auth.py) book each request's cost through the store's atomic
    # update, so 40 requests booked at once on two replicas all count.
    from switchyard.config.server import ApiKeyConfig
    from switchyard.engine.records import DecisionRecord
    from switchyard.server.auth import Budgets, KeyRing, hash_key

    ring = KeyRing([ApiKeyConfig(name="k", hash=hash_key("s"), budget_usd_per_day=100.0)])
    a, b = RedisStore(server.url, timeout_s=5), RedisStore(server.url, timeout_s=5)
    one, two = Budgets(a, ring.limits(), refresh_s=0), Budgets(b, ring.limits(), refresh_s=0)
    key = ring.find("s")
    assert key is not None
    for i in range(40):
        record = DecisionRecord(request_id=f"r{i}", route="r", router="passthrough")
        record.bind(key.caller)
        record.cost_usd = 0.25
        (one if i % 2 else two).record(record)
    await asyncio.gather(*one._writes, *two._writes)
    third = RedisStore(server.url)
    assert await Budgets(third, ring.limits(), refresh_s=0).spent("k") == pytest.approx(10.0)
    for store in (a, b, third):
        await store.aclose()
