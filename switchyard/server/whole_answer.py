"""A whole JSON answer (or a stream's head and first bytes) written to the connection in one
step, past uvicorn's ASGI ``send``.

Layer: ``server``. Needs uvicorn's httptools protocol (the ``server`` extra).

Through ASGI an answer is two ``send`` calls (``http.response.start``, then the body), each a
coroutine of uvicorn's request cycle that checks every header with two regular expressions,
lower-cases its name and joins the head piece by piece: about a tenth of a proxied JSON
request's CPU on ``../shared/bench`` (py-spy, docs/benchmarks.md "Tenth pass"). The guarded
protocol (:mod:`switchyard.server.connections`) offers :func:`respond` bound to the request's
cycle as the scope extension :data:`RESPOND_EXTENSION`; it writes the same bytes uvicorn would
(its status line, its ``server``/``date`` headers, the answer's headers, ``content-length``,
the body) and leaves the cycle in the state uvicorn's own ``send`` would, so keep-alive,
pipelining and shutdown go on as before. A stream's head goes the same way (``stream=True``):
framed in chunks, as uvicorn frames a response without a length, with the body bytes that are
ready — and the last chunk too when the stream ended before its head left, as a fast
upstream's short answer does; whatever follows goes through ``send``.

It declines (returns ``False``, and the app sends through ASGI as usual) whenever the answer
needs something uvicorn's ``send`` decides: a ``HEAD`` request, a paused transport, an answer
already started, a ``connection`` or ``transfer-encoding`` header, a header name not in lower
case or given twice, or a header that uvicorn would refuse (it then raises as before).
"""

from __future__ import annotations

import re
from typing import Any

RESPOND_EXTENSION = "switchyard.respond"
"""Scope extension set by the guarded httptools protocol: ``respond(status, headers, extra,
body) -> bool`` (see :func:`respond`)."""

# uvicorn's own checks (httptools_impl.HEADER_RE / HEADER_VALUE_RE) as character classes: a
# search of the joined names (or values) finds what a search of each would.
_BAD_NAME = re.compile('[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"A-Z]')
_BAD_VALUE = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
_FRAMING = frozenset(("connection", "transfer-encoding", "content-length"))


class _Defaults:
    """uvicorn's default headers (``server``, ``date``) as head bytes; the server replaces the
    list every second (its ``date``), so the bytes are rebuilt when the list changes."""

    __slots__ = ("bytes", "source")

    def __init__(self) -> None:
        self.source: object = None
        self.bytes = b""

    def of(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        if headers is not self.source:
            self.bytes = b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)
            self.source = headers
        return self.bytes


_defaults = _Defaults()


_STATUS_LINES: dict[int, bytes] = {}


def _status_lines() -> dict[int, bytes]:
    """uvicorn's status lines, looked up once (an import statement per answer costs ~1 %)."""
    if not _STATUS_LINES:
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE

        _STATUS_LINES.update(STATUS_LINE)
    return _STATUS_LINES


def respond(
    cycle: Any,
    status: int,
    headers: dict[str, str],
    extra: list[tuple[bytes, bytes]] | None,
    body: bytes,
    *,
    stream: bool = False,
    more: bool = False,
) -> bool:
    """Writes a whole answer on ``cycle`` (uvicorn's ``RequestResponseCycle``) in one write, or
    a stream's head with its first body bytes.

    Args:
        cycle: The request's cycle (bound by the protocol).
        status: HTTP status.
        headers: The answer's headers (lower-case names; ``content-length`` is added, or for a
            ``stream`` ``transfer-encoding: chunked``).
        extra: More headers as bytes pairs (the admission's), or ``None``.
        body: The whole body (a stream's: its first bytes, sent as one chunk).
        stream: Frame the body in chunks, as uvicorn frames a response without a length.
        more: (A ``stream``) more body follows, through uvicorn's ``send`` as usual; without
            it the chunks end here and the answer is complete.

    Returns:
        ``True`` when the answer is written (or the caller is gone, where uvicorn's ``send``
        drops it too); ``False`` when the app must send it through ASGI instead.
    """
    if stream and status in (204, 304):
        return False  # uvicorn sends these without a body or its framing
    if cycle.response_started or cycle.flow.write_paused or cycle.access_log or cycle.scope["method"] == "HEAD":
        return False
    if cycle.disconnected:
        return True  # what uvicorn's send does: nothing
    if extra:  # the admission's headers (CORS), as text: the same checks cover them
        merged = dict(headers)
        for name, value in extra:
            key = name.decode("latin-1")
            if key in merged:  # a name twice: uvicorn's send writes both lines
                return False
            merged[key] = value.decode("latin-1")
        headers = merged
    names = "".join(headers)
    values = "".join(headers.values())
    if _BAD_NAME.search(names) or _BAD_VALUE.search(values) or not _FRAMING.isdisjoint(headers):
        return False
    lines = "".join([f"{name}: {value}\r\n" for name, value in headers.items()]).encode("latin-1")
    status_line = _status_lines().get(status)
    if status_line is None:
        return False
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    keep_alive = cycle.keep_alive
    close = b"" if keep_alive else b"connection: close\r\n"
    if stream:  # uvicorn's order: the headers, ``connection``, then the framing it chose
        cycle.chunked_encoding = True
        chunk = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
        cycle.transport.write(
            b"%s%s%s%stransfer-encoding: chunked\r\n\r\n%s%s"
            % (status_line, _defaults.of(cycle.default_headers), lines, close, chunk, b"" if more else b"0\r\n\r\n")
        )
        if more:
            return True
    else:
        cycle.transport.write(
            b"%s%s%scontent-length: %d\r\n%s\r\n%s"
            % (status_line, _defaults.of(cycle.default_headers), lines, len(body), close, body)
        )
    cycle.response_complete = True
    cycle.message_event.set()
    if not keep_alive:
        cycle.transport.close()
    cycle.on_response()
    return True


__all__ = ["RESPOND_EXTENSION", "respond"]
