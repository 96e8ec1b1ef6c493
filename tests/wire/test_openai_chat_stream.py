"""OpenAI Chat stream codec: recorded SSE streams → IR events → caller SSE, golden."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import (
    MessageStart,
    MessageStop,
    StreamAccumulator,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
    response_to_events,
)
from switchyard.wire.openai_chat import CODEC
from switchyard.wire.sse import SSEEvent, SSEParser


def decode(sse: bytes) -> list[StreamEvent]:
    """The IR events of a whole recorded stream, fed as one chunk."""
    decoder = CODEC.stream_decoder()
    parser = SSEParser()
    events: list[StreamEvent] = []
    for item in [*parser.feed(sse), *parser.finish()]:
        if decoder.done:
            break
        events.extend(decoder.feed(item))
    events.extend(decoder.finish())
    return events


def encode(events: list[StreamEvent], *, include_usage: bool = True) -> list[Any]:
    """Caller SSE for ``events``, as the parsed ``data`` payloads (``"[DONE]"`` kept as a string)."""
    encoder = CODEC.stream_encoder(model="agent", include_usage=include_usage)
    raw = b"".join(encoder.encode(e) for e in events) + encoder.finish()
    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in SSEParser().feed(raw)]


def accumulate(events: list[StreamEvent]) -> ChatResponse:
    acc = StreamAccumulator()
    for event in events:
        acc.add(event)
    return acc.response()


@pytest.mark.golden("openai_chat/streams")
def test_stream_golden(golden: Any) -> None:
    events = decode(golden["sse"].encode())
    golden.check("events", [golden.dump(e) for e in events])
    if isinstance(events[-1], StreamError):
        golden.check("error", golden.dump(events[-1].error))
    else:
        golden.check("response", golden.dump(accumulate(events)))
    caller = encode(events)
    golden.check("caller", caller)
    # Every chunk we send is a valid chat.completion.chunk for the real SDK, and the SDK's own
    # stream state rebuilds the same answer.
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    assert caller[-1] == "[DONE]"
    payloads = caller[:-1]
    if isinstance(events[-1], StreamError):
        assert payloads[-1] == CODEC.encode_error(events[-1].error)
        payloads = payloads[:-1]
    state = ChatCompletionStreamState()
    for payload in payloads:
        state.handle_chunk(ChatCompletionChunk.model_validate(payload))
    if not isinstance(events[-1], StreamError):
        final = state.current_completion_snapshot
        response = accumulate(events)
        message = final.choices[0].message
        assert (message.content or "") == response.text
        assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
            (c.id, c.name, c.arguments) for c in response.tool_calls
        ]


@pytest.mark.golden("openai_chat/streams")
def test_stream_re_decodes_to_the_same_answer(golden: Any) -> None:
    events = decode(golden["sse"].encode())
    encoder = CODEC.stream_encoder(model="agent", include_usage=True)
    raw = b"".join(encoder.encode(e) for e in events) + encoder.finish()
    again = decode(raw)
    if isinstance(events[-1], StreamError):
        assert isinstance(again[-1], StreamError) and again[-1].error.message == events[-1].error.message
        return
    first, second = accumulate(events), accumulate(again)
    if first.stop_reason == "stop_sequence":
        # Chat chunks we write have no slot for the matched stop string (only vLLM adds one).
        first = first.model_copy(update={"stop_reason": "end_turn", "stop_sequence": None})
    assert second.model_copy(update={"model": first.model}) == first


def test_usage_is_held_back_unless_asked() -> None:
    events: list[StreamEvent] = [
        MessageStart(id="a", created=1),
        TextDelta(text="hi"),
        UsageDelta(usage=Usage(input_tokens=3, output_tokens=1)),
        MessageStop(stop_reason="end_turn"),
    ]
    without = encode(events, include_usage=False)
    assert all("usage" not in p for p in without[:-1])
    with_usage = encode(events, include_usage=True)
    # Every chunk says usage: null, then a final choices: [] chunk carries it.
    assert all(p["usage"] is None for p in with_usage[:-2])
    assert with_usage[-2]["choices"] == [] and with_usage[-2]["usage"]["prompt_tokens"] == 3


def test_encoder_starts_with_a_role_chunk_even_without_message_start() -> None:
    payloads = encode([TextDelta(text="x"), MessageStop()], include_usage=False)
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert payloads[1]["choices"][0]["delta"] == {"content": "x"}
    assert payloads[2]["choices"][0]["finish_reason"] == "stop"


def test_encoder_stops_after_an_error() -> None:
    encoder = CODEC.stream_encoder(model="m", include_usage=False)
    encoder.encode(TextDelta(text="x"))
    tail = encoder.encode(StreamError(error=ErrorInfo(status=502, message="gone")))
    assert tail.endswith(b"data: [DONE]\n\n")
    assert encoder.encode(TextDelta(text="more")) == b""
    assert encoder.finish() == b""


def test_tool_call_ids_are_invented_when_missing() -> None:
    payloads = encode(
        [ToolCallDelta(index=0, name="f", arguments="{}"), MessageStop(stop_reason="tool_use")], include_usage=False
    )
    call = payloads[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call == {"index": 0, "id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_response_replay_streams_like_the_original() -> None:
    response = CODEC.decode_response(
        {
            "id": "r",
            "created": 5,
            "model": "m",
            "choices": [
                {
                    "message": {
                        "content": "text",
                        "reasoning": "why",
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2},
        }
    )
    assert accumulate(response_to_events(response)) == response


@pytest.mark.parametrize(
    "data",
    [
        "{not json",
        "[1, 2]",
        '"text"',
        '{"choices": [{"delta": "oops"}]}',
        '{"choices": [{"delta": {"tool_calls": [{"index": "x"}]}}]}',
    ],
)
def test_malformed_chunks_are_protocol_errors(data: str) -> None:
    with pytest.raises(UpstreamProtocolError):
        CODEC.stream_decoder().feed(SSEEvent(None, data))


def test_stream_without_finish_reason_is_incomplete() -> None:
    decoder = CODEC.stream_decoder()
    decoder.feed(SSEEvent(None, '{"id": "a", "choices": [{"index": 0, "delta": {"content": "partial"}}]}'))
    with pytest.raises(UpstreamProtocolError):
        decoder.finish()
    decoder = CODEC.stream_decoder()
    decoder.feed(SSEEvent(None, '{"id": "a", "choices": [{"index": 0, "delta": {"content": "partial"}}]}'))
    with pytest.raises(UpstreamProtocolError):
        decoder.feed(SSEEvent(None, "[DONE]"))


def test_other_choices_are_ignored() -> None:
    decoder = CODEC.stream_decoder()
    events = decoder.feed(
        SSEEvent(
            None,
            '{"id": "a", "choices": [{"index": 1, "delta": {"content": "B"}},'
            ' {"index": 0, "delta": {"content": "A"}}]}',
        )
    )
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="A")]
