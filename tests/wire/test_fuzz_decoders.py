"""Hypothesis fuzzing of the three request decoders and stream decoders.

A decoder may only fail with the typed error the engine turns into a 400 (requests) or a
502 (upstream streams); any other exception would be a 500 for a malformed caller body.
Everything a decoder accepts must also encode to every format without an untyped error.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchyard.protocol.errors import InvalidRequestError, UpstreamProtocolError
from switchyard.wire import SSEEvent, codec
from switchyard.wire.base import WireFormat

FORMATS = [f.value for f in WireFormat]

# Keys and values that occur in the three formats, so the fuzzer reaches deep code paths.
KEYS = [
    "model",
    "messages",
    "input",
    "system",
    "instructions",
    "role",
    "content",
    "type",
    "text",
    "tools",
    "tool_choice",
    "tool_calls",
    "tool_call_id",
    "tool_use_id",
    "function",
    "name",
    "arguments",
    "input_schema",
    "parameters",
    "call_id",
    "output",
    "id",
    "image_url",
    "url",
    "source",
    "data",
    "media_type",
    "thinking",
    "signature",
    "summary",
    "encrypted_content",
    "max_tokens",
    "max_output_tokens",
    "temperature",
    "stream",
    "stop",
    "stop_sequences",
    "reasoning",
    "reasoning_effort",
    "effort",
    "budget_tokens",
    "metadata",
    "user_id",
    "custom",
    "format",
    "is_error",
    "cache_control",
    "parallel_tool_calls",
    "disable_parallel_tool_use",
    "stream_options",
    "include_usage",
    "n",
    "previous_response_id",
    "text",
    "output_config",
    "detail",
    "strict",
    # stream payloads
    "choices",
    "delta",
    "index",
    "finish_reason",
    "usage",
    "item",
    "item_id",
    "output_index",
    "response",
    "message",
    "content_block",
    "partial_json",
    "error",
    "status",
    "prompt_tokens",
    "input_tokens",
]
WORDS = [
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "function",
    "custom",
    "text",
    "image",
    "image_url",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "input_text",
    "output_text",
    "input_image",
    "auto",
    "any",
    "none",
    "required",
    "enabled",
    "adaptive",
    "disabled",
    "base64",
    "url",
    "json_schema",
    "json_object",
    "summary_text",
    "reasoning_text",
    "data:image/png;base64,AAAA",
    "switchyard.v1.x.e30",
    "",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "response.created",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.completed",
    "response.function_call_arguments.delta",
    "response.reasoning_summary_text.delta",
    "response.failed",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70000),
    st.floats(min_value=-1e6, max_value=1e6),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=6),
    ),
    max_leaves=40,
)
bodies = st.dictionaries(st.sampled_from(KEYS), values, max_size=10)
# Format-shaped bodies: lists of typed blocks inside role-tagged messages reach the deep paths.
small = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.sampled_from(KEYS), scalars, max_size=3))
BLOCK_KEYS = [
    "text",
    "id",
    "name",
    "input",
    "arguments",
    "function",
    "custom",
    "tool_use_id",
    "call_id",
    "content",
    "is_error",
    "source",
    "image_url",
    "thinking",
    "signature",
    "data",
    "summary",
    "encrypted_content",
    "output",
    "cache_control",
    "format",
    "role",
    "tool_calls",
    "tool_call_id",
]
TOP = [
    "system",
    "instructions",
    "tools",
    "tool_choice",
    "max_tokens",
    "max_output_tokens",
    "temperature",
    "stream",
    "stop",
    "stop_sequences",
    "reasoning",
    "reasoning_effort",
    "thinking",
    "metadata",
    "parallel_tool_calls",
    "stream_options",
    "n",
    "previous_response_id",
    "text",
    "output_config",
    "response_format",
]


@st.composite
def blocks(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A dict with a ``type`` (or ``role``) and a few format keys, values possibly nested blocks."""
    out: dict[str, Any] = {draw(st.sampled_from(["type", "role"])): draw(st.sampled_from(WORDS))}
    for key in draw(st.lists(st.sampled_from(BLOCK_KEYS), max_size=4, unique=True)):
        if depth < 2 and draw(st.booleans()):
            out[key] = draw(st.one_of(st.lists(blocks(depth + 1), max_size=3), blocks(depth + 1)))
        else:
            out[key] = draw(small)
    return out


@st.composite
def shaped(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"model": draw(st.text(max_size=4))}
    body[draw(st.sampled_from(["messages", "input"]))] = draw(st.lists(blocks(), max_size=4))
    for key in draw(st.lists(st.sampled_from(TOP), max_size=5, unique=True)):
        body[key] = draw(st.one_of(small, blocks(1), st.lists(blocks(1), max_size=2)))
    return body


bodies = st.one_of(bodies, shaped())

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_and_encode(fmt: str, body: dict[str, Any]) -> None:
    try:
        request = codec(fmt).decode_request(body)
    except InvalidRequestError:
        return
    for target in FORMATS:
        try:
            encoded = codec(target).encode_request(request, model="m", stream=request.stream)
        except InvalidRequestError:
            continue
        json.dumps(encoded)  # always serialisable


@FUZZ
@given(bodies)
def test_openai_chat_decoder_only_raises_invalid_request(body: dict[str, Any]) -> None:
    _decode_and_encode("openai_chat", body)


@FUZZ
@given(bodies)
def test_anthropic_messages_decoder_only_raises_invalid_request(body: dict[str, Any]) -> None:
    _decode_and_encode("anthropic_messages", body)


@FUZZ
@given(bodies)
def test_openai_responses_decoder_only_raises_invalid_request(body: dict[str, Any]) -> None:
    _decode_and_encode("openai_responses", body)


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    """An event payload: a ``type`` and a few keys, values scalars or nested blocks."""
    out: dict[str, Any] = {"type": draw(st.sampled_from(WORDS))}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
        out[key] = draw(st.one_of(small, blocks(1), st.lists(blocks(1), max_size=2)))
    return out


sse_data = st.one_of(payloads().map(json.dumps), st.text(max_size=20), st.just("[DONE]"))


@settings(max_examples=250, deadline=None)
@given(st.sampled_from(FORMATS), st.lists(st.tuples(st.sampled_from([None, *WORDS]), sse_data), max_size=8))
def test_stream_decoders_only_raise_protocol_errors(fmt: str, frames: list[tuple[str | None, str]]) -> None:
    decoder = codec(fmt).stream_decoder()
    try:
        for name, data in frames:
            decoder.feed(SSEEvent(name, data))
        decoder.finish()
    except UpstreamProtocolError:
        pass
