"""What a ``restrict:`` rule reads (switchyard.routers.restrict_text): every IR field decided,
every read field really read, the caller's body read whole but for bytes and opaque blobs."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest, ReasoningConfig
from switchyard.protocol.tools import ToolChoice, ToolDefinition
from switchyard.routers.restrict import RestrictPolicy, RestrictRule
from switchyard.routers.restrict_text import NOT_READ, READ, body_texts, request_texts, texts

MARK = "MARK-4711"
POLICY = RestrictPolicy([RestrictRule(name="mark", pattern=r"MARK-\d{4}", require=["onprem"])])


def _models(annotation: Any, found: set[type[BaseModel]]) -> None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in found:
            found.add(annotation)
            for info in annotation.model_fields.values():
                _models(info.annotation, found)
        return
    for arg in typing.get_args(annotation):
        _models(arg, found)


def test_every_field_of_every_ir_type_in_a_request_is_read_or_said_why_not() -> None:
    """A field added to the IR fails here until it is read (``READ``) or said not to be text
    (``NOT_READ``, with the reason) — and, if read, until the walk reads it (next test)."""
    found: set[type[BaseModel]] = set()
    _models(ChatRequest, found)
    assert found == set(READ) == set(NOT_READ)
    for model in found:
        read, not_read = READ[model], set(NOT_READ[model])
        assert not read & not_read, (model.__name__, read & not_read)
        assert read | not_read == set(model.model_fields), (model.__name__, set(model.model_fields) ^ (read | not_read))
        assert all(NOT_READ[model].values())  # each field left out says why


def _msg(*parts: Any, name: str | None = None) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=list(parts), name=name)])


def _tool(**fields: Any) -> ChatRequest:
    return ChatRequest(tools=[ToolDefinition(**{"name": "t", **fields})])


NESTED = {"a": [{"b": f"x {MARK}"}]}

PLACED: dict[tuple[type[BaseModel], str], Callable[[], ChatRequest]] = {
    (ChatRequest, "messages"): lambda: _msg(TextPart(text=MARK)),
    (ChatRequest, "tools"): lambda: _tool(description=MARK),
    (ChatRequest, "tool_choice"): lambda: ChatRequest(tool_choice=ToolChoice(mode="tool", name=MARK)),
    (ChatRequest, "stop"): lambda: ChatRequest(stop=["x", MARK]),
    (ChatRequest, "response_format"): lambda: ChatRequest(response_format={"type": "json_schema", "s": NESTED}),
    (ChatRequest, "reasoning"): lambda: ChatRequest(reasoning=ReasoningConfig(effort=MARK)),
    (ChatRequest, "user"): lambda: ChatRequest(user=MARK),
    (ChatRequest, "metadata"): lambda: ChatRequest(metadata={"k": MARK}),
    (ChatRequest, "extra"): lambda: ChatRequest(extra={"prediction": {"type": "content", "content": NESTED}}),
    (Message, "content"): lambda: _msg(TextPart(text=MARK)),
    (Message, "name"): lambda: _msg(name=MARK),
    (TextPart, "text"): lambda: _msg(TextPart(text=MARK)),
    (TextPart, "cache_control"): lambda: _msg(TextPart(text="x", cache_control={"type": MARK})),
    (ImagePart, "url"): lambda: _msg(ImagePart(url=f"https://x/?token={MARK}")),
    (ImagePart, "media_type"): lambda: _msg(ImagePart(data="AAAA", media_type=MARK)),
    (ImagePart, "detail"): lambda: _msg(ImagePart(url="https://x", detail=MARK)),
    (ImagePart, "cache_control"): lambda: _msg(ImagePart(url="https://x", cache_control={"ttl": MARK})),
    (ToolCallPart, "id"): lambda: _msg(ToolCallPart(id=MARK, name="f")),
    (ToolCallPart, "name"): lambda: _msg(ToolCallPart(id="c", name=MARK)),
    (ToolCallPart, "arguments"): lambda: _msg(ToolCallPart(id="c", name="f", arguments=f'{{"k": "{MARK}"}}')),
    (ToolResultPart, "call_id"): lambda: _msg(ToolResultPart(call_id=MARK)),
    (ToolResultPart, "content"): lambda: _msg(ToolResultPart(call_id="c", content=[TextPart(text=MARK)])),
    (ToolResultPart, "cache_control"): lambda: _msg(ToolResultPart(call_id="c", cache_control={"t": MARK})),
    (ReasoningPart, "text"): lambda: _msg(ReasoningPart(text=MARK)),
    (ReasoningPart, "item_id"): lambda: _msg(ReasoningPart(item_id=MARK)),
    (ToolDefinition, "name"): lambda: _tool(name=MARK),
    (ToolDefinition, "description"): lambda: _tool(description=MARK),
    (ToolDefinition, "parameters"): lambda: _tool(parameters={"type": "object", "properties": NESTED}),
    (ToolDefinition, "format"): lambda: _tool(kind="custom", format={"type": "grammar", "definition": MARK}),
    (ToolDefinition, "cache_control"): lambda: _tool(cache_control={"type": MARK}),
    (ToolDefinition, "native"): lambda: _tool(native={"input_examples": [NESTED]}),
    (ToolChoice, "name"): lambda: ChatRequest(tool_choice=ToolChoice(mode="tool", name=MARK)),
    (ReasoningConfig, "effort"): lambda: ChatRequest(reasoning=ReasoningConfig(effort=MARK)),
    (ReasoningConfig, "summary"): lambda: ChatRequest(reasoning=ReasoningConfig(summary=MARK)),
    (ChatRequest, "choice"): lambda: ChatRequest(
        choice=ChoiceQuestion(instructions=MARK, options={"a": "x", "b": "y"})
    ),
    (ChoiceQuestion, "instructions"): lambda: ChatRequest(
        choice=ChoiceQuestion(instructions=MARK, options={"a": "x", "b": "y"})
    ),
    (ChoiceQuestion, "options"): lambda: ChatRequest(
        choice=ChoiceQuestion(instructions="q", options={"a": MARK, "b": "y"})
    ),
}


def test_the_cases_below_cover_every_read_field() -> None:
    assert set(PLACED) == {(model, name) for model, names in READ.items() for name in names}


@pytest.mark.parametrize(
    "where", sorted(PLACED, key=lambda k: (k[0].__name__, k[1])), ids=lambda k: f"{k[0].__name__}.{k[1]}"
)
def test_text_in_every_read_field_is_found(where: tuple[type[BaseModel], str]) -> None:
    request = PLACED[where]()
    assert [(rule.label, n) for rule, n in POLICY.matches(request)] == [("mark", 1)]


def test_bytes_and_opaque_reasoning_are_not_read() -> None:
    request = _msg(
        ImagePart(data=MARK, media_type="image/png"),
        ReasoningPart(text="t", signature=MARK, redacted=MARK, encrypted=MARK, provider="anthropic_messages"),
    )
    assert MARK not in "\n".join(request_texts(request))
    assert POLICY.matches(request) == []


def test_the_body_is_read_whole_but_for_bytes_and_opaque_blobs() -> None:
    body = {
        "model": MARK,  # the route's name: replaced upstream
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": MARK}},
                    {"type": "document", "source": {"type": "base64", "data": MARK}, "title": "t"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{MARK}"}},
                    {"type": "input_audio", "input_audio": {"data": MARK, "format": "wav"}},
                    {"type": "document", "source": {"type": "text", "data": "doc-text"}},
                    {"type": "search_result", "source": "s", "content": [{"type": "text", "text": "found-text"}]},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "th", "signature": MARK},
                    {"type": "redacted_thinking", "data": MARK},
                    {"type": "reasoning", "encrypted_content": MARK},
                ],
            },
        ],
        "prediction": {"type": "content", "content": "predicted"},
        "metadata": {"password": "hunter2-hunter2-hunter2"},
        "max_tokens": 5,
        "stream": True,
        "stop": None,
    }
    read = body_texts(body)
    assert MARK not in "\n".join(read)
    # Only where the object's type says so: a schema's properties of those names are read.
    schema = {
        "type": "object",
        "properties": {n: {"type": "string", "description": MARK} for n in ("signature", "data")},
    }
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    assert "\n".join(body_texts({"tools": tools, "metadata": {"signature": MARK}})).count(MARK) == 3
    for text in ("doc-text", "found-text", "predicted", "search_result", "title", "wav", "th"):
        assert text in read
    # A key and its string value read as an assignment (what the secrets detector looks for).
    secrets = RestrictPolicy([RestrictRule(detector="secrets", require=["x"])])
    assert [n for _, n in secrets.matches(ChatRequest(), body)] == [1]


def test_a_text_the_ir_took_from_the_body_is_read_once() -> None:
    text = f"key {MARK}"
    body = {"messages": [{"role": "user", "content": text}]}
    request = ChatRequest(messages=[Message(role="user", content=[TextPart(text=text)])])
    assert texts(request, body).count(text) == 1
    assert [n for _, n in POLICY.matches(request, body)] == [1]
    # An IR text the body does not hold (built by the decoder) is read as well.
    request.messages.append(Message.of("user", "other " + MARK))
    assert [n for _, n in POLICY.matches(request, body)] == [2]


def test_an_ir_text_equal_to_a_body_text_is_read_once_though_another_object() -> None:
    # A decoder that reuses earlier decoded parts (wire/reuse.py) holds equal, not identical, strings.
    text = f"key {MARK}"
    body = {"messages": [{"role": "user", "content": text}]}
    other = "".join(["key ", MARK])
    assert other == text and other is not text
    request = ChatRequest(messages=[Message(role="user", content=[TextPart(text=other)])])
    assert texts(request, body).count(text) == 1
    assert [n for _, n in POLICY.matches(request, body)] == [1]


def test_a_deeply_nested_body_is_walked_without_recursion() -> None:
    deep: Any = MARK
    for _ in range(50_000):
        deep = [deep]
    assert [n for _, n in POLICY.matches(ChatRequest(), {"extra": deep})] == [1]


def test_redaction_replaces_every_match_and_only_the_matches() -> None:
    secrets = RestrictRule(detector="secrets", require=["x"])
    policy = RestrictPolicy([secrets, RestrictRule(pattern="nomatch", require=["y"])])
    redact = policy.redactor([secrets], "[redacted]")
    key = "sk-ant-api03-" + "a" * 30
    assert redact(f"a {key} b password = 'abcdefghijklmnopqrstu' c") == "a [redacted] b [redacted]' c"
    assert redact("nothing here") == "nothing here"


def test_any_json_shape_is_walked() -> None:
    """A caller's body is any JSON: a list or an object where a ``type`` string is expected, numbers, nulls."""
    body = {"messages": [{"type": ["base64"], "data": MARK}, {"type": {"x": 1}, "n": 1.5, "z": None}], "k": [True, 3]}
    assert [n for _, n in POLICY.matches(ChatRequest(), body)] == [1]
