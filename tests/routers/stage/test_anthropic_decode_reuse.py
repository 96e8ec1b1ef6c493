"""Anthropic Messages bodies (what Claude Code sends) reuse the previous turn's decoded messages.

The Anthropic decoder keeps the last few conversations' decoded messages as the Chat one does
(``wire/reuse.py``), keyed per Anthropic message by its JSON text, with a slack of one message
for the cache breakpoint Claude Code moves to the newest message each turn. These tests pin the
cheap path (the prefix's IR messages are the previous turn's own objects), that each request
and the stage router's decision equal those of a full decode on recorded Claude Code bodies
grown by a synthetic session, and each guard: key order and ``1``/``1.0``/``true`` in a tool
call's input, a lossy block, an edited history, the server tools.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from switchyard.protocol.messages import ToolCallPart
from switchyard.protocol.request import ChatRequest
from switchyard.state.memory import MemoryStore
from switchyard.wire import diagnostics, reuse
from switchyard.wire.anthropic_messages import request as anth_request

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _decide import decide, stage_router  # noqa: E402
from anthropic_agent import as_anthropic, requests, with_breakpoint  # noqa: E402
from stage_trajectories import long_session, trajectories  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "agents").glob("*claude-code*.json"))


def _decode(body: dict[str, Any]) -> ChatRequest:
    # A fresh parse, as each HTTP request gets: equal dicts, never the same objects.
    return anth_request.decode_request(json.loads(json.dumps(body)))


def _clear() -> None:
    anth_request.REUSE.clear()
    anth_request.TOOLS.clear()


def _full(body: dict[str, Any]) -> ChatRequest:
    _clear()
    return _decode(body)


def _session(n: int, **kwargs: Any) -> list[dict[str, Any]]:
    """A synthetic session's messages in Anthropic's shape (no system prompt)."""
    return as_anthropic({"model": "m", "messages": long_session(n, **kwargs)})["messages"]


def _conversations() -> list[tuple[str, dict[str, Any], list[list[dict[str, Any]]]]]:
    out = []
    for path in FIXTURES:
        body = json.loads(path.read_text())["body"]
        # The recorded opening (system prompt, tools, first turns) continued by a synthetic
        # session, so the reuse has a prefix of recorded messages to keep.
        grown = {**body, "messages": [*body["messages"], *_session(40)]}
        base = {k: v for k, v in body.items() if k != "messages"}
        out.append((path.stem, base, requests(grown)))
    base = {"model": "agent", "max_tokens": 1024}
    for t in trajectories(per_scenario=1)[::4]:
        body = as_anthropic({"model": "agent", "messages": t["messages"]})
        out.append((t["id"], {**base, "system": body.get("system", "")}, requests(body)))
    # 200 turns, a request every fifth: the reuse also spans several new turns at once.
    long_body = as_anthropic({"model": "agent", "messages": long_session(400, result_chars=600)})
    out.append(("long-400", {**base, "system": long_body["system"]}, requests(long_body)[::5]))
    return out


CONVERSATIONS = _conversations()


@pytest.mark.parametrize("compat", [None, "nvidia"])
@pytest.mark.parametrize(("name", "base", "turns"), CONVERSATIONS, ids=[c[0] for c in CONVERSATIONS])
async def test_reused_decode_decides_as_the_full_decode(
    name: str, base: dict[str, Any], turns: list[list[dict[str, Any]]], compat: str | None
) -> None:
    expected = [_full({**base, "messages": messages}) for messages in turns]
    _clear()
    cheap_router, full_router = stage_router(compat), stage_router(compat)
    cheap_store, full_store = MemoryStore(), MemoryStore()
    previous: tuple[int, ChatRequest, int] | None = None
    system = 0
    reused = 0
    for turn, (messages, full) in enumerate(zip(turns, expected, strict=True)):
        cheap = _decode({**base, "messages": messages})
        assert cheap == full, f"{name}: turn {turn} decodes differently"
        if previous is not None and previous[0] >= reuse.MIN_MESSAGES:
            # The cheap path: every message of the previous turn but its last (whose cache
            # breakpoint moved on) decodes to the previous turn's IR objects, not to new ones.
            kept, before = previous[2], previous[1]
            assert all(a is b for a, b in zip(cheap.messages[system:kept], before.messages[system:kept], strict=True))
            reused += kept - system
        # The IR messages of this turn but its last Anthropic message (and the system prompt's).
        system = int(bool(base.get("system")))  # decoded every turn (a few blocks)
        kept = len(full.messages) - len(_decode({"model": "m", "messages": messages[-1:]}).messages)
        previous = (len(messages), cheap, kept)
        assert await decide(cheap_router, cheap, turn, cheap_store) == await decide(
            full_router, full, turn, full_store
        ), f"{name}: turn {turn} decides differently"
    if any(len(m) >= reuse.MIN_MESSAGES for m in turns[:-1]):
        assert reused > 0, f"{name}: no turn reused its prefix"


def _turn(opening: list[dict[str, Any]], *extra: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "messages": with_breakpoint([*opening, *extra])}


def _call(tool_input: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": tool_input}]}


def _result(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}]}


def test_a_tool_input_that_compares_equal_but_is_written_differently_is_decoded_afresh() -> None:
    # ``==`` equates 1, 1.0 and true and ignores an object's key order; the call's arguments
    # are the input written out, so each of these must decode on its own.
    opening = _session(20)
    _clear()
    inputs = [
        ({"n": 1, "path": "a"}, '{"n":1,"path":"a"}'),
        ({"path": "a", "n": 1}, '{"path":"a","n":1}'),
        ({"n": 1.0, "path": "a"}, '{"n":1.0,"path":"a"}'),
        ({"n": True, "path": "a"}, '{"n":true,"path":"a"}'),
    ]
    for tool_input, arguments in inputs:
        decoded = _decode(_turn(opening, _call(tool_input), _result("ok"), {"role": "user", "content": "go on"}))
        part = next(p for m in decoded.messages for p in m.content if isinstance(p, ToolCallPart) and p.id == "t1")
        assert part.arguments == arguments


def test_a_moved_breakpoint_reuses_all_but_the_message_it_left() -> None:
    messages = _session(40)
    _clear()
    first = _decode(_turn(messages[:30]))
    second = _decode(_turn(messages[:32]))
    assert second == _full(_turn(messages[:32]))
    # messages[:29] decode to IR messages the first turn made; messages[29] lost its breakpoint.
    _clear()
    n_ir = len(_decode(_turn(messages[:29])).messages)
    assert all(a is b for a, b in zip(second.messages[:n_ir], first.messages[:n_ir], strict=True))
    assert second.messages[n_ir] is not first.messages[n_ir]


def test_a_lossy_message_is_counted_on_every_request() -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}
    messages = [*_session(20), {"role": "user", "content": [document, {"type": "text", "text": "read it"}]}]
    messages += _session(20)[1:]
    _clear()
    start = diagnostics.counts().get("anthropic_messages.document_as_text", 0)
    for turn in range(3):
        _decode(_turn(messages, *[{"role": "user", "content": f"go on {k}"} for k in range(turn)]))
    assert diagnostics.counts().get("anthropic_messages.document_as_text", 0) - start == 3


def test_an_edited_history_is_decoded_afresh() -> None:
    messages = _session(60)
    _clear()
    before = _decode(_turn(messages))
    edited = [messages[0], {"role": "user", "content": "A compacted summary of what happened."}, *messages[10:]]
    after = _decode(_turn(edited))
    assert after == _full(_turn(edited))
    assert not any(a is b for a, b in zip(after.messages[1:], before.messages[1:], strict=False))


def _tools() -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    return [{"name": f"tool{k}", "description": "things", "input_schema": schema} for k in range(5)]


def test_the_tool_list_is_decoded_once_and_server_tools_ride_every_request() -> None:
    messages = _session(20)
    _clear()
    first = _decode({**_turn(messages), "tools": _tools()})
    again = _decode({**_turn(messages), "tools": _tools()})
    assert first.tools == again.tools == _full({**_turn(messages), "tools": _tools()}).tools
    _clear()
    first = _decode({**_turn(messages), "tools": _tools()})
    again = _decode({**_turn(messages), "tools": _tools()})
    assert all(a is b for a, b in zip(first.tools, again.tools, strict=True))
    assert first.tools is not again.tools  # the request's own list
    # ``minimum: 1.0`` is another schema (written out as such to the upstream).
    floats = _tools()
    floats[0]["input_schema"] = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1.0}}}
    other = _decode({**_turn(messages), "tools": floats})
    assert other.tools[0] is not first.tools[0]
    assert repr(other.tools[0].parameters) != repr(first.tools[0].parameters)
    # Server tools are carried in ``extra`` and counted on every request.
    server = [*_tools(), {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    start = diagnostics.counts().get("anthropic_messages.server_tools", 0)
    for _ in range(2):
        decoded = _decode({**_turn(messages), "tools": server})
        assert decoded.extra["tools"] == [server[-1]]
        assert len(decoded.tools) == 5
    assert diagnostics.counts().get("anthropic_messages.server_tools", 0) - start == 2
