"""Fuzzing the Chat request decoder: any JSON a caller sends is a request or a 400, never a crash.

Each test fuzzes one region of the body with the rest kept valid, so the decoder gets past the
earlier checks and the odd values reach the code that must cope with them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.request import ChatRequest
from switchyard.wire.openai_chat import CODEC

_KEYS = [
    "role",
    "content",
    "type",
    "text",
    "image_url",
    "url",
    "detail",
    "tool_calls",
    "id",
    "function",
    "name",
    "arguments",
    "custom",
    "input",
    "tool_call_id",
    "reasoning",
    "refusal",
    "parameters",
    "mode",
    "allowed_tools",
]
_TYPES = ["text", "image_url", "refusal", "function", "custom", "allowed_tools", "input_audio"]

# JSON as orjson parses it: integers fit 64 bits (bigger ones arrive as floats).
_flat = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(_TYPES)
)
_key = st.sampled_from(_KEYS) | st.text(max_size=4)
_any = _flat | st.lists(_flat, max_size=3) | st.dictionaries(_key, _flat, max_size=3)
_deep = st.recursive(
    _flat, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_key, inner, max_size=3), max_leaves=10
)


def _obj(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An object whose optional keys are each present or absent with even odds."""
    absent = object()
    fields = {**required, **{k: st.just(absent) | v for k, v in optional.items()}}
    return st.fixed_dictionaries(fields).map(lambda d: {k: v for k, v in d.items() if v is not absent})


def _decode(body: dict[str, Any]) -> None:
    try:
        request = CODEC.decode_request(body)
    except InvalidRequestError as exc:
        assert exc.status == 400 and exc.message
        return
    assert isinstance(request, ChatRequest)
    # Whatever decoded must also encode for an upstream.
    CODEC.encode_request(request, model="m", stream=request.stream)


_part = _obj(
    {"type": st.sampled_from(_TYPES) | _any}, {"text": _any, "image_url": _any | _obj({"url": _any}, {"detail": _any})}
)
_call = _obj(
    {"type": st.sampled_from(["function", "custom"]) | _any},
    {"id": _any, "function": _any | _obj({"name": _any}, {"arguments": _any}), "custom": _any},
)
_message = _obj(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot"]) | _any},
    {
        "content": _any | st.lists(_part, max_size=3),
        "tool_calls": _any | st.lists(_call, min_size=1, max_size=2),
        "tool_call_id": _any,
        "name": _any,
        "reasoning": _any,
        "refusal": _any,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_message, min_size=1, max_size=3))
@example([{"role": "assistant", "tool_calls": [{"type": "custom", "custom": "apply_patch"}]}])
def test_odd_messages(messages: list[Any]) -> None:
    _decode({"model": "m", "messages": messages})


_tool = _obj(
    {"type": st.sampled_from(["function", "custom"]) | _any},
    {"function": _any | _obj({"name": _any}, {"parameters": _any, "strict": _any}), "custom": _any},
)


@settings(max_examples=100, deadline=None)
@given(tools=st.lists(_tool, min_size=1, max_size=3) | _any)
@example([{"type": "custom", "custom": True}])
def test_odd_tools(tools: Any) -> None:
    _decode({"model": "m", "messages": [], "tools": tools})


_choice = _any | _obj(
    {"type": st.sampled_from(_TYPES) | _any}, {"function": _any, "custom": _any, "name": _any, "allowed_tools": _any}
)


@settings(max_examples=100, deadline=None)
@given(choice=_choice)
@example({"type": "allowed_tools", "allowed_tools": [1]})
def test_odd_tool_choice(choice: Any) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}, {"type": "custom", "custom": {"name": "g"}}]
    _decode({"model": "m", "messages": [], "tools": tools, "tool_choice": choice})


_fields = _obj(
    {},
    {
        k: _any
        for k in (
            "model",
            "stream",
            "stream_options",
            "stop",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
            "top_p",
            "seed",
            "reasoning_effort",
            "metadata",
            "user",
            "response_format",
            "parallel_tool_calls",
        )
    },
)


@settings(max_examples=100, deadline=None)
@given(fields=_fields)
def test_odd_scalar_fields(fields: dict[str, Any]) -> None:
    _decode({"messages": [{"role": "user", "content": "hi"}], **fields})


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=6) | st.sampled_from(["messages", "tools", "tool_choice", "stop"]), _deep))
def test_arbitrary_objects(body: dict[str, Any]) -> None:
    _decode(body)
