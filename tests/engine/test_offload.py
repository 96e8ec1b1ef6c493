"""Large request bodies: decoded and freed off the event loop, with the same answers as inline."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from _waits import eventually

from switchyard.engine import intake, offload
from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.wire import codec

Rig = Any

ANSWER = ChatResponse(id="r", model="m", content=[TextPart(text="done")], usage=Usage(input_tokens=10, output_tokens=5))


def _body(n: int, **extra: object) -> bytes:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]
    return orjson.dumps({"model": "solo", "messages": msgs, **extra})


async def test_decode_off_loop_matches_inline_and_restores_gc() -> None:
    # A large body's decode that an earlier test's request left running on its thread keeps
    # the collector paused until it ends: wait for it, or the last assert reads its pause.
    await eventually(lambda: offload._paused == 0 and gc.isenabled(), what="earlier off-loop decodes ended")
    body = _body(3000)
    raw, request = await offload.decode_off_loop(codec("openai_chat"), body)
    assert raw == orjson.loads(body)
    assert request == codec("openai_chat").decode_request(orjson.loads(body))
    # Another test's request may have started a large decode on its thread since: the collector
    # is then paused by that decode, which the count says (read with it under the same lock).
    with offload._lock:
        assert gc.isenabled() or offload._paused > 0


async def test_decode_off_loop_leaves_a_disabled_gc_disabled() -> None:
    gc.disable()
    try:
        await offload.decode_off_loop(codec("openai_chat"), _body(10))
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_invalid_large_body_is_a_400_as_inline() -> None:
    with pytest.raises(InvalidRequestError):
        await offload.decode_off_loop(codec("openai_chat"), b'{"model": "x", "messages": 3}')
    with pytest.raises(InvalidRequestError, match="malformed JSON"):
        await offload.decode_off_loop(codec("openai_chat"), b"{" * 10)
    assert gc.isenabled()


def test_dismantle_frees_only_lists_nobody_else_holds() -> None:
    alone = offload._dismantle(
        [ChatRequest(messages=[Message.of("user", str(i)) for i in range(5000)]), {"messages": list(range(5000))}]
    )
    assert alone == 10000
    kept = ChatRequest(messages=[Message.of("user", str(i)) for i in range(5000)])
    assert offload._dismantle([kept]) == 0
    assert len(kept.messages) == 5000  # still held by this test: untouched
    shared = list(range(5000))
    assert offload._dismantle([{"messages": shared}]) == 0
    assert len(shared) == 5000


async def test_release_waits_until_the_request_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    freed: list[int] = []
    real = offload._dismantle
    monkeypatch.setattr(offload, "_dismantle", lambda objs: freed.append(real(objs)))
    request = ChatRequest(messages=[Message.of("user", str(i)) for i in range(5000)])
    offload.release_off_loop(request)
    await asyncio.sleep(0.1)
    assert freed == []  # this test still holds it
    del request
    await eventually(lambda: bool(freed), 30.0, "the release")
    assert freed == [5000]


@pytest.mark.parametrize("stream", [False, True])
async def test_large_body_gets_the_same_reply_as_inline(
    rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    body = _body(50, stream=stream)
    replies = []
    for threshold in (len(body) + 1, 1):  # inline, then off the loop
        monkeypatch.setattr(intake, "PARSE_OFF_LOOP_BYTES", threshold)
        r = rig({"cheap": [ANSWER]})
        reply = await r.engine.handle("openai_chat", body, {})
        payload = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
        replies.append((reply.status, orjson.loads(payload) if not stream else payload.count(b"data:")))
        assert r.backend.calls[0][2].messages == codec("openai_chat").decode_request(orjson.loads(body)).messages
    assert replies[0][0] == replies[1][0] == 200
    if not stream:
        assert replies[0][1]["choices"] == replies[1][1]["choices"]
    else:
        assert replies[0][1] == replies[1][1]


async def test_an_agent_sized_body_is_read_on_the_loop_and_a_long_one_decoded_off_it(
    rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent's 300 KB conversation of a few dozen messages costs less to parse and decode than
    # the hand-off to a thread; thousands of messages do not, whatever their size.
    hops: list[str] = []
    parse, decode = intake.decode_off_loop, offload.decode_raw_off_loop

    async def parse_hop(*args: Any) -> Any:
        hops.append("parse")
        return await parse(*args)

    async def decode_hop(*args: Any) -> Any:
        hops.append("decode")
        return await decode(*args)

    monkeypatch.setattr(intake, "decode_off_loop", parse_hop)
    monkeypatch.setattr(offload, "decode_raw_off_loop", decode_hop)
    r = rig({"cheap": [ANSWER, ANSWER]})
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "log line\n" * 800} for i in range(41)]
    agent = orjson.dumps({"model": "solo", "messages": turns})
    assert len(agent) > 256 * 1024
    assert (await r.engine.handle("openai_chat", agent, {})).status == 200
    assert hops == []
    long = _body(offload.DECODE_OFF_LOOP_MESSAGES + 1)
    assert len(long) < intake.PARSE_OFF_LOOP_BYTES
    assert (await r.engine.handle("openai_chat", long, {})).status == 200
    assert hops == ["decode"]
    assert r.backend.calls[1][2].messages == codec("openai_chat").decode_request(orjson.loads(long)).messages


async def test_objects_frozen_after_a_decode_go_back_to_the_collector_once_released() -> None:
    # A cycle alive during the decode must still be collectable afterwards (no leak per request).
    # The freeze count is process-wide: a release thread of an earlier test (still waiting for its
    # request to be let go) would unfreeze everything under this test's feet. Wait for them first.
    await eventually(lambda: offload.pending_releases() == 0, 30.0, "no pending releases")
    cycle: list[Any] = []
    cycle.append(cycle)
    _, request = await offload.decode_off_loop(codec("openai_chat"), _body(3000))
    assert gc.get_freeze_count() > 0  # the decode's objects (and the cycle) are frozen meanwhile
    offload.release_off_loop(request)
    del request, cycle
    await eventually(lambda: offload.pending_releases() == 0, 30.0, "no pending releases")
    assert gc.get_freeze_count() == 0
