"""At shutdown a kept-alive connection is not closed under a request already on its way: the
next request on it is answered with ``connection: close`` (what lets ``serve --workers`` reload
under load without failed requests)."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest
from _waits import wait_until

from switchyard.server import connections
from switchyard.server.runner import AppThread


class App:
    """``/fast`` answers at once; ``/slow`` sends its headers, then waits for :attr:`release`."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": f"{message['type']}.complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if scope["path"] == "/slow":
            await asyncio.to_thread(self.release.wait, 60)
        await send({"type": "http.response.body", "body": b"ok"})


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def exchange(sock: socket.socket, path: str, *, head_only: bool = False) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    if head_only:
        return data
    while not data.endswith(b"ok"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data


def test_idle_and_busy_keepalive_connections_get_their_next_request_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    # Long enough that the test's own pace never matters; the connections end when we close them.
    monkeypatch.setattr(connections, "IDLE_CLOSE_GRACE_S", 60.0)
    app = App()
    server = AppThread(app).start()
    port = server.port
    idle = socket.create_connection(("127.0.0.1", port), timeout=30)
    busy = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        assert b"200 OK" in exchange(idle, "/fast")
        assert b"200 OK" in exchange(busy, "/slow", head_only=True)  # keep-alive promised
        server.server.should_exit = True
        wait_until(lambda: not _listening(port), 30, "the listener gone (shutdown begun)")
        answer = exchange(idle, "/fast")
        assert b"200 OK" in answer and b"connection: close" in answer.lower()
        app.release.set()
        assert busy.recv(2) == b"ok"
        answer = exchange(busy, "/fast")
        assert b"200 OK" in answer and b"connection: close" in answer.lower()
        assert idle.recv(1) == b"" and busy.recv(1) == b""  # then closed
    finally:
        app.release.set()
        idle.close()
        busy.close()
        server.stop()
