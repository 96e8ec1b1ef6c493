"""Running the proxy with uvicorn: in the foreground (``switchyard serve``) or on a thread.

Layer: ``server``. Needs the ``server`` extra (uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from switchyard._listen import bind
from switchyard.api import Switchyard
from switchyard.config.server import ServerConfig
from switchyard.server.app import create_app
from switchyard.server.connections import guarded_protocol
from switchyard.server.drain import Drain

DRAIN_GRACE_S = 5.0
"""After ``drain_s`` and the error events, how long uvicorn still waits before cancelling."""


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


def _server(
    config: Any, *, on_started: Callable[[], None] | None = None, on_closed: Callable[[], None] | None = None
) -> Any:
    """A uvicorn server whose shutdown ends open requests ``drain_s`` after it began.

    ``on_started`` runs once the server accepts connections; ``on_closed`` once shutdown has
    stopped accepting (open requests still run): a supervisor waits for these (workers.py).
    """
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if on_started is not None and self.started:
                on_started()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # A SwitchyardApp, possibly inside AccessLog (which forwards attributes).
            app: Any = self.config.app
            if on_closed is not None:
                # Stop accepting first (uvicorn's shutdown does the same; closing twice is a
                # no-op), so the supervisor learns that new connections go elsewhere now.
                for listener in self.servers:
                    listener.close()
                on_closed()
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
    serve_socket(sy, bind(host, port), log_level=log_level, access_log=access_log)


def serve_socket(
    sy: Switchyard,
    sock: socket.socket,
    *,
    log_level: str = "info",
    access_log: bool = False,
    on_started: Callable[[], None] | None = None,
    on_closed: Callable[[], None] | None = None,
) -> None:
    """Serves ``sy`` on an already listening socket until SIGINT/SIGTERM (see :func:`serve`).

    A worker of ``serve --workers`` runs this on the socket its supervisor bound; ``on_started``
    runs (in the event loop) once connections are accepted, ``on_closed`` once shutdown has
    stopped accepting.
    """
    app: Any = create_app(sy)
    if access_log:
        from switchyard.server.access_log import AccessLog

        app = AccessLog(app)  # our line (route, model, overhead) replaces uvicorn's
    server = _server(_uvicorn_config(app, log_level), on_started=on_started, on_closed=on_closed)
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
    """The Switchyard proxy on a background thread (tests, the demo, benchmarks).

    Unlike ``switchyard serve``, it hands a request's decision record to the sinks before the
    reply completes (``records_after_reply=False``): code that waits for a reply in another
    thread then finds its record. Pass ``records_after_reply=True`` to serve as ``serve`` does.
    """

    def __init__(
        self,
        sy: Switchyard,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        records_after_reply: bool = False,
    ) -> None:
        super().__init__(create_app(sy, records_after_reply=records_after_reply), host, port, log_level=log_level)
        self.switchyard = sy
