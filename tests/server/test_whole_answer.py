"""A whole JSON answer written in one step past uvicorn's ASGI ``send`` (server/whole_answer.py),
on a real uvicorn server: the same bytes on the wire as the ASGI path, keep-alive, pipelining
and ``connection: close`` as uvicorn handles them, and every case it declines sent through ASGI."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from switchyard.config.server import ServerConfig
from switchyard.engine.reply import Reply
from switchyard.server import connections, whole_answer
from switchyard.server.access_log import AccessLog
from switchyard.server.app import SwitchyardApp
from switchyard.server.runner import AppThread

BODY = b'{"id":"c","ok":true}'


class _Sy:
    """Just enough of a Switchyard for the ASGI app: every request gets :attr:`reply`."""

    engine = None  # what the app's start-up touches

    def __init__(self) -> None:
        self.reply = Reply(200, {"content-type": "application/json", "x-switchyard-route": "r"}, body=BODY)
        self.calls = 0

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any, **_: Any) -> Reply:
        self.calls += 1
        return Reply(self.reply.status, dict(self.reply.headers), body=self.reply.body)

    async def aclose(self) -> None:
        pass


WRITTEN: list[bool] = []  # what each call of whole_answer.respond returned


def _counting(*args: Any) -> bool:
    done = whole_answer.respond(*args)
    WRITTEN.append(done)
    return done


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch) -> None:
    WRITTEN.clear()
    monkeypatch.setattr(connections, "respond", _counting)


@pytest.fixture
def served() -> Iterator[tuple[_Sy, AppThread]]:
    sy = _Sy()
    server = AppThread(SwitchyardApp(sy)).start()  # type: ignore[arg-type]
    try:
        yield sy, server
    finally:
        server.stop()


def _request(*, extra: str = "", version: str = "1.1") -> bytes:
    body = b'{"model":"r","messages":[]}'
    head = (
        f"POST /v1/chat/completions HTTP/{version}\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    """Reads ``count`` whole answers (each framed by its content-length)."""
    data = b""
    out: list[bytes] = []
    while len(out) < count:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            length = int(re.search(rb"content-length: (\d+)", data[:end]).group(1))  # type: ignore[union-attr]
            if len(data) >= end + 4 + length:
                out.append(data[: end + 4 + length])
                data = data[end + 4 + length :]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {out!r} {data!r}")
        data += chunk
    return out


def _exchange(port: int, payload: bytes, count: int = 1) -> tuple[list[bytes], socket.socket]:
    # uvicorn's access logger has no handlers here, as under ``serve`` (tests/conftest.py).
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(payload)
    return _answers(sock, count), sock


def _without_date(answer: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*\r\n", b"", answer)


def test_the_bytes_equal_what_uvicorns_send_writes() -> None:
    sy = _Sy()
    direct = AppThread(SwitchyardApp(sy)).start()  # type: ignore[arg-type]
    through_asgi = AppThread(AccessLog(SwitchyardApp(sy))).start()  # the access log sends through ASGI
    try:
        (fast,), a = _exchange(direct.port, _request())
        (slow,), b = _exchange(through_asgi.port, _request())
        a.close()
        b.close()
    finally:
        direct.stop()
        through_asgi.stop()
    assert fast.endswith(b"\r\n\r\n" + BODY)
    assert b"content-length: %d\r\n" % len(BODY) in fast and b"server: uvicorn\r\n" in fast
    assert _without_date(fast) == _without_date(slow)
    assert WRITTEN == [True]  # only the first server wrote past ASGI


def test_keep_alive_and_pipelined_requests_are_answered_in_order(served: tuple[_Sy, AppThread]) -> None:
    sy, server = served
    answers, sock = _exchange(server.port, _request() * 3, count=3)
    try:
        assert all(a.startswith(b"HTTP/1.1 200 OK\r\n") and a.endswith(BODY) for a in answers)
        assert not any(b"connection: close" in a for a in answers)
        sock.sendall(_request())  # the connection is still open for a next request
        assert _answers(sock, 1)[0].endswith(BODY)
    finally:
        sock.close()
    assert sy.calls == 4 and WRITTEN == [True] * 4


@pytest.mark.parametrize(("extra", "version"), [("connection: close\r\n", "1.1"), ("", "1.0")])
def test_a_caller_that_ends_the_connection_gets_connection_close(
    served: tuple[_Sy, AppThread], extra: str, version: str
) -> None:
    _, server = served
    (answer,), sock = _exchange(server.port, _request(extra=extra, version=version))
    try:
        assert answer.endswith(BODY) and answer.count(b"connection: close\r\n") == 1
        assert sock.recv(1) == b""  # then closed
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("headers", "expect"),
    [
        ({"connection": "close"}, b"connection: close\r\n"),  # framing: uvicorn's send decides
        ({"X-Upper": "1"}, b"x-upper: 1\r\n"),  # uvicorn lower-cases names
    ],
)
def test_what_it_declines_goes_through_asgi(
    served: tuple[_Sy, AppThread], headers: dict[str, str], expect: bytes
) -> None:
    sy, server = served
    sy.reply = Reply(200, {"content-type": "application/json", **headers}, body=BODY)
    (answer,), sock = _exchange(server.port, _request())
    sock.close()
    assert answer.endswith(BODY) and answer.count(expect) == 1
    assert WRITTEN == [False]


def test_a_header_uvicorn_refuses_is_still_refused(served: tuple[_Sy, AppThread]) -> None:
    sy, server = served
    sy.reply = Reply(200, {"content-type": "application/json", "x-bad": "a\r\nset-cookie: x=1"}, body=BODY)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(_request())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    assert b"set-cookie" not in data  # no header injection on either path


def test_with_uvicorns_access_log_on_the_answer_goes_through_its_send(
    served: tuple[_Sy, AppThread], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = served
    monkeypatch.setattr(logging.getLogger("uvicorn.access"), "handlers", [caplog.handler])
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    (answer,), sock = _exchange(server.port, _request())
    sock.close()
    assert answer.endswith(BODY) and WRITTEN == [False]
    assert any("POST /v1/chat/completions" in r.getMessage() for r in caplog.records)


def test_cors_headers_of_an_allowed_origin_go_out_with_the_answer() -> None:
    sy = _Sy()
    app = SwitchyardApp(sy, settings=ServerConfig(allowed_origins=["http://app.test"]))  # type: ignore[arg-type]
    server = AppThread(app).start()
    try:
        (answer,), sock = _exchange(server.port, _request(extra="origin: http://app.test\r\n"))
        sock.close()
    finally:
        server.stop()
    assert answer.endswith(BODY) and b"access-control-allow-origin: http://app.test\r\n" in answer
    assert answer.count(b"vary: Origin\r\n") == 1 and WRITTEN == [True]


def test_a_header_named_twice_goes_through_asgi_with_both_lines() -> None:
    sy = _Sy()
    sy.reply = Reply(200, {"content-type": "application/json", "vary": "Accept"}, body=BODY)
    app = SwitchyardApp(sy, settings=ServerConfig(allowed_origins=["http://app.test"]))  # type: ignore[arg-type]
    server = AppThread(app).start()
    try:
        (answer,), sock = _exchange(server.port, _request(extra="origin: http://app.test\r\n"))
        sock.close()
    finally:
        server.stop()
    assert b"vary: Accept\r\n" in answer and b"vary: Origin\r\n" in answer and WRITTEN == [False]
