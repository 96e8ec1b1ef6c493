"""Text runs through the engine (``HttpBackend.open_stream_runs``, wire/text_run.py): with a
real HttpBackend reading a Chat upstream's SSE over an httpx mock transport, a Chat or Anthropic
caller's stream — on the plain Chat lane or not — replies, records and counts exactly as with the
events one by one, and runs are really taken; a stream handed to Python callers never yields one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from switchyard.engine import plain_chat
from switchyard.protocol.stream import TextDelta
from switchyard.wire.openai_chat.request import decode_request
from switchyard.wire.text_run import TextRun
from tests.engine.test_plain_chat import _strip  # the record without its times

Rig = Any  # tests/engine/conftest.py's

_HEAD = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1735689600, "model": "m-cheap-served"}


def _event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    chunk = {**_HEAD, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _texts(*texts: str) -> bytes:
    return b"".join(_event({"content": t}, usage=None) for t in texts)


_START = _event({"role": "assistant", "content": ""}, usage=None)
_STOP = _event({}, "stop", usage=None)
_USAGE = b"data: " + orjson.dumps({**_HEAD, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}})
_DONE = b"data: [DONE]\n\n"

_STREAMS = {
    "text and usage": _START + _texts("Hel", "lo", ", ", "wörld", ' "quoted"\n') + _STOP + _USAGE + b"\n\n" + _DONE,
    "no usage report": _START + _texts("a", "b", "c") + _STOP + _DONE,
    "leaked markup mid-stream": _START
    + _texts("ok ", "<tool_", "call><function=ls>", "</function></tool_call>")
    + _STOP,
    "markup split before a run": _START + _texts("see <tool_", "call>", " ls", "</tool_call>") + _STOP,
    "in-band error after text": _START + _texts("a", "b") + b'data: {"error": {"message": "overloaded"}}\n\n',
    "malformed chunk after text": _START + _texts("a", "b") + b"data: {oops\n\n" + _texts("c"),
    "cut off": _START + _texts("a", "b", "c"),
    "tool call": _START
    + _event({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "ls", "arguments": ""}}]})
    + _event({"tool_calls": [{"index": 0, "function": {"arguments": '{"p": 1}'}}]})
    + _event({}, "tool_calls")
    + _DONE,
}


def _engine(rig: Callable[..., Rig], runs: bool, stream: bytes, reads: int) -> tuple[Any, Any]:
    import httpx

    from switchyard.clients.backend import HttpBackend

    def answer(request: httpx.Request) -> httpx.Response:
        size = max(1, len(stream) // reads)  # the stream in ``reads`` pieces, as a network hands it over
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]

        async def content() -> Any:
            for piece in pieces:
                yield piece

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content())

    made = rig({})
    backend = HttpBackend("up", "http://up.test/v1", transport=httpx.MockTransport(answer))
    for target in made.engine.targets.values():
        target.backend = backend
    made.engine._plain = plain_chat.relay_routes(made.engine.routes.values(), made.engine.targets)
    assert made.engine._plain  # the rig's "solo" passthrough relays
    if not runs:
        backend.open_stream_runs = None  # type: ignore[method-assign]  # the engine opens it event by event
    return made, backend


_BODY = {
    "model": "solo",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


_CALLERS = {
    "chat, plain lane": ("openai_chat", _BODY),
    "chat, random route": ("openai_chat", {**_BODY, "model": "pair"}),
    "anthropic": (
        "anthropic_messages",
        {"model": "solo", "max_tokens": 64, "messages": _BODY["messages"], "stream": True},
    ),
}


async def _serve(
    rig: Callable[..., Rig], runs: bool, stream: bytes, reads: int, caller: str
) -> tuple[bytes, list[Any], Any]:
    made, backend = _engine(rig, runs, stream, reads)
    fmt, body = _CALLERS[caller]
    body = {**body, "stream": True}
    reply = await made.engine.handle(fmt, orjson.dumps(body), {"content-type": "application/json"})
    assert reply.status == 200 and reply.stream is not None
    out = b"".join([chunk async for chunk in reply.stream])
    await backend.aclose()
    health = made.engine.health.stats()
    health["targets"].get("cheap", {}).get("markup_leaks", {}).pop("last_s_ago", None)  # a time, not a fact
    return out, made.records, health


@pytest.mark.parametrize("caller", list(_CALLERS))
@pytest.mark.parametrize("reads", [1, 3, 1000], ids=["one read", "three reads", "byte by byte"])
@pytest.mark.parametrize("kind", list(_STREAMS))
async def test_runs_stream_record_and_count_as_event_by_event(
    rig: Callable[..., Rig], kind: str, reads: int, caller: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switchyard.wire.anthropic_messages import stream as anthropic_stream
    from switchyard.wire.anthropic_messages.stream import AnthropicStreamEncoder
    from switchyard.wire.openai_chat.stream import ChatStreamEncoder

    monkeypatch.setattr(anthropic_stream, "new_id", lambda prefix: prefix + "fixed")  # the same ids both ways
    runs: list[TextRun] = []
    for encoder in (ChatStreamEncoder, AnthropicStreamEncoder):

        def counted(self: Any, event: Any, encode: Any = encoder.encode) -> bytes:
            if isinstance(event, TextRun):
                runs.append(event)
            return bytes(encode(self, event))

        monkeypatch.setattr(encoder, "encode", counted)
    run_bytes, run_records, run_health = await _serve(rig, True, _STREAMS[kind], reads, caller)
    taken = len(runs)
    one_bytes, one_records, one_health = await _serve(rig, False, _STREAMS[kind], reads, caller)
    assert len(runs) == taken  # none without them
    assert run_bytes == one_bytes
    assert [_strip(r) for r in run_records] == [_strip(r) for r in one_records]
    assert run_health == one_health
    if kind != "tool call" and reads < 1000:
        assert taken  # texts read together came as runs
    if kind.startswith(("leaked markup", "markup split")):
        assert "markup_leak" in run_records[0].details
    if kind.startswith(("in-band", "malformed")):
        assert run_records[0].details.get("mid_stream_failure") is True


async def test_a_python_callers_stream_yields_ir_events_only(rig: Callable[..., Rig]) -> None:
    made, backend = _engine(rig, True, _STREAMS["text and usage"], 1)
    events = await made.engine.stream(decode_request(dict(_BODY)))
    got = [event async for event in events]
    await backend.aclose()
    assert not any(isinstance(e, TextRun) for e in got)
    assert "".join(e.text for e in got if isinstance(e, TextDelta)) == 'Hello, wörld "quoted"\n'
