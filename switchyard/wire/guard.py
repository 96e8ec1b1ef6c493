"""Turning type confusion in foreign payloads into the typed errors callers expect.

Layer: ``wire`` — imports ``protocol`` only.

Decoders check the shapes that matter and raise precise errors; a payload malformed in a way
they did not anticipate (a number where an object belongs, deep inside) would otherwise escape
as ``AttributeError``/``TypeError`` and become a 500. These helpers map such failures to
``InvalidRequestError`` (caller bodies → 400) or ``UpstreamProtocolError`` (upstream answers →
502), so "malformed input" is never reported as a Switchyard bug.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from switchyard.protocol.errors import InvalidRequestError, UpstreamProtocolError
from switchyard.wire.sse import SSEEvent

T = TypeVar("T")

_CONFUSION = (AttributeError, TypeError, ValueError, KeyError, IndexError)


def invalid_request(exc: ValidationError) -> InvalidRequestError:
    """The 400 for a caller body that decoded into an invalid IR value (first problem named)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return InvalidRequestError(f"invalid request: {loc}: {err['msg']}", param=loc)


def caller_body(fmt: str, decode: Callable[[dict[str, Any]], T], body: dict[str, Any]) -> T:
    """Runs a request decoder; unexpected shape errors become ``InvalidRequestError``."""
    try:
        return decode(body)
    except InvalidRequestError:
        raise
    except _CONFUSION as exc:
        raise InvalidRequestError(f"malformed {fmt} request: {type(exc).__name__}: {exc}") from exc


def upstream_body(fmt: str, decode: Callable[[dict[str, Any]], T], body: dict[str, Any]) -> T:
    """Runs a response decoder; unexpected shape errors become ``UpstreamProtocolError``."""
    try:
        return decode(body)
    except UpstreamProtocolError:
        raise
    except _CONFUSION as exc:
        raise UpstreamProtocolError(f"malformed {fmt} answer from upstream: {type(exc).__name__}: {exc}") from exc


class GuardedDecoder:
    """Wraps a stream decoder so malformed events raise ``UpstreamProtocolError``."""

    def __init__(self, fmt: str, inner: Any) -> None:
        self._fmt = fmt
        self._inner = inner

    @property
    def done(self) -> bool:
        return bool(self._inner.done)

    def feed(self, event: SSEEvent) -> list[Any]:
        try:
            out: list[Any] = self._inner.feed(event)
        except UpstreamProtocolError:
            raise
        except _CONFUSION as exc:
            raise UpstreamProtocolError(
                f"malformed {self._fmt} stream event from upstream: {type(exc).__name__}: {exc}"
            ) from exc
        return out

    def finish(self) -> list[Any]:
        out: list[Any] = self._inner.finish()
        return out
