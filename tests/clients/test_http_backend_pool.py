"""HttpBackend keeps upstream connections alive: streamed answers must not cost a new connection
(for a TLS upstream, a new handshake) each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from _waits import eventually

from switchyard.clients.backend import HttpBackend
from switchyard.protocol.call import CallOptions
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.stream import MessageStop, StreamEvent, TextDelta
from switchyard.protocol.targets import TargetInfo


def _sse_response() -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        body = {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    events = [chunk({"role": "assistant", "content": "hi"}), chunk({}, "stop"), b"data: [DONE]\n\n"]
    body = b"".join(f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in events) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + body


_JSON = orjson.dumps({"id": "c", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]})


class _Upstream(asyncio.Protocol):
    """A keep-alive HTTP/1.1 server that counts its connections; with ``hold_end`` set, a
    stream's last chunk (the end of its body) waits until the event is set."""

    connections = 0
    hold_end: asyncio.Event | None = None
    tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        type(self).connections += 1
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].lower()
        length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
        if len(self.buf) < end + 4 + length:
            return
        body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
        if b'"stream":true' in body:
            response, hold = _sse_response(), type(self).hold_end
            if hold is None:
                self.transport.write(response)  # type: ignore[attr-defined]
            else:
                end = b"0\r\n\r\n"
                self.transport.write(response[: -len(end)])  # type: ignore[attr-defined]
                task = asyncio.ensure_future(self._later(hold, end))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        else:
            head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(_JSON)}\r\n\r\n"
            self.transport.write(head.encode() + _JSON)  # type: ignore[attr-defined]

    async def _later(self, hold: asyncio.Event, data: bytes) -> None:
        await hold.wait()
        if not self.transport.is_closing():  # type: ignore[attr-defined]
            self.transport.write(data)  # type: ignore[attr-defined]


@pytest.fixture
async def backend() -> AsyncIterator[HttpBackend]:
    _Upstream.connections = 0
    _Upstream.hold_end = None
    server = await asyncio.get_running_loop().create_server(_Upstream, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    be = HttpBackend("up", f"http://127.0.0.1:{port}/v1")
    try:
        yield be
    finally:
        await be.aclose()
        server.close()
        await server.wait_closed()


TARGET = TargetInfo(name="t", model="m")
REQUEST = ChatRequest(messages=[Message.of("user", "x")])


async def _stream_once(be: HttpBackend) -> list[StreamEvent]:
    events = await be.open_stream(REQUEST, TARGET, CallOptions())
    return [e async for e in events]


async def test_streams_reuse_the_connection(backend: HttpBackend) -> None:
    for _ in range(5):
        got = await _stream_once(backend)
        assert [e for e in got if isinstance(e, TextDelta)] == [TextDelta(text="hi")]
        assert isinstance(got[-1], MessageStop)
        # The response ended with the answer ([DONE] and the body's end in one read): its
        # connection is back in the pool already, nothing is left to read in the background.
        assert not backend._drains
    assert _Upstream.connections == 1


async def test_a_body_that_ends_after_the_answer_is_read_to_its_end(backend: HttpBackend) -> None:
    _Upstream.hold_end = hold = asyncio.Event()
    for _ in range(3):
        got = await _stream_once(backend)
        assert isinstance(got[-1], MessageStop)  # the answer is complete before the body is
        assert backend._drains  # the rest is read in the background ...
        hold.set()
        # ... and the connection goes back to the pool once it is: wait for that (bounded)
        # rather than for a fixed time a busy machine can outrun.
        await eventually(lambda: not backend._drains, what="the stream's tail was drained")
        hold.clear()
    assert _Upstream.connections == 1


async def test_json_and_streams_share_the_pool(backend: HttpBackend) -> None:
    for _ in range(3):
        assert (await backend.complete(REQUEST, TARGET, CallOptions())).text == "hi"
        await _stream_once(backend)
    assert _Upstream.connections == 1


async def test_closing_the_backend_with_a_drain_pending_is_clean(backend: HttpBackend) -> None:
    _Upstream.hold_end = asyncio.Event()  # never set: the body does not end
    await _stream_once(backend)
    assert backend._drains
    await backend.aclose()  # the fixture closes it again: must be harmless
