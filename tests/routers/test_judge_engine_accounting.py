"""Judge routes inside the engine: overhead booking, answered decisions, sources, hash affinity."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _routing_helpers import capability, escalate

from switchyard.config.build import build_engine
from switchyard.config.load import load_config
from switchyard.engine.core import Engine
from switchyard.protocol.call import CallOptions
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import StreamEvent, TextDelta, response_to_events
from switchyard.protocol.targets import TargetInfo

PRICES = {
    "judge": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
    "weak": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
    "strong": {"input_per_mtok": 15.0, "output_per_mtok": 75.0},
}
USAGE = {"judge": Usage(input_tokens=1000, output_tokens=50), "weak": Usage(input_tokens=800, output_tokens=100)}


class Backend:
    """An in-memory upstream: answers per model, records what it was asked."""

    def __init__(self, answers: dict[str, Callable[[ChatRequest], str]], delays: dict[str, float]) -> None:
        self.answers = answers
        self.delays = delays
        self.asked: list[str] = []

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        self.asked.append(target.name)
        await asyncio.sleep(self.delays.get(target.name, 0.0))
        usage = USAGE.get(target.name, Usage(input_tokens=500, output_tokens=200))
        text = self.answers.get(target.name, lambda r: f"answer from {target.name}")(request)
        return ChatResponse(id="x", model=target.model, content=[TextPart(text=text)], usage=usage)

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request, target, options)

        async def events() -> AsyncIterator[StreamEvent]:
            for event in response_to_events(response):
                yield event

        return events()

    async def aclose(self) -> None:
        return None


def engine(
    routes: dict[str, Any], answers: dict[str, Callable[[ChatRequest], str]], **delays: float
) -> tuple[Engine, Backend]:
    backend = Backend(answers, delays)
    config = {
        "llm_clients": {"mem": {"base_url": "http://127.0.0.1:9/v1"}},
        "targets": {name: {"client": "mem", "model": f"m-{name}", "price": price} for name, price in PRICES.items()},
        "routes": routes,
    }
    return build_engine(load_config(config), backend_factory=lambda *a: backend), backend


CLASSIFY = {
    "type": "llm_classifier",
    "classifier_target": "judge",
    "strong_target": "strong",
    "weak_target": "weak",
    "base_threshold": 0.5,
}
ESCALATE = {
    "type": "llm_classifier",
    "mode": "escalation",
    "classifier_target": "judge",
    "strong_target": "strong",
    "weak_target": "weak",
    "confirmations": 2,
}


def req(route: str, text: str = "Fix the bug", stream: bool = False) -> ChatRequest:
    return ChatRequest(model=route, messages=[Message.of("user", text)], stream=stream)


def cost(name: str, usage: Usage) -> float:
    p = PRICES[name]
    return (usage.input_tokens * p["input_per_mtok"] + usage.output_tokens * p["output_per_mtok"]) / 1e6


async def test_classifier_judge_is_booked_as_router_overhead() -> None:
    eng, backend = engine({"c": CLASSIFY}, {"judge": lambda r: capability(0.9)})
    done = await eng.complete(req("c"), {"x-switchyard-session-id": "s"})
    rec = done.record
    assert (rec.source, rec.selected, backend.asked) == ("llm-classifier", "weak", ["judge", "weak"])
    rc = rec.router_cost
    assert (rc.calls, rc.input_tokens, rc.output_tokens, rc.failures) == (1, 1000, 50, 0)
    assert rc.cost_usd == pytest.approx(cost("judge", USAGE["judge"]))
    assert rc.elapsed_ms > 0
    assert rec.total_cost_usd == pytest.approx(rec.cost_usd + rc.cost_usd)
    assert rec.score == pytest.approx(0.1)


async def test_judge_deadline_is_booked_as_a_failed_call() -> None:
    eng, _ = engine({"c": {**CLASSIFY, "judge_timeout_s": 0.05}}, {"judge": lambda r: capability(0.9)}, judge=5.0)
    rec = (await eng.complete(req("c"))).record
    assert (rec.source, rec.selected, rec.details["judge_failure"]) == ("fail_open", "strong", "timeout")
    assert (rec.router_cost.calls, rec.router_cost.failures) == (1, 1)
    assert 40 <= rec.router_cost.elapsed_ms < 4500  # the 0.05 s judge timeout, not the 5 s judge


async def test_served_efficient_answer_is_not_counted_twice() -> None:
    eng, backend = engine({"e": ESCALATE}, {"judge": lambda r: escalate(False)}, weak=0.05)
    done = await eng.complete(req("e"), {"x-switchyard-session-id": "s"})
    rec = done.record
    assert (rec.source, rec.selected, done.response.text) == ("escalation", "weak", "answer from weak")
    assert backend.asked == ["weak", "judge"]
    # The efficient call is the answer (cost_usd), the judge is the overhead (router_cost).
    assert rec.cost_usd == pytest.approx(cost("weak", USAGE["weak"]))
    assert (rec.router_cost.calls, rec.router_cost.input_tokens) == (1, 1000)
    assert rec.router_cost.cost_usd == pytest.approx(cost("judge", USAGE["judge"]))
    assert rec.details["answer_elapsed_ms"] >= 50
    assert rec.overhead_ms < rec.duration_ms - 40


async def test_latch_turn_books_the_discarded_efficient_turn_as_overhead() -> None:
    eng, backend = engine({"e": {**ESCALATE, "confirmations": 1}}, {"judge": lambda r: escalate(True)})
    rec = (await eng.complete(req("e"), {"x-switchyard-session-id": "s"})).record
    assert (rec.source, rec.selected) == ("escalation", "strong")
    assert backend.asked == ["weak", "judge", "strong"]
    assert rec.router_cost.calls == 2
    assert rec.router_cost.cost_usd == pytest.approx(cost("weak", USAGE["weak"]) + cost("judge", USAGE["judge"]))
    later = (await eng.complete(req("e", "next"), {"x-switchyard-session-id": "s"})).record
    assert (later.source, later.router_cost.calls) == ("latched", 0)


async def test_streaming_caller_gets_the_buffered_answer_as_a_stream() -> None:
    eng, _ = engine({"e": ESCALATE}, {"judge": lambda r: escalate(False)})
    events = await eng.stream(req("e", stream=True), {"x-switchyard-session-id": "s"})
    text = "".join([e.text async for e in events if isinstance(e, TextDelta)])
    assert text == "answer from weak"
    assert (events.record.source, events.record.selected) == ("escalation", "weak")


async def test_route_level_message_hash_fallback_keys_affinity() -> None:
    route = {**CLASSIFY, "classify_trigger": "new_session", "message_hash_fallback": True}
    eng, backend = engine({"c": route}, {"judge": lambda r: capability(0.9)})
    first = (await eng.complete(req("c", "same opening"))).record
    second = (await eng.complete(req("c", "same opening"))).record
    other = (await eng.complete(req("c", "another task"))).record
    assert [r.source for r in (first, second, other)] == ["llm-classifier", "affinity", "llm-classifier"]
    assert first.session_id is not None and first.session_id.startswith("h:")
    assert backend.asked.count("judge") == 2


async def test_decide_only_makes_judge_calls() -> None:
    eng, backend = engine({"c": CLASSIFY}, {"judge": lambda r: capability(0.2, "UNC-1", "uncertain")})
    rec = await eng.decide(req("c"))
    assert (rec.selected, rec.source, backend.asked) == ("strong", "llm-classifier", ["judge"])
    assert json.loads(json.dumps(rec.details))["verdict"]["p_solve"] == 0.2
