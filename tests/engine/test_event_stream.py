"""Streamed answers: usage and cost recorded at the end, failures mid-stream end with an error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from switchyard.protocol.errors import ErrorInfo, UpstreamConnectionError, UpstreamTimeoutError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.protocol.stream import (
    MessageStart,
    MessageStop,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)
from switchyard.wire.sse import SSEParser

Rig = Any
REQ = ChatRequest(model="solo", messages=[Message.of("user", "x")], stream=True)
USAGE = Usage(input_tokens=2_000, output_tokens=500, cache_read_tokens=1_000)


def good_stream() -> list[StreamEvent | Exception | float]:
    return [
        MessageStart(id="s", model="m-cheap", created=1),
        TextDelta(text="Hello"),
        TextDelta(text=" world"),
        ToolCallDelta(index=0, id="c", name="f", arguments='{"a":'),
        ToolCallDelta(index=0, arguments="1}"),
        UsageDelta(usage=USAGE),
        MessageStop(stop_reason="tool_use"),
    ]


async def test_usage_and_cost_are_recorded_when_the_stream_ends(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [good_stream()]})
    events = await r.engine.stream(REQ)
    assert r.records == [], "the record is written at the end of the stream, not before"
    got = [e async for e in events]
    assert isinstance(got[-1], MessageStop)
    (record,) = r.records
    assert record is events.record
    assert (record.input_tokens, record.output_tokens, record.cache_read_tokens) == (2_000, 500, 1_000)
    # cheap: 1000 uncached * 1 + 1000 cached * 1 (defaults to input price) + 500 * 2
    assert record.cost_usd == pytest.approx((1000 + 1000 + 1000) / 1e6)
    assert record.stream is True and record.error is None and record.status == 200
    assert record.duration_ms >= record.overhead_ms > 0
    assert r.backend.closed_streams == 1


async def test_collect_accumulates_the_answer(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [good_stream()]})
    response = await (await r.engine.stream(REQ)).collect()
    assert response.text == "Hello world"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("c", "f", '{"a":1}')]
    assert response.usage == USAGE and response.stop_reason == "tool_use"


@pytest.mark.parametrize(
    "failure",
    [UpstreamConnectionError("cheap: connection reset"), UpstreamTimeoutError("cheap: read timeout")],
    ids=["reset", "timeout"],
)
async def test_mid_stream_failure_ends_with_an_error_event(rig: Callable[..., Rig], failure: Exception) -> None:
    r = rig({"cheap": [[MessageStart(id="s"), TextDelta(text="partial"), failure]], "spare": [good_stream()]})
    got = [e async for e in await r.engine.stream(REQ)]
    assert [type(e).__name__ for e in got] == ["MessageStart", "TextDelta", "StreamError"]
    assert not any(isinstance(e, MessageStop) for e in got)
    error = got[-1]
    assert isinstance(error, StreamError) and error.error.status == failure.status  # type: ignore[attr-defined]
    record = r.records[-1]
    assert record.error == str(failure) and record.status == failure.status  # type: ignore[attr-defined]
    assert record.details["mid_stream_failure"] is True
    # Content already reached the caller: no fallback after the first byte.
    assert r.backend.targets_called() == ["cheap"]


async def test_in_band_error_mid_stream_is_recorded(rig: Callable[..., Rig]) -> None:
    error = StreamError(error=ErrorInfo(status=500, message="engine died"))
    r = rig({"cheap": [[TextDelta(text="partial"), UsageDelta(usage=Usage(input_tokens=7)), error]]})
    got = [e async for e in await r.engine.stream(REQ)]
    assert got[-1] == error
    record = r.records[-1]
    assert record.error == "engine died" and record.status == 500 and record.input_tokens == 7


async def test_unexpected_exception_mid_stream_still_ends_with_an_error_event(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [[TextDelta(text="partial"), RuntimeError("decoder bug")]]})
    got = [e async for e in await r.engine.stream(REQ)]
    assert isinstance(got[-1], StreamError)
    assert got[-1].error.status == 500 and "RuntimeError" in got[-1].error.message  # ours, not upstream
    assert r.records[-1].details["mid_stream_failure"] is True


async def test_closing_early_closes_upstream_and_writes_one_record(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [[TextDelta(text="a"), 0.0, TextDelta(text="b"), MessageStop()]]})
    events = await r.engine.stream(REQ)
    assert await events.__anext__() == TextDelta(text="a")
    await events.aclose()
    await events.aclose()
    assert r.backend.closed_streams == 1
    assert len(r.records) == 1


def sse_payloads(chunks: list[bytes]) -> list[Any]:
    events = SSEParser().feed(b"".join(chunks))
    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in events]


async def test_wire_stream_mid_failure_is_an_error_frame_never_a_finish(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [[MessageStart(id="s"), TextDelta(text="partial"), UpstreamConnectionError("reset")]]})
    body = b'{"model": "solo", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
    reply = await r.engine.handle("openai_chat", body, {})
    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    assert reply.stream is not None
    payloads = sse_payloads([chunk async for chunk in reply.stream])
    assert payloads[-1] == "[DONE]"
    assert payloads[-2] == {
        "error": {"message": "reset", "type": "api_error", "param": None, "code": "upstream_connection_error"}
    }
    finishes = [c["choices"][0]["finish_reason"] for c in payloads[:-2] if c.get("choices")]
    assert finishes and all(f is None for f in finishes)
    assert r.records[-1].details["mid_stream_failure"] is True


async def test_wire_stream_records_usage_even_when_the_caller_did_not_ask(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [good_stream()]})
    body = b'{"model": "solo", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
    reply = await r.engine.handle("openai_chat", body, {})
    assert reply.stream is not None
    payloads = sse_payloads([chunk async for chunk in reply.stream])
    assert all("usage" not in p for p in payloads if isinstance(p, dict))
    assert r.records[-1].input_tokens == 2_000
