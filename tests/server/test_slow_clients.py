"""Slow and surplus clients are cut off (issue 16, item 2): real sockets on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.config.server import ClientTimeoutsConfig
from switchyard.server.runner import ServerThread

LIMITS = {"header_s": 0.6, "body_s": 0.6, "keepalive_s": 0.6, "max_connections": 6}


@pytest.fixture(scope="module")
def server(module_config: dict[str, Any]) -> Iterator[ServerThread]:
    sy = Switchyard.from_config({**module_config, "server": {"client_timeouts": LIMITS}})
    with ServerThread(sy) as srv:
        yield srv
    sy.close()


def _connect(srv: ServerThread) -> socket.socket:
    sock = socket.create_connection((srv.host, srv.port), timeout=5)
    sock.settimeout(5)
    return sock


def _closed_after(sock: socket.socket, limit: float = 10.0) -> tuple[float, bytes]:
    """Seconds until the server closed ``sock`` (reading whatever it sent first); a server that
    keeps it open past ``limit`` fails the test (``TimeoutError``). The limit is a bound on a
    busy machine, far above the 0.6 s deadlines under test, not a performance claim."""
    start = time.monotonic()
    got = b""
    sock.settimeout(limit)
    with contextlib.suppress(ConnectionResetError):
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    return time.monotonic() - start, got


def _response(sock: socket.socket) -> bytes:
    """One whole response (headers and a content-length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_default_header_deadline_is_10s() -> None:
    assert ClientTimeoutsConfig().header_s == 10.0


def test_slowloris_headers_are_cut(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    closed = False
    try:
        for i in range(40):  # one header byte every 0.1 s: never finishing
            sock.sendall(b"X-Slow-%d: y\r\n" % i)
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        _closed_after(sock)  # closed by the header deadline (else: TimeoutError)
    sock.close()


def test_a_silent_connection_is_cut(server: ServerThread) -> None:
    start = time.monotonic()  # before connecting: the server's deadline starts later than this
    sock = _connect(server)
    _, got = _closed_after(sock)
    assert got == b"" and time.monotonic() - start >= 0.5  # at the header deadline, not at once
    sock.close()


def test_a_body_that_never_completes_gets_408(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: 100\r\n\r\n{}"
    )
    _, got = _closed_after(sock)
    assert got.startswith(b"HTTP/1.1 408"), got[:80]
    assert b"body_s" in got
    sock.close()


def test_idle_keepalive_connection_is_closed(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert _response(sock).startswith(b"HTTP/1.1 200")
    _closed_after(sock)  # closed at the keep-alive deadline (else: TimeoutError)
    sock.close()


def test_keepalive_requests_each_get_a_fresh_header_deadline(module_config: dict[str, Any]) -> None:
    # Its own server with a long keep-alive: a pause the busy machine stretches must not close
    # the idle connection (that is another test), only the header deadline is under test here.
    limits = {**LIMITS, "keepalive_s": 30}
    sy = Switchyard.from_config({**module_config, "server": {"client_timeouts": limits}})
    with ServerThread(sy) as srv:
        sock = _connect(srv)
        for _ in range(3):  # 3 x 0.3 s > header_s: the deadline is per request, not per connection
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert _response(sock).startswith(b"HTTP/1.1 200")
            time.sleep(0.3)
        sock.close()
    sy.close()


def test_a_next_request_whose_head_trickles_is_cut(module_config: dict[str, Any]) -> None:
    # The second request of a kept-alive connection starts, then its head stalls: the header
    # deadline (0.6 s) closes it long before the 30 s keep-alive would.
    limits = {**LIMITS, "keepalive_s": 30}
    sy = Switchyard.from_config({**module_config, "server": {"client_timeouts": limits}})
    with ServerThread(sy) as srv:
        sock = _connect(srv)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _response(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the head is open
        seconds, got = _closed_after(sock, limit=20.0)
        assert got == b"" and seconds < 20.0
        sock.close()
    sy.close()


def _open_connections(srv: ServerThread) -> int:
    """Connections the proxy has accepted and not yet seen closed."""
    return len(srv.server.server_state.connections)


def _wait_connections(srv: ServerThread, done: Any, seconds: float = 10.0) -> None:
    wait_until(lambda: done(_open_connections(srv)), seconds, "the open connections", every=0.01)


def test_connections_beyond_the_cap_get_503(module_config: dict[str, Any]) -> None:
    # Its own server with a long header deadline: held connections must stay open however long
    # the busy machine takes to accept them all.
    limits = {**LIMITS, "header_s": 30, "keepalive_s": 30}
    sy = Switchyard.from_config({**module_config, "server": {"client_timeouts": limits}})
    cap = LIMITS["max_connections"]
    with ServerThread(sy) as server:
        held = [_connect(server) for _ in range(cap)]
        try:
            _wait_connections(server, lambda n: n >= cap)  # every one accepted before the extra
            extra = _connect(server)
            _, got = _closed_after(extra)
            assert got.startswith(b"HTTP/1.1 503") and b"max_connections" in got
            extra.close()
        finally:
            for sock in held:
                sock.close()
        _wait_connections(server, lambda n: n < cap)  # the closes were seen
        ok = _connect(server)
        ok.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _response(ok).startswith(b"HTTP/1.1 200")
        ok.close()
    sy.close()
