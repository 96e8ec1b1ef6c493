"""The tool definitions an agent sends every turn are decoded once, and exactly as a fresh decode.

``wire/reuse.ExactReuse`` keys a decoding by the value's JSON text as orjson writes it (``1``,
``1.0`` and ``true`` apart) and hands it out again only for a value that also compares equal
(a list and a tuple, a string and a UUID write the same text). These tests pin the cheap path
(the same objects the next turn) and that every value it serves decodes to the same models, of
the same types throughout, as a decode of its own would.
"""

from __future__ import annotations

import copy
import enum
import json
import uuid
from typing import Any

import pytest

from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import diagnostics
from switchyard.wire.openai_chat import request as chat_request
from switchyard.wire.reuse import ExactReuse


def _tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"{name} things", "parameters": schema}}


TOOLS = [
    _tool(f"tool{k}", {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}) for k in range(5)
]


def _body(tools: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}


def _typed(value: Any) -> Any:
    """``value`` with every type spelled out: ``==`` equates 1, 1.0 and true, a list and a tuple."""
    if isinstance(value, ToolDefinition):
        return ("ToolDefinition", _typed(dict(value)))
    if isinstance(value, dict):
        return (type(value).__name__, [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, value)


def _fresh(body: dict[str, Any]) -> list[ToolDefinition]:
    chat_request.TOOLS.clear()
    return chat_request.decode_request(body).tools


def test_the_next_turn_gets_the_same_definitions() -> None:
    chat_request.TOOLS.clear()
    first = chat_request.decode_request(_body(json.loads(json.dumps(TOOLS)))).tools
    again = chat_request.decode_request(_body(json.loads(json.dumps(TOOLS)))).tools
    assert again == first == _fresh(_body(TOOLS))
    assert all(a is b for a, b in zip(again, first, strict=True))
    other = copy.deepcopy(TOOLS)
    other[3]["function"]["description"] = "changed"
    assert chat_request.decode_request(_body(other)).tools[3].description == "changed"


@pytest.mark.parametrize(
    "variants",
    [
        # Equal under ``==``, written differently: the key tells them apart.
        [1, 1.0, True],
        [0, 0.0, False, -0.0],
        # Written alike, unequal under ``==``: the comparison tells them apart.
        [[1, 2], (1, 2)],
        ["5a9f1c2e-0000-4000-8000-000000000000", uuid.UUID("5a9f1c2e-0000-4000-8000-000000000000")],
        [1, enum.Enum("Level", {"ONE": 1}).ONE],
    ],
)
def test_values_that_look_alike_decode_as_their_own(variants: list[Any]) -> None:
    for order in (variants, variants[::-1]):
        chat_request.TOOLS.clear()
        for value in order:
            tools = [_tool("Read", {"type": "object", "properties": {"n": {"minimum": value}}})]
            decoded = chat_request.decode_request(_body(tools)).tools
            assert _typed(decoded) == _typed(_fresh(_body(tools))), value
            chat_request.decode_request(_body(tools))  # kept for the next value, if it was kept at all


def test_a_tuple_of_tools_is_refused_after_an_equal_list_was_decoded() -> None:
    chat_request.TOOLS.clear()
    chat_request.decode_request(_body(TOOLS))
    with pytest.raises(InvalidRequestError, match="tools must be a list"):
        chat_request.decode_request(_body(tuple(TOOLS)))


def test_subclasses_and_values_orjson_does_not_write_are_decoded_as_they_come() -> None:
    class Name(str):
        pass

    calls: list[Any] = []
    kept: ExactReuse[str] = ExactReuse()
    for value in (Name("a"), Name("a"), 2**70, 2**70, {"deep": [[[[]]]]}, {"deep": [[[[]]]]}):
        kept.decode(value, lambda v: calls.append(v) or repr(v))
    assert len(calls) == 5  # only the plain nested value was decoded once and kept
    assert len(kept) == 1


def test_a_lossy_decoding_is_not_kept() -> None:
    def lossy(value: Any) -> str:
        diagnostics.report("test.lossy", "dropped something")
        return str(value)

    kept: ExactReuse[str] = ExactReuse()
    start = diagnostics.counts().get("test.lossy", 0)
    for _ in range(3):
        kept.decode([1, 2], lossy)
    assert diagnostics.counts().get("test.lossy", 0) - start == 3
    assert len(kept) == 0


def test_the_kept_decodings_are_bounded() -> None:
    kept: ExactReuse[str] = ExactReuse(slots=3)
    for k in range(10):
        kept.decode([k], str)
    assert len(kept) == 3
    calls: list[Any] = []
    kept.decode([9], lambda v: calls.append(v) or str(v))
    kept.decode([0], lambda v: calls.append(v) or str(v))
    assert calls == [[0]]  # the newest kept, the oldest forgotten
