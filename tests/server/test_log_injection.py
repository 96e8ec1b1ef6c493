"""Request-derived text cannot forge log lines (issue 23): control characters are escaped in
every field of the access log and in the server's own lines about a request."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from _configs import skeleton_config
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.server.access_log import AccessLog, format_line, printable
from switchyard.server.app import create_app
from switchyard.server.runner import AppThread


@pytest.fixture
def proxy(upstream: Any) -> Iterator[AppThread]:
    sy = Switchyard.from_config(skeleton_config(upstream.port))
    with AppThread(AccessLog(create_app(sy))) as server:
        yield server
    sy.close()


def _access(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "switchyard.access"]


def test_crlf_in_the_path_does_not_forge_an_access_line(proxy: AppThread, caplog: pytest.LogCaptureFixture) -> None:
    forged = b"/v1/nothing%0d%0aPOST%20/v1/chat/completions%20route=agent%20status=200%1b[2J"
    with caplog.at_level(logging.INFO, logger="switchyard.access"):
        with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
            sock.sendall(b"GET " + forged + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            while sock.recv(65536):
                pass
        # The line is written after the last byte: wait, bounded.
        wait_until(lambda: _access(caplog), 5, "the access line", every=0.01)
    lines = _access(caplog)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "\r" not in line and "\n" not in line and "\x1b" not in line
    assert line.startswith("GET /v1/nothing\\r\\nPOST /v1/chat/completions route=agent status=200\\x1b[2J route=- ")


def test_every_field_of_the_line_is_escaped() -> None:
    fields = {"route": "a\nb", "model": "m\x00", "overhead_ms": "1\u2028"}
    line = format_line("GE\rT", "/p\x7f?q=\x85", 200, fields, 1.0)
    assert line == "GE\\rT /p\\x7f?q=\\x85 route=a\\nb status=200 model=m\\x00 overhead_ms=1\\u2028 duration_ms=1.0"


def test_printable_text_is_returned_as_is() -> None:
    text = "/v1/chat/completions?beta=true&name=café"
    assert printable(text) is text
