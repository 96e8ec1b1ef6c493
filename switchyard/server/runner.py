"""Running the proxy with uvicorn: in the foreground (``switchyard serve``) or on a thread.

Layer: ``server``. Needs the ``server`` extra (uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import Any, cast

from switchyard.api import Switchyard
from switchyard.config.server import ServerConfig
from switchyard.server.app import create_app
from switchyard.server.connections import guarded_protocol
from switchyard.server.drain import Drain

DRAIN_GRACE_S = 5.0
"""After ``drain_s`` and the error events, how long uvicorn still waits before cancelling."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket with ``TCP_NODELAY`` (inherited by accepted connections on Linux),
    so small SSE frames leave immediately instead of waiting for Nagle's algorithm."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()  # a busy port must not leak the socket
        raise
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _uvicorn_config(app: Any, log_level: str) -> Any:
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise RuntimeError("the proxy needs the server extra: pip install 'switchyard-router[server]'") from exc
    settings = getattr(app, "settings", None) or ServerConfig()
    limits = settings.client_timeouts
    return uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,  # uvicorn's own line stays off; serve(access_log=True) wraps AccessLog
        loop="auto",
        # uvicorn's own protocol plus a header deadline, header caps and a connection cap (connections.py).
        http=guarded_protocol(
            limits.header_s,
            limits.max_connections,
            max_header_bytes=settings.limits.max_header_bytes,
            max_header_fields=settings.limits.max_header_fields,
        ),
        lifespan="on",
        # uvicorn types these as int but schedules them with call_later: fractions work.
        timeout_keep_alive=cast(int, limits.keepalive_s),
        # The backstop behind Drain: open requests were already ended after drain_s.
        timeout_graceful_shutdown=cast(int, settings.drain_s + DRAIN_GRACE_S),
    )


def _server(config: Any) -> Any:
    """A uvicorn server whose shutdown ends open requests ``drain_s`` after it began."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # A SwitchyardApp, possibly inside AccessLog (which forwards attributes).
            app: Any = self.config.app
            timer = None
            drain = getattr(app, "drain", None)
            if isinstance(drain, Drain):
                timer = asyncio.get_running_loop().call_later(app.settings.drain_s, drain.end_all)
            try:
                await super().shutdown(sockets)
            finally:
                if timer is not None:
                    timer.cancel()

    return DrainingServer(config)


def serve(
    sy: Switchyard, host: str = "127.0.0.1", port: int = 4000, *, log_level: str = "info", access_log: bool = False
) -> None:
    """Serves ``sy`` until interrupted: on SIGINT/SIGTERM it stops accepting, lets open requests
    run for ``server.drain_s``, then ends each with an error in its API's format.

    With ``access_log``, one line per request goes to the ``switchyard.access`` logger
    (see :mod:`switchyard.server.access_log`).
    """
    sock = bind(host, port)
    app: Any = create_app(sy)
    if access_log:
        from switchyard.server.access_log import AccessLog

        app = AccessLog(app)  # our line (route, model, overhead) replaces uvicorn's
    server = _server(_uvicorn_config(app, log_level))
    server.run(sockets=[sock])


class AppThread:
    """An ASGI app served by uvicorn on a background thread, bound before start (port 0 works).

    Example:
        >>> with AppThread(app) as srv:
        ...     base = srv.base_url   # http://127.0.0.1:PORT/v1
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning") -> None:
        self.app = app
        self.sock = bind(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = _server(_uvicorn_config(app, log_level))
        self._thread = threading.Thread(target=self._run, name="switchyard-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """``http://host:port`` (what Anthropic-style clients want)."""
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run(self.server.serve(sockets=[self.sock]))

    def start(self) -> AppThread:
        """Starts serving and waits (≤ 10 s) until ready."""
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("proxy did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stops serving and waits (≤ 10 s)."""
        self.server.should_exit = True
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> AppThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerThread(AppThread):
    """The Switchyard proxy on a background thread (tests, the demo, benchmarks)."""

    def __init__(self, sy: Switchyard, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning") -> None:
        super().__init__(create_app(sy), host, port, log_level=log_level)
        self.switchyard = sy
