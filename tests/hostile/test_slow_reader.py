"""A caller that never reads a 64 MiB stream (issue 23): the proxy must not buffer it (backpressure
reaches the upstream read) and must let go of the connection after the write deadline, cancelling
the upstream read."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from _raw_upstream import RawUpstream, http_response

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread

pytestmark = pytest.mark.integration

TOTAL = 64 * 1024 * 1024
PIECE = 16 * 1024


def endless(_: bytes) -> Iterator[bytes]:
    """A 64 MiB SSE stream of 16 KiB text deltas (delimited by the end of the connection)."""
    yield http_response(200, {"content-type": "text/event-stream"}, length=False)
    delta = json.dumps(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "a" * PIECE}, "finish_reason": None}],
        }
    )
    event = f"data: {delta}\n\n".encode()
    for _ in range(TOTAL // len(event) + 1):
        yield event
    yield b"data: [DONE]\n\n"


def test_a_caller_that_never_reads_is_cut_off_and_the_upstream_read_stops() -> None:
    with RawUpstream(endless) as upstream:
        config = {
            "llm_clients": {"up": {"base_url": upstream.base_url, "max_retries": 0}},
            "targets": {"t": {"client": "up", "model": "m"}},
            "routes": {"r": {"type": "passthrough", "target": "t"}},
            "server": {"client_timeouts": {"write_s": 1.0}},
        }
        sy = Switchyard.from_config(config)
        records: list[DecisionRecord] = []
        sy.on_decision(records.append)
        try:
            with ServerThread(sy) as server, socket.socket() as caller:
                # A small receive buffer that never grows: the caller reads nothing at all.
                caller.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                caller.settimeout(30)
                caller.connect(("127.0.0.1", server.port))
                body = json.dumps({"model": "r", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
                caller.sendall(
                    (
                        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(body)}\r\n\r\n{body}"
                    ).encode()
                )
                # The upstream's write ends when the proxy drops it (or, without backpressure and
                # a write deadline, once all 64 MiB were swallowed): bounded wait either way.
                assert upstream.finished.wait(timeout=30)
                assert upstream.sent < TOTAL // 2, f"the proxy read {upstream.sent} bytes nobody took"
                # The caller's connection was dropped too: reading it now ends (reset or EOF).
                got = 0
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    try:
                        data = caller.recv(1 << 20)
                    except ConnectionResetError:
                        break
                    if not data:
                        break
                    got += len(data)
                else:
                    raise AssertionError("the proxy kept the caller's connection open")
                assert got < TOTAL // 2
            deadline = time.monotonic() + 10
            while not records and time.monotonic() < deadline:
                time.sleep(0.02)
            assert records and records[-1].status == 499
        finally:
            sy.close()
