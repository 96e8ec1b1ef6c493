"""A caller's own tight ``x-switchyard-timeout`` is not a failure of the target (issue 23): four
requests at 50 ms must not open the circuit breaker that every other caller depends on, while
the target's own configured limits still count."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def slow() -> Iterator[Any]:
    server = serve_fake(FakeUpstream([FakeModel("slow", first_byte_s=0.4), FakeModel("drip", per_chunk_s=0.2)]))
    try:
        yield server
    finally:
        server.stop()


def config(port: int, *, read: float = 5.0) -> dict[str, Any]:
    client = {
        "base_url": f"http://127.0.0.1:{port}/v1",
        "max_retries": 0,
        "timeout": {"connect": 2, "read": read, "total": 10},
        "circuit_breaker": {"failures": 3, "cooldown_s": 60},
    }
    return {
        "llm_clients": {"up": client},
        "targets": {"slow": {"client": "up", "model": "slow"}, "drip": {"client": "up", "model": "drip"}},
        "routes": {
            "slow": {"type": "passthrough", "target": "slow"},
            "drip": {"type": "passthrough", "target": "drip"},
        },
    }


async def ask(sy: Switchyard, route: str, headers: dict[str, str], *, stream: bool = False) -> int:
    body = orjson.dumps({"model": route, "messages": [{"role": "user", "content": "hi"}], "stream": stream})
    reply = await sy.dispatch("POST", "/v1/chat/completions", body, {"content-type": "application/json", **headers})
    if reply.stream is not None:
        async for _ in reply.stream:
            pass
    return reply.status


@pytest.mark.parametrize("limit", ["0.05", "read=0.05", "total=0.05, read=0.05"])
async def test_tight_caller_timeouts_leave_the_breaker_closed(slow: Any, limit: str) -> None:
    sy = Switchyard.from_config(config(slow.port))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        for _ in range(4):
            assert await ask(sy, "slow", {"x-switchyard-timeout": limit}) == 504
        assert sy.stats()["targets"].get("slow", {}).get("state", "closed") == "closed"
        assert await ask(sy, "slow", {}) == 200  # everyone else is still served
        assert not records[-1].skipped
    finally:
        await sy.aclose()


async def test_a_caller_deadline_mid_stream_leaves_the_breaker_closed(slow: Any) -> None:
    sy = Switchyard.from_config(config(slow.port))
    try:
        for _ in range(4):
            await ask(sy, "drip", {"x-switchyard-timeout": "0.3"}, stream=True)
        assert sy.stats()["targets"].get("drip", {}).get("state", "closed") == "closed"
        assert await ask(sy, "drip", {}, stream=True) == 200
    finally:
        await sy.aclose()


async def test_the_targets_own_read_limit_still_opens_it(slow: Any) -> None:
    sy = Switchyard.from_config(config(slow.port, read=0.05))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        for _ in range(3):
            assert await ask(sy, "slow", {}) == 504
        assert sy.stats()["targets"]["slow"]["state"] == "open"
        assert await ask(sy, "slow", {}) == 503
        assert records[-1].skipped[0].reason == "circuit_open"
    finally:
        await sy.aclose()
