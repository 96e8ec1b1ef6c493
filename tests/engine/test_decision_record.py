"""One decision record per request: tokens, USD cost from prices, overhead, attempts, identity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switchyard.engine.records import DecisionRecord, JsonlSink, log_sink
from switchyard.protocol.errors import UpstreamStatusError
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.targets import Price

Rig = Any

USAGE = Usage(input_tokens=1_000, output_tokens=400, cache_read_tokens=600, reasoning_tokens=150)


def answer(usage: Usage = USAGE) -> ChatResponse:
    return ChatResponse(id="r", model="m", content=[TextPart(text="ok")], usage=usage)


def test_price_cost_formula() -> None:
    price = Price(input_per_mtok=10, output_per_mtok=30, cached_input_per_mtok=1, cache_write_per_mtok=12.5)
    usage = Usage(input_tokens=1_000, output_tokens=400, cache_read_tokens=600, cache_creation_tokens=100)
    # 300 uncached * 10 + 600 cached * 1 + 100 written * 12.5 + 400 out * 30, per million
    assert price.cost(usage) == pytest.approx((3000 + 600 + 1250 + 12000) / 1e6)
    # Cached and written tokens default to the input price.
    assert Price(input_per_mtok=2).cost(usage) == pytest.approx(2000 / 1e6)


async def test_record_fields_for_a_served_request(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [UpstreamStatusError("busy", upstream_status=503)], "pricey": [answer()]})
    req = ChatRequest(
        model="pair",
        messages=[Message.of("user", "a"), Message.of("assistant", "b"), Message.of("user", "c")],
    )
    done = await r.engine.complete(req, {"X-Switchyard-Session-Id": "s-1", "x-switchyard-request-id": "req-42"})
    (record,) = r.records
    assert record is done.record
    assert record.request_id == "req-42"
    assert (record.route, record.router, record.source) == ("pair", "random", "random")
    assert record.session_id == "s-1" and record.turn_index == 1
    assert (record.selected, record.selected_model) == ("pricey", "m-pricey")
    assert (record.input_tokens, record.output_tokens) == (1_000, 400)
    assert (record.cache_read_tokens, record.reasoning_tokens) == (600, 150)
    # pricey: 400 uncached * 10 + 600 cached * 1 + 400 out * 30
    assert record.cost_usd == pytest.approx((4000 + 600 + 12000) / 1e6)
    assert record.total_cost_usd == record.cost_usd
    assert 0 < record.overhead_ms <= record.duration_ms
    assert [a.target for a in record.attempts] == ["cheap", "pricey"]
    assert all(a.elapsed_ms >= 0 for a in record.attempts)
    assert record.stream is False and record.inbound_format is None
    assert record.status == 200


async def test_record_serialises_to_one_json_line(rig: Callable[..., Rig], tmp_path: Path) -> None:
    r = rig({"cheap": [answer()]})
    sink = JsonlSink(tmp_path / "logs" / "decisions.jsonl")
    r.engine.sinks.append(sink)
    await r.engine.complete(ChatRequest(model="solo", messages=[Message.of("user", "x")]))
    await r.engine.complete(ChatRequest(model="solo", messages=[Message.of("user", "y")]))
    sink.close()
    lines = (tmp_path / "logs" / "decisions.jsonl").read_bytes().splitlines()
    assert len(lines) == 2
    row = json.loads(lines[0])
    assert row["route"] == "solo" and row["selected"] == "cheap"
    assert row["attempts"][0]["target"] == "cheap" and row["attempts"][0]["ok"] is True
    assert row["router_cost"]["calls"] == 0


def test_json_line_matches_the_dict() -> None:
    from switchyard.engine.records import Attempt

    record = DecisionRecord(
        request_id="r",
        route="x",
        router="random",
        candidates=["a", "b"],
        attempts=[Attempt("a", False, 1.5, "boom", 503), Attempt("b", True, 2.0)],
        details={"signals": {"len": 3}, 7: "non-str key"},
    )
    record.router_cost.calls = 2
    assert json.loads(record.to_json()) == json.loads(json.dumps(record.to_dict(), default=str))
    assert b"\n" not in record.to_json()


def test_log_sink_is_quiet_unless_info_is_on(caplog: pytest.LogCaptureFixture) -> None:
    record = DecisionRecord(request_id="r", route="x", router="passthrough")
    with caplog.at_level("WARNING", logger="switchyard.decisions"):
        log_sink(record)
    assert caplog.records == []
    with caplog.at_level("INFO", logger="switchyard.decisions"):
        log_sink(record)
    assert json.loads(caplog.records[0].getMessage())["request_id"] == "r"


async def test_a_broken_sink_does_not_break_serving(rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture) -> None:
    r = rig({"cheap": [answer()]})

    def broken(record: DecisionRecord) -> None:
        raise RuntimeError("disk full")

    r.engine.sinks.insert(0, broken)
    done = await r.engine.complete(ChatRequest(model="solo", messages=[Message.of("user", "x")]))
    assert done.response.text == "ok"
    assert len(r.records) == 1
    assert "decision sink failed" in caplog.text


async def test_router_model_calls_are_booked_as_router_cost(rig: Callable[..., Rig]) -> None:
    from switchyard.routers.base import Decision

    class Judge:
        async def route(self, request: ChatRequest, ctx: Any, call: Any) -> Decision:
            verdict = await call(["cheap", "spare"], request)
            return Decision(candidates=("pricey",), source="llm-classifier", reason=verdict.text)

    r = rig(
        {
            "cheap": [UpstreamStatusError("down", upstream_status=500)],
            "spare": [answer(Usage(input_tokens=200, output_tokens=10))],
            "pricey": [answer(Usage(input_tokens=100, output_tokens=100))],
        }
    )
    r.engine.routes["pair"].router = Judge()
    done = await r.engine.complete(ChatRequest(model="pair", messages=[Message.of("user", "x")]))
    cost = done.record.router_cost
    assert (cost.calls, cost.failures) == (2, 1)
    assert (cost.input_tokens, cost.output_tokens) == (200, 10)
    assert cost.cost_usd == pytest.approx((200 * 5 + 10 * 5) / 1e6)
    assert done.record.cost_usd == pytest.approx((100 * 10 + 100 * 30) / 1e6)
    assert done.record.total_cost_usd == pytest.approx(cost.cost_usd + done.record.cost_usd)
    assert done.record.source == "llm-classifier" and done.record.reason == "ok"


async def test_answer_produced_while_routing_is_not_called_again(rig: Callable[..., Rig]) -> None:
    from switchyard.routers.base import Decision

    class WeakFirst:
        async def route(self, request: ChatRequest, ctx: Any, call: Any) -> Decision:
            got = await call("cheap", request)
            return Decision(candidates=("cheap",), response=got, answered_by="cheap", source="weak-first")

    r = rig({"cheap": [answer(Usage(input_tokens=50, output_tokens=20))]})
    r.engine.routes["solo"].router = WeakFirst()
    done = await r.engine.complete(ChatRequest(model="solo", messages=[Message.of("user", "x")]))
    assert r.backend.targets_called() == ["cheap"]
    assert done.record.selected == "cheap"
    assert done.record.input_tokens == 50
    assert done.record.cost_usd == pytest.approx((50 * 1 + 20 * 2) / 1e6)
    # And streamed: the answer is replayed as events, still without a second call.
    events = await r.engine.stream(ChatRequest(model="solo", messages=[Message.of("user", "x")], stream=True))
    assert (await events.collect()).text == "ok"
    assert r.backend.targets_called() == ["cheap", "cheap"]
