"""A stream without a final usage report is charged for what it carried (issue 23): four streamed
characters per output token, the prompt estimate for input, and the record says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchyard.protocol.errors import UpstreamConnectionError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.protocol.stream import MessageStart, MessageStop, TextDelta, ToolCallDelta, UsageDelta

Rig = Any
REQ = ChatRequest(model="solo", messages=[Message.of("user", "y" * 400)], stream=True)
TEXT = "x" * 40  # 10 tokens at four characters each


async def test_a_clean_stream_without_usage_is_estimated(rig: Callable[..., Rig]) -> None:
    r = rig(
        {
            "cheap": [
                [
                    MessageStart(id="s"),
                    TextDelta(text=TEXT),
                    ToolCallDelta(index=0, name="f", arguments="{}"),
                    MessageStop(),
                ]
            ]
        }
    )
    _ = [e async for e in await r.engine.stream(REQ)]
    (record,) = r.records
    assert record.status == 200
    assert record.output_tokens == 11  # 40 + 3 characters
    assert record.input_tokens > 100  # the prompt estimate of 400 characters
    assert record.details["usage_estimated"] == ["output_tokens", "input_tokens"]
    assert record.cost_usd > 0


async def test_a_reported_usage_is_kept_as_it_is(rig: Callable[..., Rig]) -> None:
    usage = Usage(input_tokens=7, output_tokens=3)
    r = rig({"cheap": [[MessageStart(id="s"), TextDelta(text=TEXT), UsageDelta(usage=usage), MessageStop()]]})
    _ = [e async for e in await r.engine.stream(REQ)]
    (record,) = r.records
    assert (record.input_tokens, record.output_tokens) == (7, 3)
    assert "usage_estimated" not in record.details


async def test_a_stream_closed_early_keeps_the_reported_input_and_estimates_the_output(rig: Callable[..., Rig]) -> None:
    started = UsageDelta(usage=Usage(input_tokens=123, output_tokens=1))  # Anthropic's message_start
    r = rig({"cheap": [[MessageStart(id="s"), started, TextDelta(text=TEXT), TextDelta(text=TEXT), MessageStop()]]})
    events = await r.engine.stream(REQ)
    async for event in events:
        if isinstance(event, TextDelta):
            break  # the caller leaves after the first delta
    await events.aclose()
    (record,) = r.records
    assert record.status == 499
    assert (record.input_tokens, record.output_tokens) == (123, 10)
    assert record.details["usage_estimated"] == ["output_tokens"]


async def test_a_stream_broken_mid_way_is_charged_too(rig: Callable[..., Rig]) -> None:
    failure = UpstreamConnectionError("cheap: reset")
    r = rig({"cheap": [[MessageStart(id="s"), TextDelta(text=TEXT), failure]]})
    _ = [e async for e in await r.engine.stream(REQ)]
    (record,) = r.records
    assert record.details.get("mid_stream_failure") and record.output_tokens == 10 and record.cost_usd > 0
