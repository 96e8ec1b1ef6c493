"""OpenAI Chat request codec: golden fixtures plus the edge cases a table says best."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.messages import ImagePart, Message, ReasoningPart, TextPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.tools import ToolChoice, ToolDefinition
from switchyard.wire import codec
from switchyard.wire.openai_chat import CODEC

UPSTREAM_MODEL = "nvidia/lightning"


@pytest.mark.golden("openai_chat/requests")
def test_request_golden(golden: Any) -> None:
    body = golden["body"]
    request = CODEC.decode_request(body)
    golden.check("ir", golden.dump(request))
    upstream = CODEC.encode_request(request, model=UPSTREAM_MODEL, stream=request.stream)
    golden.check("upstream", upstream)
    # What we send upstream decodes to the same conversation (model aside): nothing silently lost
    # in one hop except what the diagnostics report (reasoning history) and two deliberate
    # normalisations for vLLM-style servers: free-form tools travel as one-string-argument
    # function stand-ins, and system/developer instructions merge into one leading system message.
    again = CODEC.decode_request(upstream)
    if not any(t.kind == "custom" for t in request.tools):
        assert again.tools == request.tools
        assert again.tool_choice == request.tool_choice
    else:
        assert [t.name for t in again.tools] == [t.name for t in request.tools]
        assert all(t.kind == "function" for t in again.tools)
    instructions = ("system", "developer")
    roles = [m.role for m in request.messages if m.role not in instructions]
    assert [m.role for m in again.messages if m.role not in instructions] == roles
    assert [m.role for m in again.messages if m.role in instructions] == (
        ["system"] if any(m.role in instructions for m in request.messages) else []
    )
    assert again.extra == request.extra


def test_registry_returns_the_chat_codec() -> None:
    assert codec("openai_chat") is CODEC


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        ("auto", ToolChoice(mode="auto")),
        ("none", ToolChoice(mode="none")),
        ("required", ToolChoice(mode="required")),
        ({"type": "function", "function": {"name": "lookup"}}, ToolChoice(mode="tool", name="lookup")),
        ({"type": "custom", "custom": {"name": "apply_patch"}}, ToolChoice(mode="tool", name="apply_patch")),
        # The Responses API shape (name at the top) is accepted too.
        ({"type": "function", "name": "lookup"}, ToolChoice(mode="tool", name="lookup")),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}, ToolChoice(mode="required")),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}, ToolChoice(mode="auto")),
    ],
)
def test_tool_choice_forms(raw: Any, expected: ToolChoice | None) -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "x"}}],
    }
    if raw is not None:
        body["tool_choice"] = raw
    assert CODEC.decode_request(body).tool_choice == expected


@pytest.mark.parametrize("raw", ["sometimes", {"type": "function"}, {"type": "mystery"}, 3])
def test_unsupported_tool_choice_is_a_400(raw: Any) -> None:
    with pytest.raises(InvalidRequestError) as err:
        CODEC.decode_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": raw})
    assert err.value.status == 400 and err.value.param == "tool_choice"


def test_named_choice_names_the_function_stand_in_of_a_custom_tool() -> None:
    request = ChatRequest(
        messages=[Message.of("user", "x")],
        tools=[ToolDefinition(name="apply_patch", kind="custom"), ToolDefinition(name="lookup")],
        tool_choice=ToolChoice(mode="tool", name="apply_patch"),
    )
    body = CODEC.encode_request(request, model="m", stream=False)
    # Chat upstreams (vLLM) get free-form tools as function stand-ins, so the choice names one.
    assert body["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    request.tool_choice = ToolChoice(mode="tool", name="lookup")
    body = CODEC.encode_request(request, model="m", stream=False)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


def test_tool_choice_without_tools_is_not_sent() -> None:
    # vLLM answers 400 to a tool_choice without tools (and to ``tools: []``).
    request = ChatRequest(messages=[Message.of("user", "x")], tool_choice=ToolChoice(mode="none"))
    body = CODEC.encode_request(request, model="m", stream=False)
    assert "tool_choice" not in body and "tools" not in body


def test_stream_flags_follow_the_call_not_the_caller() -> None:
    request = CODEC.decode_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": False},
        }
    )
    streamed = CODEC.encode_request(request, model="m", stream=True)
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}
    whole = CODEC.encode_request(request, model="m", stream=False)
    assert "stream" not in whole and "stream_options" not in whole


def test_data_uri_round_trip() -> None:
    request = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}}]}
            ],
        }
    )
    (part,) = request.messages[0].content
    assert part == ImagePart(data="R0lG", media_type="image/gif")
    body = CODEC.encode_request(request, model="m", stream=False)
    assert body["messages"][0]["content"] == [{"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}}]


def test_anthropic_style_user_turn_with_tool_results_becomes_tool_messages_first() -> None:
    request = ChatRequest(
        messages=[
            Message(
                role="user",
                content=[
                    ToolResultPart(call_id="c1", content=[TextPart(text="out")], is_error=True),
                    TextPart(text="and now?"),
                ],
            )
        ]
    )
    body = CODEC.encode_request(request, model="m", stream=False)
    assert body["messages"] == [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: out"},
        {"role": "user", "content": "and now?"},
    ]


def test_reasoning_history_is_dropped_with_a_diagnostic() -> None:
    from switchyard.wire import diagnostics

    diagnostics.reset()
    request = ChatRequest(messages=[Message(role="assistant", content=[ReasoningPart(text="t"), TextPart(text="a")])])
    body = CODEC.encode_request(request, model="m", stream=False)
    assert body["messages"] == [{"role": "assistant", "content": "a"}]
    assert diagnostics.counts() == {"openai_chat.reasoning_history_dropped": 1}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0].image_url",
        ),
        (
            {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]},
            "messages[0].tool_calls[0].function",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "tools[0]"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": {"a": 1}}, "tools"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ],
)
def test_malformed_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        CODEC.decode_request(body)
    assert err.value.param == param
    assert err.value.status == 400


def _reference_fixes(messages: list[Any]) -> tuple[bool, bool]:
    """What normalize_replay decided before it read the messages in one pass."""
    empty = any(isinstance(m, dict) and m.get("tool_calls") == [] for m in messages)
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    system = [i for i, r in enumerate(roles) if r in ("system", "developer")]
    merge = bool(system) and (system != list(range(len(system))) or len(system) > 1 or roles[0] == "developer")
    return empty, merge


class _Shifty(dict[str, Any]):
    """A mapping whose ``get`` says something else than its items: read as its ``get`` says."""

    def get(self, key: str, default: Any = None) -> Any:
        return {"role": "system", "tool_calls": []}.get(key, default)


def test_a_replay_is_fixed_exactly_where_the_reference_fixes_it() -> None:
    import random

    from switchyard.wire.openai_chat.request import normalize_replay

    rng = random.Random(7)
    choices: list[Any] = [
        {"role": "system", "content": "s"},
        {"role": "developer", "content": [{"type": "text", "text": "d"}]},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a", "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]},
        {"role": "tool", "content": "t", "tool_call_id": "c"},
        "not a message",
        {"content": "no role"},
        {"role": ["system"], "content": "a role that is no string"},
        _Shifty(role="user", content="u"),
    ]
    plain = [choices[2], choices[4], choices[5]]
    for _ in range(3000):
        if rng.random() < 0.5:
            messages = [rng.choice(choices) for _ in range(rng.randrange(6))]
        else:  # an agent's conversation: mostly plain turns, a few of the others anywhere
            messages = [rng.choice(plain) for _ in range(rng.randrange(16, 40))]
            if rng.random() < 0.5:
                messages.insert(0, choices[0])
            for _ in range(rng.randrange(3)):
                messages.insert(rng.randrange(len(messages) + 1), rng.choice(choices))
        body = {"model": "m", "messages": messages}
        fixed = normalize_replay(body)
        empty, merge = _reference_fixes(messages)
        out = fixed["messages"]
        assert (fixed is body) == (not empty and not merge)
        assert not any(isinstance(m, dict) and m.get("tool_calls") == [] for m in out)  # each one dropped
        assert len(out) == len(messages) or merge
        if merge:
            assert out[0]["role"] == "system"
            assert sum(1 for m in out if isinstance(m, dict) and m.get("role") in ("system", "developer")) == 1
