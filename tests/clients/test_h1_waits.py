"""How long the lean pool's response waits for body bytes (switchyard.clients.h1_response): the
read timeout and a stream's total deadline, both kept by one timer per response."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from switchyard.clients.backend import HttpBackend
from switchyard.clients.h1 import ReadTimeout, StreamDeadline
from switchyard.clients.h1_response import H1Response
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamTimeoutError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo

TARGET = TargetInfo(name="t", model="m")
REQUEST = ChatRequest(messages=[Message.of("user", "x")], stream=True)
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunked(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _text_event(text: str) -> bytes:
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return _chunked(b"data: " + orjson.dumps(chunk) + b"\n\n")


class Trickle(asyncio.Protocol):
    """Answers a stream's head and one event, then a text event every ``every_s`` seconds
    (``every_s=None``: nothing more) until the connection closes."""

    every_s: float | None = 0.02

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.timer: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" in data and self.timer is None:
            self.transport.write(_HEAD + _text_event("first"))
            self._next()

    def _next(self) -> None:
        if self.every_s is not None and not self.transport.is_closing():
            self.timer = asyncio.get_running_loop().call_later(self.every_s, self._drip)

    def _drip(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(_text_event("."))
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()


@pytest.fixture
async def trickle() -> AsyncIterator[int]:
    server = await asyncio.get_running_loop().create_server(Trickle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        Trickle.every_s = 0.02


async def _drain(be: HttpBackend, options: CallOptions) -> int:
    events = await be.open_stream(REQUEST, TARGET, options)
    count = 0
    async for _ in events:
        count += 1
    return count


async def test_a_stream_that_trickles_ends_at_its_total_deadline(trickle: int) -> None:
    be = HttpBackend("up", f"http://127.0.0.1:{trickle}/v1", api_key="sk-test")
    assert be._pool is not None, "a plain http upstream uses the lean pool"
    # Each gap is far below the read timeout: only the total can end this stream.
    with pytest.raises(UpstreamTimeoutError, match=r"stream exceeded its total of 0\.3s"):
        await _drain(be, CallOptions(timeout={"read": 30.0, "total": 0.3}))
    await be.aclose()


async def test_silence_after_the_first_bytes_is_a_read_timeout(trickle: int) -> None:
    Trickle.every_s = None  # the head and one event, then nothing
    be = HttpBackend("up", f"http://127.0.0.1:{trickle}/v1", api_key="sk-test")
    with pytest.raises(UpstreamTimeoutError, match="ReadTimeout"):
        await _drain(be, CallOptions(timeout={"read": 0.2, "total": 30.0}))
    await be.aclose()


async def _next(body: AsyncIterator[bytes]) -> bytes:
    return await anext(body)


async def test_a_wait_ended_by_bytes_keeps_the_timer_and_the_end_of_the_body_drops_it() -> None:
    resp = H1Response(read_timeout=30.0)
    body = resp.aiter_bytes()
    waiting = asyncio.ensure_future(_next(body))
    await asyncio.sleep(0)  # the reader is now waiting
    assert resp._timer is not None
    resp._take(b"data")
    assert await waiting == b"data"
    assert resp._timer is not None  # left for the next wait, not set again for each
    resp._finish()
    assert resp._timer is None
    assert [chunk async for chunk in body] == []


async def test_a_timer_that_fires_before_the_wait_is_over_sets_itself_again() -> None:
    resp = H1Response(read_timeout=30.0)
    body = resp.aiter_bytes()
    waiting = asyncio.ensure_future(_next(body))
    await asyncio.sleep(0)
    first = resp._timer
    assert first is not None
    first.cancel()
    resp._check()  # as if it had fired early (set for an earlier wait's end)
    assert not waiting.done() and resp._timer is not None and resp._timer is not first
    resp._since = time.monotonic() - 31.0  # this wait has now been silent past the read timeout
    resp._check()
    with pytest.raises(ReadTimeout):
        await waiting
    await resp.aclose()
    assert resp._timer is None


async def test_bytes_already_in_are_handed_out_after_the_deadline_then_the_wait_fails() -> None:
    resp = H1Response(read_timeout=None)
    resp._take(b"one")
    resp.stop_at(time.monotonic() - 1.0)
    body = resp.aiter_bytes()
    assert await anext(body) == b"one"
    with pytest.raises(StreamDeadline):
        await anext(body)
    assert isinstance(StreamDeadline("x"), TimeoutError)  # what the backend reports as the stream's total


async def test_a_lifted_deadline_waits_for_bytes_again() -> None:
    resp = H1Response(read_timeout=None)
    resp.stop_at(time.monotonic() - 1.0)
    resp.stop_at(None)
    body = resp.aiter_bytes()
    waiting = asyncio.ensure_future(_next(body))
    await asyncio.sleep(0)
    assert not waiting.done() and resp._timer is None  # no limit at all: no timer
    resp._take(b"late")
    assert await waiting == b"late"
    await resp.aclose()


@pytest.mark.parametrize("pieces", [[], [b"{}"], [b'{"a":', b" 1", b"}"]])
async def test_a_body_that_is_all_here_reads_as_the_chunks_would(pieces: list[bytes]) -> None:
    whole = H1Response(read_timeout=5.0)
    chunked = H1Response(read_timeout=5.0)
    for resp in (whole, chunked):
        for piece in pieces:
            resp._take(piece)
    whole._finish()
    read = asyncio.ensure_future(chunked.aread())  # the body still arriving: read as it comes
    await asyncio.sleep(0)  # one step of the loop: the read starts and waits for the end
    assert not read.done()
    chunked._finish()
    assert await whole.aread() == await read == b"".join(pieces)
    assert whole.content == b"".join(pieces) and whole.buffered == 0


async def test_a_complete_body_with_an_error_still_raises_it() -> None:
    resp = H1Response(read_timeout=5.0)
    resp._take(b"{")
    resp._finish()
    resp._error = ReadTimeout("cut")  # both, as a decoder failing at the end leaves it
    with pytest.raises(ReadTimeout):
        await resp.aread()
