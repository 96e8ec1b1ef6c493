"""Oversized heads and broken ``Host`` fields are refused on the wire (issue 23): real sockets on
127.0.0.1, a bounded client that never sends more than it must."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from switchyard.api import Switchyard
from switchyard.config.server import RequestLimitsConfig
from switchyard.server.auth import hash_key
from switchyard.server.connections import HeadMeter
from switchyard.server.runner import ServerThread

BODY = b'{"model": "fast", "messages": [{"role": "user", "content": "hi"}]}'


@pytest.fixture(scope="module")
def server(module_config: dict[str, Any]) -> Iterator[ServerThread]:
    # A long header deadline: without the caps, an oversized head would just wait (no answer).
    config = {**module_config, "server": {"client_timeouts": {"header_s": 60}}}
    sy = Switchyard.from_config(config)
    with ServerThread(sy) as srv:
        yield srv
    sy.close()


@pytest.fixture(scope="module")
def keyed(module_config: dict[str, Any]) -> Iterator[ServerThread]:
    keys = [{"name": "k", "hash": hash_key("sy-test-wire")}]
    sy = Switchyard.from_config({**module_config, "server": {"api_keys": keys}})
    with ServerThread(sy) as srv:
        yield srv
    sy.close()


def _connect(srv: ServerThread) -> socket.socket:
    sock = socket.create_connection((srv.host, srv.port), timeout=10)
    sock.settimeout(10)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response: status, headers, body (content-length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed without an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return status, headers, body


def _post(host_lines: bytes, path: bytes = b"/v1/chat/completions", version: bytes = b"1.1") -> bytes:
    return (
        b"POST " + path + b" HTTP/" + version + b"\r\n" + host_lines + b"content-type: application/json\r\n"
        b"content-length: " + str(len(BODY)).encode() + b"\r\nconnection: close\r\n\r\n" + BODY
    )


def _send_until_answered(sock: socket.socket, parts: Iterator[bytes]) -> None:
    """Sends parts until the server stops reading (it answered and closed) or they run out."""
    for part in parts:
        try:
            sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            return


def test_default_header_caps() -> None:
    limits = RequestLimitsConfig()
    assert limits.max_header_bytes == 16 * 1024 and limits.max_header_fields == 100


def test_a_huge_header_line_is_431_before_it_ends(server: ServerThread) -> None:
    sock = _connect(server)
    start = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nx-big: "
    # 64 KiB of one header line and never its end: only a cap on the line answers this.
    _send_until_answered(sock, iter([start, *([b"a" * 4096] * 16)]))
    status, headers, body = _answer(sock)
    assert status == 431 and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_fields_too_large" and "max_header_bytes" in error["message"]
    sock.close()


def test_too_many_header_fields_is_431(server: ServerThread) -> None:
    sock = _connect(server)
    fields = b"".join(b"x-f%d: v\r\n" % i for i in range(150))
    _send_until_answered(sock, iter([b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", fields]))
    status, _, _ = _answer(sock)
    assert status == 431
    sock.close()


def test_431_on_the_anthropic_endpoint_is_in_anthropics_shape(server: ServerThread) -> None:
    sock = _connect(server)
    _send_until_answered(sock, iter([b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-big: ", b"b" * 40_000]))
    status, _, body = _answer(sock)
    assert status == 431 and json.loads(body)["type"] == "error"
    sock.close()


def test_a_head_of_many_medium_lines_is_capped_in_total(server: ServerThread) -> None:
    sock = _connect(server)
    line = b"x-m: " + b"c" * 15_000 + b"\r\n"  # each line under the cap; 5 of them over 4 x 16 KiB
    _send_until_answered(sock, iter([b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", *([line] * 5)]))
    status, _, _ = _answer(sock)
    assert status == 431
    sock.close()


def test_ordinary_heads_and_bodies_with_many_lines_pass(server: ServerThread) -> None:
    sock = _connect(server)
    # 90 fields and an 8 KiB value: under both caps. The body's own newlines are no header lines.
    body = b'{"model": "fast",\n' + b"\n" * 500 + b'"messages": [{"role": "user", "content": "hi"}]}'
    fields = b"".join(b"x-f%d: v\r\n" % i for i in range(88))
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nx-long: " + b"d" * 8192 + b"\r\n" + fields + b""
        b"content-type: application/json\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    sock.sendall(head + body)
    status, _, _ = _answer(sock)
    assert status == 200
    # The next request on the kept-alive connection is metered afresh, byte by byte.
    again = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"\r\n"
    for i in range(len(again)):
        sock.sendall(again[i : i + 1])
    status, _, _ = _answer(sock)
    assert status == 200
    # ...and a third one over the cap is still refused.
    _send_until_answered(sock, iter([b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nx-big: ", b"e" * 20_000]))
    status, _, _ = _answer(sock)
    assert status == 431
    sock.close()


def test_a_body_still_arriving_after_an_early_answer_is_no_head(keyed: ServerThread) -> None:
    sock = _connect(keyed)
    body = b'{"model": "fast", "messages": [{"role": "user", "content": "' + b"z" * 100_000 + b'"}]}'
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    sock.sendall(head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:1000])
    status, _, _ = _answer(sock)
    assert status == 401  # answered before the body was read
    # The rest of the body (one 99 KB line) is still the first request's, then a next request.
    sock.sendall(body[1000:])
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, _, _ = _answer(sock)
    assert status == 200
    sock.close()


@pytest.mark.parametrize(
    ("host_lines", "version", "needle"),
    [
        (b"", b"1.1", "must carry a Host"),
        (b"Host: 127.0.0.1\r\nHost: attacker.example\r\n", b"1.1", "only one Host"),
        (b"Host: attacker.example\r\nHost: 127.0.0.1\r\n", b"1.1", "only one Host"),
        (b"Host: 127.0.0.1, attacker.example\r\n", b"1.1", "not host[:port]"),
        (b"Host: 127.0.0.1\r\nHOST: 127.0.0.1\r\n", b"1.0", "only one Host"),
    ],
)
def test_missing_or_repeated_host_is_400(server: ServerThread, host_lines: bytes, version: bytes, needle: str) -> None:
    sock = _connect(server)
    sock.sendall(_post(host_lines, version=version))
    status, _, body = _answer(sock)
    assert status == 400, body
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_host" and needle in error["message"] and "RFC 9112" in error["message"]
    sock.close()


def test_http10_without_host_is_served(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(_post(b"", version=b"1.0"))
    status, _, _ = _answer(sock)
    assert status == 200
    sock.close()


def test_missing_host_in_anthropics_shape(server: ServerThread) -> None:
    sock = _connect(server)
    sock.sendall(_post(b"", path=b"/v1/messages"))
    status, _, body = _answer(sock)
    assert status == 400 and json.loads(body)["type"] == "error"
    sock.close()


# -- the meter on its own: chunk boundaries anywhere ---------------------------------------------


def _meter_verdicts(head: bytes, size: int) -> tuple[bool, bool]:
    """(refused, still in the head) after feeding ``head`` in chunks of ``size`` bytes."""
    meter = HeadMeter(1024, 16)
    for i in range(0, len(head), size):
        if meter.feed(head[i : i + size]):
            return True, meter.active
        if not meter.active:
            break
    return False, meter.active


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 100_000])
def test_meter_finds_the_end_of_a_head_across_any_split(size: int) -> None:
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"x-%d: v\r\n" % i for i in range(15)) + b"\r\n"
    assert _meter_verdicts(head + b"\n" * 300, size) == (False, False)  # the body's newlines are not counted
    assert _meter_verdicts(head.replace(b"x-0: v", b"x-0: " + b"v" * 1100), size)[0] is True  # one line too long
    many = b"GET / HTTP/1.1\r\n" + b"".join(b"x-%d: v\r\n" % i for i in range(17)) + b"\r\n"
    assert _meter_verdicts(many, size)[0] is True  # 17 fields > 16
