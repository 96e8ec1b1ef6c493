"""A stream's success reaches the circuit breaker only at its end, so mid-stream failures add up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchyard.protocol.errors import UpstreamConnectionError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.protocol.stream import MessageStart, MessageStop, StreamError, TextDelta, UsageDelta

Rig = Any

CLIENTS = {
    "up": {
        "format": "openai_chat",
        "base_url": "http://127.0.0.1:9/v1",
        "max_retries": 0,
        "circuit_breaker": {"failures": 2, "cooldown_s": 60},
    }
}


def request() -> ChatRequest:
    return ChatRequest(model="solo", messages=[Message.of("user", "hi")], stream=True)


def good() -> list[Any]:
    return [
        MessageStart(id="s", model="m"),
        TextDelta(text="ok"),
        MessageStop(stop_reason="end_turn"),
        UsageDelta(usage=Usage()),
    ]


async def test_a_target_that_always_breaks_mid_stream_opens_its_breaker(rig: Callable[..., Rig]) -> None:
    broken = [MessageStart(id="s", model="m"), TextDelta(text="par"), UpstreamConnectionError("reset")]
    r = rig({"cheap": [broken], "spare": [good()]}, llm_clients=CLIENTS)
    for _ in range(2):
        events = await r.engine.stream(request())
        assert isinstance([e async for e in events][-1], StreamError)
    assert r.engine.health.state("cheap") == "open"
    events = await r.engine.stream(request())
    assert (await events.collect()).text == "ok"
    assert [(s.target, s.reason) for s in r.records[-1].skipped] == [("cheap", "circuit_open")]


async def test_a_clean_stream_resets_the_count(rig: Callable[..., Rig]) -> None:
    broken = [MessageStart(id="s", model="m"), TextDelta(text="par"), UpstreamConnectionError("reset")]
    r = rig({"cheap": [broken, good(), broken]}, llm_clients=CLIENTS)
    for _ in range(3):
        events = await r.engine.stream(request())
        _ = [e async for e in events]
    assert r.engine.health.state("cheap") == "closed"  # failure, success, failure: never 2 in a row


async def test_a_caller_leaving_early_says_nothing_about_the_upstream(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [good()]}, llm_clients=CLIENTS)
    r.engine.health.failed("cheap", r.engine.targets["cheap"].reliability.breaker)
    events = await r.engine.stream(request())
    await events.aclose()
    assert r.records[-1].details.get("closed_early") is True
    assert r.records[-1].status == 499 and r.engine.stats()["counters"]["cancelled"] == 1
    assert r.engine.stats()["targets"]["cheap"]["consecutive_failures"] == 1
