"""A raw-socket upstream on 127.0.0.1 for hostile answers the fake upstream cannot give: truncated
or malformed chunked bodies, gzip bombs, endless streams.

Each request is read (headers and a ``content-length`` body), recorded, and answered with the
bytes ``respond(request)`` returns or yields; then the connection is closed. Every wait is
bounded: accepts poll a stop flag, sends give up when the peer is gone, :meth:`stop` joins.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable

Respond = Callable[[bytes], bytes | Iterable[bytes]]


def http_response(status: int, headers: dict[str, str], body: bytes = b"", *, length: bool = True) -> bytes:
    """An HTTP/1.1 response head (and body); ``length=False`` leaves ``content-length`` out.
    Every response says ``connection: close`` (the server closes after each answer)."""
    lines = [f"HTTP/1.1 {status} X", "connection: close"] + [f"{k}: {v}" for k, v in headers.items()]
    if length:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawUpstream:
    """Answers every request with ``respond(request_bytes)`` (bytes, or an iterable of pieces).

    Attributes:
        requests: Every request received (head and body), in order.
        sent: Bytes written to peers so far (for backpressure checks).
    """

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.requests: list[bytes] = []
        self.sent = 0
        self.finished = threading.Event()  # a response was written to its end (or the peer left)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(worker)
            worker.start()

    def _read_request(self, conn: socket.socket) -> bytes | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        return head + b"\r\n\r\n" + body

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)  # a bound on every blocking call; tests finish far sooner
        try:
            request = self._read_request(conn)
            if request is None:
                return
            self.requests.append(request)
            answer = self.respond(request)
            for piece in [answer] if isinstance(answer, bytes) else answer:
                if self._stop.is_set():
                    return
                conn.sendall(piece)
                self.sent += len(piece)
        except OSError:
            pass  # the proxy closed its side: what a hostile test often wants
        finally:
            self.finished.set()
            conn.close()

    def stop(self) -> None:
        """Stops accepting, closes open connections, joins the threads (bounded)."""
        self._stop.set()
        self._sock.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._acceptor.join(timeout=5)
        for worker in self._threads:
            worker.join(timeout=5)

    def __enter__(self) -> RawUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
