"""An agent's next turn reuses the previous turn's decoded messages, and decides exactly as before.

The Chat decoder keeps the last few conversations' decoded messages (``wire/reuse.py``) so a
stage route on an agent-sized body decodes only the new tail. These tests pin both halves: the
prefix's models are the previous turn's own objects (the cheap path is taken), and the request
and the stage router's decision equal those of a full decode, on recorded agent bodies and on
synthetic conversations of up to 400 messages (200 turns).
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
from switchyard.wire.openai_chat import request as chat_request

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _decide import decide, stage_router  # noqa: E402
from stage_trajectories import long_session, trajectories  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "agents").glob("*chat*.json"))


def _chat_fixture(path: Path) -> dict[str, Any] | None:
    recorded = json.loads(path.read_text())
    return recorded["body"] if recorded["path"] == "/v1/chat/completions" else None


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests an agent sends: the conversation up to each message that is not a tool call's
    answer followed by another (a request ends after a turn's last tool result or a user turn)."""
    ends = [i + 1 for i, m in enumerate(messages) if i + 1 == len(messages) or messages[i + 1]["role"] != "tool"]
    return [messages[:end] for end in ends if messages[end - 1]["role"] != "assistant"]


def _decode(body: dict[str, Any]) -> ChatRequest:
    # A fresh parse, as each HTTP request gets: equal dicts, never the same objects.
    return chat_request.decode_request(json.loads(json.dumps(body)))


def _full(body: dict[str, Any]) -> ChatRequest:
    chat_request.REUSE.clear()
    return _decode(body)


def _conversations() -> list[tuple[str, dict[str, Any], list[list[dict[str, Any]]]]]:
    out = []
    for path in FIXTURES:
        body = _chat_fixture(path)
        if body is not None:
            # The recorded opening (system prompt, tools, first turns) continued by a synthetic
            # session, so the reuse has a prefix of recorded messages to keep.
            grown = [*body["messages"], *long_session(40)[1:]]
            out.append((path.stem, {k: v for k, v in body.items() if k != "messages"}, _turns(grown)))
    base = {"model": "agent", "temperature": 0.2}
    for t in trajectories(per_scenario=1)[::4]:
        out.append((t["id"], base, _turns(t["messages"])))
    # 200 turns, an agent request every fifth: the reuse also spans several new turns at once.
    out.append(("long-400", base, _turns(long_session(400, result_chars=600))[::5]))
    return out


CONVERSATIONS = _conversations()


@pytest.mark.parametrize("compat", [None, "nvidia"])
@pytest.mark.parametrize(("name", "base", "turns"), CONVERSATIONS, ids=[c[0] for c in CONVERSATIONS])
async def test_reused_decode_decides_as_the_full_decode(
    name: str, base: dict[str, Any], turns: list[list[dict[str, Any]]], compat: str | None
) -> None:
    expected = [_full({**base, "messages": messages}) for messages in turns]
    chat_request.REUSE.clear()
    cheap_router, full_router = stage_router(compat), stage_router(compat)
    cheap_store, full_store = MemoryStore(), MemoryStore()
    previous: ChatRequest | None = None
    reused = 0
    for turn, (messages, full) in enumerate(zip(turns, expected, strict=True)):
        cheap = _decode({**base, "messages": messages})
        assert cheap == full, f"{name}: turn {turn} decodes differently"
        if previous is not None and len(previous.messages) >= reuse.MIN_MESSAGES:
            shared = len(previous.messages)
            # The cheap path: the unchanged prefix is the previous turn's models, not a new decode.
            assert all(a is b for a, b in zip(cheap.messages[:shared], previous.messages, strict=True))
            reused += shared
        previous = cheap
        assert await decide(cheap_router, cheap, turn, cheap_store) == await decide(
            full_router, full, turn, full_store
        ), f"{name}: turn {turn} decides differently"
    if any(len(m) >= reuse.MIN_MESSAGES for m in turns[:-1]):
        assert reused > 0, f"{name}: no turn reused its prefix"


async def test_recorded_bodies_reuse_even_when_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reuse, "MIN_MESSAGES", 1)
    chat_request.REUSE.clear()
    for path in FIXTURES:
        body = _chat_fixture(path)
        if body is None:
            continue
        first, again = _decode(body), _decode(body)  # a retry of the same request
        assert first == again == _full(body)
        assert all(a is b for a, b in zip(first.messages, again.messages, strict=True)), path.name


def test_an_edited_history_is_decoded_afresh() -> None:
    messages = long_session(60)
    chat_request.REUSE.clear()
    before = _decode({"model": "m", "messages": messages})
    edited = [messages[0], {"role": "user", "content": "A compacted summary of what happened."}, *messages[10:]]
    after = _decode({"model": "m", "messages": edited})
    assert after == _full({"model": "m", "messages": edited})
    assert not any(a is b for a, b in zip(after.messages[1:], before.messages[1:], strict=False))


def test_a_lossy_message_is_counted_on_every_request() -> None:
    messages = [*long_session(20), {"role": "function", "name": "Read", "content": "old-style result"}]
    chat_request.REUSE.clear()
    start = diagnostics.counts().get("openai_chat.function_role", 0)
    for turn in range(3):
        _decode({"model": "m", "messages": messages + [{"role": "user", "content": f"go on {turn}"}] * turn})
    assert diagnostics.counts().get("openai_chat.function_role", 0) - start == 3


def test_the_kept_conversations_are_bounded() -> None:
    chat_request.REUSE.clear()
    for k in range(reuse.SLOTS + 5):
        _decode({"model": "m", "messages": [{"role": "user", "content": f"task {k}"}, *long_session(20)[1:]]})
    assert len(chat_request.REUSE) == reuse.SLOTS
    chat_request.REUSE.clear()
    _decode({"model": "m", "messages": long_session(reuse.MAX_MESSAGES + 40)[: reuse.MAX_MESSAGES + 1]})
    assert len(chat_request.REUSE) == 0


def test_values_that_compare_equal_but_read_differently_are_decoded_afresh() -> None:
    # ``==`` equates 1, 1.0 and true; their decodings differ where the decoder stringifies.
    def call(n: Any) -> dict[str, Any]:
        calls = [{"id": "c1", "type": "function", "function": {"name": "Read", "arguments": {"n": n}}}]
        return {"role": "assistant", "content": None, "tool_calls": calls}

    opening = long_session(20)
    chat_request.REUSE.clear()
    expected = [(1, '{"n":1}'), (1.0, '{"n":1.0}'), (True, '{"n":true}')]
    for n, arguments in expected:
        messages = [*opening, call(n), {"role": "tool", "tool_call_id": "x", "content": "ok"}]
        (part,) = _decode({"model": "m", "messages": messages}).messages[len(opening)].content
        assert isinstance(part, ToolCallPart)
        assert part.arguments == arguments


class _Message(dict[str, Any]):
    """A parsed message a weak reference can watch (a plain dict cannot be referenced weakly)."""

    __slots__ = ("__weakref__",)


def _watched(messages: list[dict[str, Any]]) -> list[_Message]:
    return [_Message(json.loads(json.dumps(m))) for m in messages]


def test_a_turn_keeps_the_decoded_messages_not_its_own_parse() -> None:
    # What the reuse keeps is walked by the collector's full collections: each turn's own parse of
    # the unchanged prefix must be let go of with the request, not kept in the place of the one
    # that was decoded (the two compare equal).
    import gc
    import weakref

    messages = long_session(60)
    chat_request.REUSE.clear()
    first = _watched(messages[:40])
    chat_request.decode_request({"model": "m", "messages": first})
    second = _watched(messages)
    chat_request.decode_request({"model": "m", "messages": second})
    kept_first = [weakref.ref(m) for m in first]
    prefix, tail = [weakref.ref(m) for m in second[:40]], [weakref.ref(m) for m in second[40:]]
    del first, second
    gc.collect()
    assert all(r() is not None for r in kept_first)  # the decoded ones are what is compared next
    assert all(r() is None for r in prefix)  # this turn's copies went with it
    assert all(r() is not None for r in tail)  # the new tail is kept (it was decoded now)
    # And the next turn still reuses the whole conversation.
    third = _decode({"model": "m", "messages": [*messages, {"role": "user", "content": "go on"}]})
    again = _decode({"model": "m", "messages": messages})
    assert third.messages[:60] == again.messages
    assert all(a is b for a, b in zip(third.messages[:60], again.messages, strict=True))


def test_a_rewind_to_an_earlier_turn_reuses_that_prefix() -> None:
    # An agent that goes back to an earlier turn (a rewind, a retry from there) sends a prefix of
    # a conversation already decoded.
    messages = long_session(80)
    for n in (70, 41, reuse.MIN_MESSAGES):
        expected = _full({"model": "m", "messages": messages[:n]})
        chat_request.REUSE.clear()
        long_turn = _decode({"model": "m", "messages": messages})
        rewound = _decode({"model": "m", "messages": messages[:n]})
        assert rewound == expected
        assert all(a is b for a, b in zip(rewound.messages, long_turn.messages[:n], strict=False)), n
    # Growing again as before (a benchmark's loop starting over), every turn is the kept one's;
    # the longer conversation stays kept whole.
    chat_request.REUSE.clear()
    long_turn = _decode({"model": "m", "messages": messages})
    for n in range(41, 81, 3):
        again = _decode({"model": "m", "messages": messages[:n]})
        assert all(a is b for a, b in zip(again.messages, long_turn.messages[:n], strict=False)), n
    assert len(chat_request.REUSE) == 1
    # Growing otherwise is another conversation, decoded as such.
    other = [*messages[:41], {"role": "user", "content": "instead, do this"}]
    expected = _full({"model": "m", "messages": other})
    _decode({"model": "m", "messages": messages})
    assert _decode({"model": "m", "messages": other}) == expected


def test_a_shorter_conversation_that_is_no_prefix_is_decoded_afresh() -> None:
    messages = long_session(60)
    # The last message of the shorter one differs from the kept one at its place, or an earlier
    # one does (the last compares equal): no reuse.
    edited = [*messages[:29], {**messages[29], "content": "an edited message"}]
    changed = [messages[0], {"role": "user", "content": "another task"}, *messages[2:30]]
    for shorter in (edited, changed):
        expected = _full({"model": "m", "messages": shorter})
        chat_request.REUSE.clear()
        before = _decode({"model": "m", "messages": messages})
        after = _decode({"model": "m", "messages": shorter})
        assert after == expected
        assert not any(a is b for a, b in zip(after.messages[1:], before.messages[1:], strict=False))


def test_a_lossy_message_is_counted_again_after_a_rewind() -> None:
    messages = [*long_session(20), {"role": "function", "name": "Read", "content": "old-style result"}]
    messages += long_session(20)[1:]
    chat_request.REUSE.clear()
    start = diagnostics.counts().get("openai_chat.function_role", 0)
    _decode({"model": "m", "messages": messages})
    rewound = _decode({"model": "m", "messages": messages[:30]})
    assert diagnostics.counts().get("openai_chat.function_role", 0) - start == 2
    assert rewound == _full({"model": "m", "messages": messages[:30]})


def test_a_shorter_session_with_the_same_opening_leaves_the_longer_one_its_conversation() -> None:
    # Two sessions opening alike (one agent harness, the same first task): the one that is a
    # prefix of the other reuses it, and the longer one's next turns still reuse all of their own.
    messages = long_session(60)
    others = [messages[:20]]
    for turn in range(3):
        others.append([*others[-1], {"role": "user", "content": f"step {turn}"}])
    expected = [_full({"model": "m", "messages": other}) for other in others]
    chat_request.REUSE.clear()
    longer = _decode({"model": "m", "messages": messages})
    for turn, other in enumerate(others[:3]):
        shorter = _decode({"model": "m", "messages": other})
        assert shorter == expected[turn]
        if turn == 0:
            assert all(a is b for a, b in zip(shorter.messages, longer.messages[:20], strict=True))
        grown = [*messages, {"role": "user", "content": f"go on {turn}"}]
        again = _decode({"model": "m", "messages": grown})
        assert all(a is b for a, b in zip(again.messages, longer.messages, strict=False)), turn
        messages, longer = grown, again
