"""The proxy writes keep-alives only while a stream is silent, one whole event at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from switchyard.engine.reply import Reply
from switchyard.server.app import SwitchyardApp


class _Sy:
    """Just enough of a Switchyard for the ASGI app: one scripted streaming reply."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any) -> Reply:
        return self.reply


async def _chunks(script: list[bytes | float]) -> AsyncIterator[bytes]:
    for step in script:
        if isinstance(step, float):
            await asyncio.sleep(step)
        else:
            yield step


async def _serve(reply: Reply) -> list[bytes]:
    app = SwitchyardApp(_Sy(reply))  # type: ignore[arg-type]
    sent: list[bytes] = []
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
    await asyncio.wait_for(app(scope, receive, send), 5)
    return [b for b in sent if b]


async def test_pings_fill_silences_and_stop_with_the_stream() -> None:
    script: list[bytes | float] = [b"event: a\ndata: {}\n\n", 0.35, b"event: b\ndata: {}\n\n", 0.02]
    reply = Reply(200, stream=_chunks(script), keepalive=b"PING", keepalive_s=0.1)
    out = await _serve(reply)
    assert out[0].startswith(b"event: a") and out[-1].startswith(b"event: b"), "no ping after the last event"
    pings = out.count(b"PING")
    assert 2 <= pings <= 4
    assert out.index(b"PING") > 0


async def test_a_busy_stream_gets_no_pings() -> None:
    script: list[bytes | float] = []
    for i in range(10):
        script += [f"data: {i}\n\n".encode(), 0.01]
    reply = Reply(200, stream=_chunks(script), keepalive=b"PING", keepalive_s=0.2)
    out = await _serve(reply)
    assert b"PING" not in out and len(out) == 10


async def test_no_keepalive_configured_means_none_sent() -> None:
    reply = Reply(200, stream=_chunks([b"data: x\n\n", 0.2, b"data: y\n\n"]), keepalive=None, keepalive_s=0.05)
    assert b"PING" not in b"".join(await _serve(reply))
