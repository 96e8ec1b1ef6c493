"""A listening TCP socket, with nothing heavy imported: ``switchyard serve`` binds its port before
it loads the config and the server, so a busy port is reported at once and a client that
connects during start-up waits in the backlog for its answer instead of being refused.
"""

from __future__ import annotations

import socket

__all__ = ["bind"]


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket with ``TCP_NODELAY`` (inherited by accepted connections on Linux),
    so small SSE frames leave immediately instead of waiting for Nagle's algorithm.

    With ``reuse_port`` (``SO_REUSEPORT``), several sockets may bind the same port and the
    kernel spreads new connections across them (``serve --workers``, workers.py)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()  # a busy port must not leak the socket
        raise
    sock.listen(2048)
    sock.setblocking(False)
    return sock
