"""A JSON answer's total deadline on the lean pool: kept by the pool's own read timer (no timeout
scope around the call), with the same errors as before."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from _waits import eventually

from switchyard.clients.backend import HttpBackend
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamError, UpstreamTimeoutError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo

TARGET = TargetInfo(name="t", model="m")
REQUEST = ChatRequest(messages=[Message.of("user", "x")])
_ANSWER = orjson.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)


class Upstream(asyncio.Protocol):
    """``mode``: ``silent`` (never answers), ``trickle`` (the head and one body byte every 20
    ms, never the whole body), ``answer`` (the whole answer at once)."""

    mode = "silent"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.timer: asyncio.TimerHandle | None = None
        self.sent = 0

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" not in data:
            return
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(_ANSWER)}\r\n\r\n"
        if self.mode == "answer":
            self.transport.write(head.encode() + _ANSWER)
        elif self.mode == "trickle":
            self.transport.write(head.encode())
            self._drip()

    def _drip(self) -> None:
        if self.transport.is_closing() or self.sent >= len(_ANSWER) - 1:
            return
        self.transport.write(_ANSWER[self.sent : self.sent + 1])
        self.sent += 1
        self.timer = asyncio.get_running_loop().call_later(0.02, self._drip)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()


@pytest.fixture
async def upstream() -> AsyncIterator[int]:
    server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        Upstream.mode = "silent"


def _backend(port: int, **kw: object) -> HttpBackend:
    be = HttpBackend("up", f"http://127.0.0.1:{port}/v1", api_key="sk-test", **kw)  # type: ignore[arg-type]
    assert be._pool is not None, "a plain http upstream uses the lean pool"
    return be


async def test_a_head_that_never_comes_ends_at_the_total(upstream: int) -> None:
    be = _backend(upstream)
    with pytest.raises(UpstreamTimeoutError, match=r"no complete answer within its total of 0\.3s"):
        await be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 30.0, "total": 0.3}))
    await be.aclose()


async def test_a_body_that_trickles_ends_at_the_total(upstream: int) -> None:
    Upstream.mode = "trickle"  # every gap far below the read timeout: only the total ends it
    be = _backend(upstream)
    with pytest.raises(UpstreamTimeoutError, match=r"no complete answer within its total of 0\.3s"):
        await be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 30.0, "total": 0.3}))
    await be.aclose()


async def test_silence_shorter_than_the_total_is_a_read_timeout(upstream: int) -> None:
    be = _backend(upstream)
    with pytest.raises(UpstreamTimeoutError, match="ReadTimeout"):
        await be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 0.2, "total": 30.0}))
    await be.aclose()


async def test_a_busy_pool_surfaces_as_such_inside_the_total(upstream: int) -> None:
    be = _backend(upstream, max_connections=1)
    options = CallOptions(timeout={"read": 30.0, "total": 0.4})
    holder = asyncio.ensure_future(be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 60.0, "total": 60.0})))
    try:
        await eventually(lambda: be._pool is not None and be._pool._open, what="the first call holds the connection")
        with pytest.raises(UpstreamError, match="connection pool exhausted"):
            await be.complete(REQUEST, TARGET, options)
    finally:
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)
        await be.aclose()


async def test_an_answer_in_time_is_read_and_its_connection_kept(upstream: int) -> None:
    Upstream.mode = "answer"
    be = _backend(upstream)
    for _ in range(3):
        response = await be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 30.0, "total": 5.0}))
        assert response.text == "ok"
    assert be._pool is not None and len(be._pool._open) == 1  # one connection, reused
    await be.aclose()
