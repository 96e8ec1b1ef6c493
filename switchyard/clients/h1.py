"""A lean HTTP/1.1 client for the upstream POSTs on the hot path: asyncio protocol + httptools.

Layer: ``clients``. :class:`~switchyard.clients.backend.HttpBackend` sends its answer calls
(``complete``, ``open_stream``) through this pool when httptools is installed (the ``server``
extra) and no transport was injected or proxy configured; everything else (health probes,
``/models``, token counts, injected test transports, proxies from the environment) stays on
``httpx``. It exists because httpx → httpcore → anyio cost about two thirds of the proxy's CPU
per request (docs/benchmarks.md).

What it keeps from the httpx path, so that callers see no difference:

- the same request bytes apart from header order: ``Host``, the backend's headers (httpx's
  defaults included: ``accept-encoding: gzip, deflate``, ``user-agent``), ``content-length``;
- the same failures under the same names (``ConnectError``, ``ConnectTimeout``,
  ``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``, ``DecodingError``: subclasses of
  :class:`TransportError` here), which the backend turns into the same upstream errors;
- ``gzip``/``deflate`` bodies are decoded — in pieces of at most :data:`DECODE_PIECE` bytes, and
  never past the pool's ``max_response_bytes`` (a 32 KiB gzip bomb does not become 32 MiB in
  memory: the response fails with :class:`ResponseTooLarge`, a :class:`DecodingError`);
- TLS with the context httpx would build (``httpx.create_ssl_context``: certifi,
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``).

What it does differently: a connection goes back to the pool the moment its response is
complete (the rest of a stream is buffered, at most :data:`MAX_BUFFER` bytes before the
socket is paused), and a pooled connection the server closed is noticed when it closes, not
probed on every request.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httptools

from switchyard.clients.h1_errors import (
    ConnectError,
    ConnectTimeout,
    DecodingError,
    PoolTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    ResponseTooLarge,
    StreamDeadline,
    TimeoutException,
    TransportError,
)
from switchyard.clients.h1_response import DECODE_PIECE, MAX_BUFFER, H1Response

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Default cap on a response body: the whole body of a JSON answer, and the decoded size of a
compressed one (streamed or not)."""

_ILLEGAL = re.compile(r"[\r\n\x00]")
"""Characters no header name or value may carry (RFC 9110 §5.5)."""

_OWN = frozenset({"host", "content-length"})
"""Headers the pool writes itself (the origin it connects to, the body it sends)."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("timed out waiting for the upstream"))


def _expire_total(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(StreamDeadline("the answer's deadline passed while waiting for the upstream"))


class _Connection(asyncio.Protocol):
    """One keep-alive connection; parses responses with httptools as bytes arrive."""

    def __init__(self, pool: H1Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: H1Response | None = None
        self.head: asyncio.Future[None] | None = None
        self.closed = False
        self.paused = False
        self.got_bytes = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        if self.response is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._broken(RemoteProtocolError(f"malformed upstream response: {exc}"))

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        resp = self.response
        if resp is not None and not resp.complete:
            if self.head is not None and self.head.done() and _reads_to_close(resp):
                try:
                    resp._finish()  # a body delimited by the end of the connection
                except (zlib.error, DecodingError) as err:
                    resp._fail(err if isinstance(err, DecodingError) else DecodingError(f"cannot decode: {err}"))
            elif self.got_bytes:
                self._broken(ReadError("upstream closed the connection mid-response"))
            else:
                self._broken(RemoteProtocolError("Server disconnected without sending a response."))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if self.response is not None:
            self.response._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        resp = self.response
        if resp is None:
            return
        resp.status_code = self.parser.get_status_code()
        for name, value in resp._raw_headers:
            lowered = name.lower()
            if lowered == b"content-type":
                resp.content_type = value.decode("latin-1")
            elif lowered == b"content-encoding":
                resp._decoder = _decoder(value)
        if self.head is not None and not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        resp = self.response
        if resp is None:
            return
        try:
            resp._feed(body)
        except zlib.error as exc:
            self._broken(DecodingError(f"cannot decode the upstream body: {exc}"))
            return
        except DecodingError as exc:
            self._broken(exc)
            return
        if resp.buffered > MAX_BUFFER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        resp, self.response = self.response, None
        if resp is None:
            self.abort()  # a second response to one request: never reuse this connection
            return
        keep = self.parser.should_keep_alive()
        try:
            resp._finish()
        except (zlib.error, DecodingError) as exc:
            self.response = resp
            self._broken(exc if isinstance(exc, DecodingError) else DecodingError(f"cannot decode: {exc}"))
            return
        if keep and not self.closed:
            self.resume()
            self.pool.release(self)
        else:
            self.abort()

    # used by the pool and the response
    def send(self, data: bytes, resp: H1Response) -> asyncio.Future[None]:
        assert self.transport is not None
        self.response = resp
        resp._conn = self
        self.got_bytes = False
        self.head = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.head

    def resume(self) -> None:
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def abort(self) -> None:
        self.closed = True
        self.pool.forget(self)
        if self.transport is not None:
            self.transport.abort()

    def _broken(self, exc: BaseException) -> None:
        resp, self.response = self.response, None
        if self.head is not None and not self.head.done():
            self.head.set_exception(exc)
            self.head.exception()  # retrieved: the request path re-raises it from the response
        if resp is not None:
            resp._fail(exc)
        self.abort()


def _default_ssl() -> ssl.SSLContext:
    """The TLS context httpx builds by default (certifi; ``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""
    import httpx  # only for https upstreams

    return httpx.create_ssl_context()


def _reads_to_close(resp: H1Response) -> bool:
    names = {name.lower() for name, _ in resp._raw_headers}
    return b"content-length" not in names and b"transfer-encoding" not in names


def _decoder(value: bytes) -> Any:
    coding = value.strip().lower()
    if coding == b"gzip":
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if coding == b"deflate":
        return zlib.decompressobj()
    if coding in (b"", b"identity"):
        return None
    raise DecodingError(f"unsupported content-encoding {value.decode('latin-1')!r}")


class H1Pool:
    """Keep-alive connections to one upstream origin, for POSTs to one URL.

    Args:
        url: The URL every request goes to (``http`` or ``https``).
        headers: Headers sent on every request (``Host`` and ``content-length`` are added),
            encoded once into the request prefix.
        defaults: Headers sent on every request unless the request gives its own value (names
            compared case-insensitively), such as ``anthropic-version``, which callers usually
            send themselves. Kept out of the prefix, so replacing one costs nothing extra.
        max_connections: Open connections at most; further requests wait for one.
        ssl_context: TLS settings for ``https`` (httpx's defaults when ``None``).
        max_response_bytes: Cap on a JSON answer's body and on a compressed body's decoded
            size (``None``: no cap).
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        defaults: Mapping[str, str] | None = None,
        max_connections: int = 256,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int | None = MAX_RESPONSE_BYTES,
    ) -> None:
        parts = urlsplit(url)
        self.max_response_bytes = max_response_bytes
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.ssl = (ssl_context or _default_ssl()) if self.tls else None
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if default_port else f"{host}:{self.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.defaults = {k.lower(): v for k, v in (defaults or {}).items() if k.lower() not in _OWN}
        self._start = f"POST {target} HTTP/1.1\r\nhost: {authority}\r\n"
        skip = _OWN | self.defaults.keys()  # a default is sent once, as a default
        self._fixed = {k.lower(): f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in skip}
        # The request line and fixed headers are encoded once; a request adds the defaults it
        # does not replace, its own headers and content-length.
        self._prefix = (self._start + "".join(self._fixed.values())).encode("latin-1")
        self._default_lines = "".join(f"{k}: {v}\r\n" for k, v in self.defaults.items()).encode("latin-1")
        self.max_connections = max_connections
        self.errors = TransportError
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._connecting = 0  # connections being opened count against the limit too
        self._waiters: deque[asyncio.Future[None]] = deque()

    def release(self, conn: _Connection) -> None:
        """A connection whose response is complete is free again."""
        if conn.closed:
            return
        self._idle.append(conn)
        self._wake_one()

    def forget(self, conn: _Connection) -> None:
        """A connection is closed: it no longer counts against the limit."""
        if conn in self._open:
            self._open.discard(conn)
            if conn in self._idle:
                self._idle.remove(conn)
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connection(self, connect_timeout: float | None, pool_timeout: float | None = None) -> _Connection:
        loop = asyncio.get_running_loop()
        until = None if pool_timeout is None else loop.time() + pool_timeout
        while True:
            while self._idle:
                conn = self._idle.pop()  # most recently used: least likely to have timed out
                if not conn.closed:
                    return conn
            if len(self._open) + self._connecting < self.max_connections:
                return await self._connect(connect_timeout)
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(until):
                    await waiter
            except TimeoutError as exc:
                self._wake_one()  # pass on a wake-up that may have raced the timeout
                raise PoolTimeout(
                    f"no free connection to {self.host}:{self.port} within {pool_timeout:g}s "
                    f"(all {self.max_connections} busy)"
                ) from exc
            except BaseException:
                waiter.cancel()
                self._wake_one()  # pass a wake-up this waiter can no longer use
                raise

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        factory: Callable[[], _Connection] = lambda: _Connection(self)  # noqa: E731
        self._connecting += 1
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    factory, self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.tls else None
                )
        except TimeoutError as exc:
            raise ConnectTimeout(f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:  # ssl.SSLError is an OSError too
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        finally:
            self._connecting -= 1
            self._wake_one()  # a failed attempt frees its slot; a waiter may try
        self._open.add(conn)
        return conn

    def _head(self, extra: Mapping[str, str] | None, length: int) -> bytes:
        tail = b"content-length: " + str(length).encode() + b"\r\n\r\n"
        if not extra:
            return self._prefix + self._default_lines + tail
        own: dict[str, str] = {}
        for k, v in extra.items():
            if _ILLEGAL.search(k) or _ILLEGAL.search(v):
                # A CR or LF would start a header (or a request) of its own upstream; httpx
                # (h11) refuses such a value with a transport error, and so does this pool.
                raise TransportError(f"illegal character in header {k!r}")
            lowered = k.lower()
            if lowered not in _OWN:  # the pool's own framing headers are never replaced
                own[lowered] = v
        prefix = self._prefix
        if not own.keys().isdisjoint(self._fixed):
            # A request's value replaces a fixed header (as in httpx's header merge): the prefix
            # is rebuilt without it. Rare; the backend passes headers callers forward as defaults.
            prefix = (self._start + "".join(line for k, line in self._fixed.items() if k not in own)).encode("latin-1")
        defaults = self.defaults
        lines = "".join(f"{k}: {v}\r\n" for k, v in defaults.items() if k not in own) if defaults else ""
        lines += "".join(f"{k}: {v}\r\n" for k, v in own.items())
        return prefix + lines.encode("latin-1") + tail

    async def post(
        self,
        body: bytes,
        *,
        extra_headers: Mapping[str, str] | None = None,
        connect_timeout: float | None = None,
        pool_timeout: float | None = None,
        read_timeout: float | None = None,
        stream: bool = False,
        deadline: float | None = None,
    ) -> H1Response:
        """POSTs ``body``; returns once the response headers are in (and, unless ``stream``,
        the whole body, in ``content``).

        ``extra_headers`` (names case-insensitive) replace a default or fixed header of the
        same name; ``Host`` and ``content-length`` stay the pool's own. ``deadline`` (a
        ``time.monotonic()`` value) bounds the whole call: past it, a wait ends with
        :class:`~switchyard.clients.h1_errors.StreamDeadline` (a ``TimeoutError``), kept by the
        same timer as the read timeout (no timeout scope around the call), and the response's
        later waits keep it too (:meth:`H1Response.stop_at`).
        """
        # The head first: a header that cannot be sent must not cost a pooled connection.
        head = self._head(extra_headers, len(body))
        idle = self._idle
        if deadline is None or (idle and not idle[-1].closed):
            conn = await self._connection(connect_timeout, pool_timeout)
        else:  # connecting, or waiting for a busy pool: bounded by the deadline as well
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    conn = await self._connection(connect_timeout, pool_timeout)
            except TimeoutError as exc:  # the scope's own (the pool's and the connect's are not TimeoutErrors)
                raise StreamDeadline("the answer's deadline passed while connecting to the upstream") from exc
        resp = H1Response(read_timeout, self.max_response_bytes, whole=not stream)
        loop = resp._loop = asyncio.get_running_loop()
        if deadline is not None:
            resp.stop_at(deadline)
        try:
            waiter = conn.send(head + body if len(body) < 65536 else head, resp)
            if len(body) >= 65536:
                assert conn.transport is not None
                conn.transport.write(body)  # no copy of a large body into the head
            timer = None
            total = None if deadline is None else deadline - time.monotonic()
            if total is not None and (read_timeout is None or total <= read_timeout):
                timer = loop.call_later(max(total, 0.0), _expire_total, waiter)
            elif read_timeout is not None:
                timer = loop.call_later(read_timeout, _expire, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
            if not stream:
                await resp.aread()
        except BaseException:
            # Cancelled (deadline, caller gone) or failed mid-way: the connection's state is
            # unknown, so it is not reused.
            if not resp.complete and not conn.closed:
                conn.abort()
            await resp.aclose()
            raise
        return resp

    async def aclose(self) -> None:
        """Closes every connection."""
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()


__all__ = [
    "DECODE_PIECE",
    "MAX_BUFFER",
    "ConnectError",
    "ConnectTimeout",
    "DecodingError",
    "H1Pool",
    "H1Response",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "ResponseTooLarge",
    "StreamDeadline",
    "TimeoutException",
    "TransportError",
]
