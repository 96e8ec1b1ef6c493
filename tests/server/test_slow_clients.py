"""Slow and surplus clients are cut off (issue 16, item 2): real sockets on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

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


def _closed_after(sock: socket.socket, limit: float) -> tuple[float, bytes]:
    """Seconds until the server closed ``sock`` (reading whatever it sent first)."""
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
    start = time.monotonic()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    closed = False
    try:
        for i in range(40):  # one header byte every 0.1 s: never finishing
            sock.sendall(b"X-Slow-%d: y\r\n" % i)
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        elapsed, _ = _closed_after(sock, 2)
        assert elapsed < 2
    assert time.monotonic() - start < 3.0
    sock.close()


def test_a_silent_connection_is_cut(server: ServerThread) -> None:
    sock = _connect(server)
    elapsed, got = _closed_after(sock, 3)
    assert got == b"" and 0.4 < elapsed < 2.0
    sock.close()


def test_a_body_that_never_completes_gets_408(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: 100\r\n\r\n{}"
    )
    elapsed, got = _closed_after(sock, 3)
    assert got.startswith(b"HTTP/1.1 408"), got[:80]
    assert b"body_s" in got and elapsed < 2.0
    sock.close()


def test_idle_keepalive_connection_is_closed(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert _response(sock).startswith(b"HTTP/1.1 200")
    elapsed, _ = _closed_after(sock, 3)
    assert elapsed < 2.0
    sock.close()


def test_keepalive_requests_each_get_a_fresh_header_deadline(server: ServerThread) -> None:
    sock = _connect(server)
    for _ in range(3):  # 3 x 0.3 s > header_s: the deadline is per request, not per connection
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(0.3)
    sock.close()


def test_connections_beyond_the_cap_get_503(server: ServerThread) -> None:
    held = [_connect(server) for _ in range(LIMITS["max_connections"])]
    try:
        time.sleep(0.1)
        extra = _connect(server)
        _, got = _closed_after(extra, 2)
        assert got.startswith(b"HTTP/1.1 503") and b"max_connections" in got
        extra.close()
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    ok = _connect(server)
    ok.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert _response(ok).startswith(b"HTTP/1.1 200")
    ok.close()
