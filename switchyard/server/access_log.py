"""One log line per request (``switchyard serve --access-log``).

Layer: ``server``. An ASGI wrapper around the proxy app: it reads what the response already says
(status and the ``x-switchyard-*`` headers) and times the request until its last body byte, so
a streamed answer is logged when the stream ends. Nothing is added to the request path when the
wrapper is not installed.

Line format (logger ``switchyard.access``, level INFO)::

    POST /v1/chat/completions route=agent status=200 model=efficient overhead_ms=0.41 duration_ms=212.3

Every field that comes from the request (method, path and query, which uvicorn has already
percent-decoded) or the response goes through :func:`printable` first: a path carrying
``%0d%0a`` cannot start a forged line of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from switchyard.server.app import ABORT_EXTENSION, connection_aborter
from switchyard.server.escape import printable
from switchyard.server.whole_answer import RESPOND_EXTENSION

logger = logging.getLogger("switchyard.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_WANTED = {
    b"x-switchyard-route": "route",
    b"x-switchyard-selected-model": "model",
    b"x-switchyard-overhead-ms": "overhead_ms",
}


def format_line(method: str, path: str, status: int | None, fields: dict[str, str], duration_ms: float) -> str:
    """The access-log line of one request (``-`` for what the response did not say); every
    text field escaped by :func:`printable`."""
    route = printable(fields.get("route") or "-")
    model = printable(fields.get("model") or "-")
    overhead = printable(fields.get("overhead_ms") or "-")
    return (
        f"{printable(method)} {printable(path)} route={route} status={status if status is not None else '-'} "
        f"model={model} overhead_ms={overhead} duration_ms={duration_ms:.1f}"
    )


class AccessLog:
    """Wraps an ASGI app and logs one line per HTTP request.

    Args:
        app: The app to wrap (normally :class:`~switchyard.server.app.SwitchyardApp`).
        log: Where lines go (default: the ``switchyard.access`` logger).
    """

    def __init__(self, app: App, log: logging.Logger | None = None) -> None:
        self.app = app
        self.log = log or logger

    def __getattr__(self, name: str) -> Any:
        # ``switchyard``, ``max_body``… of the wrapped app stay reachable.
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status: int | None = None
        fields: dict[str, str] = {}
        logged = False

        def emit() -> None:
            nonlocal logged
            if not logged:
                logged = True
                path = scope["path"]
                query = scope.get("query_string") or b""
                if query:
                    path = f"{path}?{query.decode('latin-1')}"
                ms = (time.perf_counter() - t0) * 1000
                self.log.info(format_line(scope["method"], path, status, fields, ms))

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for key, value in message.get("headers") or []:
                    name = _WANTED.get(bytes(key).lower())
                    if name is not None:
                        fields[name] = bytes(value).decode("latin-1")
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                emit()

        # ``watch`` hides uvicorn's own send: hand its way of dropping the connection on (the
        # app's write deadline needs it, see switchyard.server.app).
        abort = connection_aborter(scope, send)
        extensions = scope.setdefault("extensions", {})
        if abort is not None:
            extensions[ABORT_EXTENSION] = abort
        extensions.pop(RESPOND_EXTENSION, None)  # an answer written past ``send`` would not be logged
        try:
            await self.app(scope, receive, watch)
        finally:
            emit()  # the caller went away mid-stream, or the app failed: still one line


__all__ = ["AccessLog", "format_line", "printable"]
