"""The failures of the lean HTTP/1.1 pool (:mod:`switchyard.clients.h1`), under httpx's names so
the backend classifies both clients' errors alike.

Layer: ``clients``.
"""

from __future__ import annotations


class TransportError(Exception):
    """The request failed below HTTP (connection, timeout, malformed or undecodable answer)."""


class TimeoutException(TransportError):
    """No connection or no bytes within the limit."""


class ConnectTimeout(TimeoutException):
    """Connecting took longer than the connect timeout."""


class ReadTimeout(TimeoutException):
    """The upstream was silent for longer than the read timeout."""


class StreamDeadline(TimeoutError):
    """A stream's total deadline (``H1Response.stop_at``) passed while waiting for its bytes: a
    ``TimeoutError``, as the timeout scope it replaces raised, so the backend reports it as the
    stream exceeding its limit, not as a silent upstream."""


class PoolTimeout(TimeoutException):
    """Every pooled connection stayed busy for longer than the pool timeout."""


class ConnectError(TransportError):
    """The connection could not be opened (refused, unreachable, TLS handshake failed)."""


class ReadError(TransportError):
    """The connection broke in the middle of a response."""


class RemoteProtocolError(TransportError):
    """The upstream closed without answering, or answered with something that is not HTTP/1.1."""


class DecodingError(TransportError):
    """The body's content-encoding is unsupported or the compressed body is corrupt."""


class ResponseTooLarge(DecodingError):
    """The body (decoded) grew past the pool's ``max_response_bytes``."""
