"""The proxy writes keep-alives only while a stream is silent, one whole event at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from _waits import eventually

from switchyard.engine.reply import Reply
from switchyard.server.app import SwitchyardApp


class _Sy:
    """Just enough of a Switchyard for the ASGI app: one scripted streaming reply."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any, **_: Any) -> Reply:
        return self.reply


SENT: list[bytes] = []  # what the app wrote, for scripts that wait on it


async def _chunks(script: list[bytes | float | int]) -> AsyncIterator[bytes]:
    """Yields the bytes; a float sleeps that long; an int waits (bounded) until that many
    keep-alives were written — a silence measured in pings, which a busy machine cannot stretch."""
    for step in script:
        if isinstance(step, float):
            await asyncio.sleep(step)
        elif isinstance(step, int):
            await eventually(lambda: SENT.count(b"PING") >= step, what=f"{step} keep-alives")  # noqa: B023
        else:
            yield step


async def _serve(reply: Reply) -> list[bytes]:
    app = SwitchyardApp(_Sy(reply))  # type: ignore[arg-type]
    sent = SENT
    sent.clear()
    disconnected = asyncio.Event()
    requests = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "headers": [(b"content-type", b"application/json")],
    }
    await asyncio.wait_for(app(scope, receive, send), 30)
    return [b for b in sent if b]


async def test_pings_fill_silences_and_stop_with_the_stream() -> None:
    # The silence lasts until three pings were written (bounded), then the stream ends at once.
    script: list[bytes | float | int] = [b"event: a\ndata: {}\n\n", 3, b"event: b\ndata: {}\n\n"]
    reply = Reply(200, stream=_chunks(script), keepalive=b"PING", keepalive_s=0.1)
    out = await _serve(reply)
    assert out[0].startswith(b"event: a") and out[-1].startswith(b"event: b"), "no ping after the last event"
    assert out.count(b"PING") >= 3
    assert out.index(b"PING") > 0


async def test_a_busy_stream_gets_no_pings() -> None:
    script: list[bytes | float | int] = []
    for i in range(10):
        script += [f"data: {i}\n\n".encode(), 0.01]
    # 2 s between pings: a gap of 0.01 s that a busy machine stretches stays far below it.
    reply = Reply(200, stream=_chunks(script), keepalive=b"PING", keepalive_s=2.0)
    out = await _serve(reply)
    assert b"PING" not in out and len(out) == 10


async def test_no_keepalive_configured_means_none_sent() -> None:
    reply = Reply(200, stream=_chunks([b"data: x\n\n", 0.2, b"data: y\n\n"]), keepalive=None, keepalive_s=0.05)
    assert b"PING" not in b"".join(await _serve(reply))


async def test_a_stream_that_ends_before_its_first_ping_makes_no_task() -> None:
    from switchyard.server.stream_write import Pinger, WriterState

    loop = asyncio.get_running_loop()
    before = asyncio.all_tasks()
    pinger = Pinger(_never_called, WriterState(last=loop.time()), b"PING", 30.0, loop)
    assert asyncio.all_tasks() == before  # a timer, not a task
    await pinger.aclose()
    assert pinger._handle is None and pinger._task is None


async def _never_called(message: Any) -> None:
    raise AssertionError("no ping was due")


async def test_a_ping_that_fails_ends_quietly_with_the_stream() -> None:
    from switchyard.server.stream_write import Pinger, Stalled, WriterState

    loop = asyncio.get_running_loop()
    tried: list[Any] = []

    async def stalled(message: Any) -> None:
        tried.append(message)
        raise Stalled

    pinger = Pinger(stalled, WriterState(last=loop.time() - 1.0), b"PING", 0.01, loop)
    await eventually(lambda: tried, what="the ping's write")
    await pinger.aclose()  # its failure is retrieved here, not left for the loop to report
    assert tried == [{"type": "http.response.body", "body": b"PING", "more_body": True}]
