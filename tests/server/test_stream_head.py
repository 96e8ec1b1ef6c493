"""A stream's head written in one step with the body that is ready (server/whole_answer.py,
``respond(stream=True)``), on a real uvicorn server: the same bytes on the wire as uvicorn's
ASGI ``send``, whether the whole stream was ready at once or more of it came later, on
kept-alive and closing connections alike."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from switchyard.engine.reply import Reply
from switchyard.server import connections, whole_answer
from switchyard.server.access_log import AccessLog
from switchyard.server.app import SwitchyardApp
from switchyard.server.runner import AppThread

EVENTS = [b'data: {"n":1}\n\n', b'data: {"n":2}\n\n', b"data: [DONE]\n\n"]


class _Sy:
    """Just enough of a Switchyard for the ASGI app: every request gets a stream of
    :data:`EVENTS`; with ``waits``, the stream waits for the loop once after the first."""

    engine = None

    def __init__(self, events: list[bytes], *, waits: bool = False) -> None:
        self.events = events
        self.waits = waits

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any, **_: Any) -> Reply:
        return Reply(200, {"content-type": "text/event-stream", "x-switchyard-route": "r"}, stream=self._stream())

    async def _stream(self) -> AsyncIterator[bytes]:
        for i, event in enumerate(self.events):
            if i == 1 and self.waits:
                await asyncio.sleep(0)  # the upstream has nothing more yet: the head leaves now
            yield event

    async def aclose(self) -> None:
        pass


WRITTEN: list[tuple[bool, bool]] = []  # (more, written) of each stream head respond was asked for


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch) -> None:
    WRITTEN.clear()

    def counting(*args: Any, **kwargs: Any) -> bool:
        done = whole_answer.respond(*args, **kwargs)
        if kwargs.get("stream"):
            WRITTEN.append((kwargs["more"], done))
        return done

    monkeypatch.setattr(connections, "respond", counting)


def _request(extra: str = "", version: str = "1.1") -> bytes:
    body = b'{"model":"r","messages":[],"stream":true}'
    head = (
        f"POST /v1/chat/completions HTTP/{version}\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def _chunked(sock: socket.socket, data: bytes = b"") -> tuple[bytes, bytes]:
    """One chunked answer read off ``sock`` (after ``data``), and what followed it."""
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            at = end + 4
            while True:
                line_end = data.find(b"\r\n", at)
                if line_end < 0:
                    break
                size = int(data[at:line_end], 16)
                if len(data) < line_end + 2 + size + 2:
                    break
                at = line_end + 2 + size + 2
                if size == 0:
                    return data[:at], data[at:]
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk


def _body(answer: bytes) -> bytes:
    """The chunks' payload, joined."""
    rest = answer[answer.index(b"\r\n\r\n") + 4 :]
    out = b""
    while True:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return out
        out, rest = out + rest[:size], rest[size + 2 :]


def _served(app: Any) -> Iterator[AppThread]:
    server = AppThread(app).start()
    try:
        yield server
    finally:
        server.stop()


def _both(sy: _Sy, payload: bytes) -> tuple[bytes, bytes]:
    """The answer to ``payload`` from the app as it is, and through uvicorn's ASGI ``send`` (the
    access log wraps the app and sends through ASGI)."""
    answers = []
    for app in (SwitchyardApp(sy), AccessLog(SwitchyardApp(sy))):  # type: ignore[arg-type]
        for server in _served(app):
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(payload)
                answers.append(_chunked(sock)[0])
    return answers[0], answers[1]


def _without_date(answer: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*\r\n", b"", answer)


@pytest.mark.parametrize("waits", [False, True])
def test_the_bytes_equal_what_uvicorns_send_writes(waits: bool) -> None:
    fast, slow = _both(_Sy(EVENTS, waits=waits), _request())
    assert b"transfer-encoding: chunked\r\n" in fast and b"content-length" not in fast
    assert _body(fast) == b"".join(EVENTS)
    assert _without_date(fast) == _without_date(slow)
    # Ready at once: the whole stream in one step; else the head with the first event, then
    # the rest through uvicorn's send.
    assert WRITTEN == [(waits, True)]


def test_an_empty_stream_is_a_head_and_the_last_chunk() -> None:
    fast, slow = _both(_Sy([]), _request())
    assert fast.endswith(b"\r\n\r\n0\r\n\r\n") and _without_date(fast) == _without_date(slow)


@pytest.mark.parametrize(("extra", "version"), [("connection: close\r\n", "1.1"), ("", "1.0")])
def test_a_caller_that_ends_the_connection_gets_connection_close(extra: str, version: str) -> None:
    fast, slow = _both(_Sy(EVENTS), _request(extra, version))
    assert fast.count(b"connection: close\r\n") == 1 and _without_date(fast) == _without_date(slow)


@pytest.mark.parametrize("waits", [False, True])
def test_the_connection_serves_the_next_request(waits: bool) -> None:
    for server in _served(SwitchyardApp(_Sy(EVENTS, waits=waits))):  # type: ignore[arg-type]
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(_request() * 2)  # pipelined: answered in order
            first, rest = _chunked(sock)
            second, rest = _chunked(sock, rest)
            sock.sendall(_request())
            third, _ = _chunked(sock, rest)
    assert all(_body(a) == b"".join(EVENTS) for a in (first, second, third))
    assert WRITTEN == [(waits, True)] * 3
