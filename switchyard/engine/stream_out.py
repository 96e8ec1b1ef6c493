"""Writing an answer stream in the caller's format.

Layer: ``engine``.

Each IR event is encoded as it arrives and handed on at once: no queue, no task per stream, so a
streamed answer costs the caller nothing beyond the encoding. Keep-alives during long upstream
silences are the network server's job (:class:`~switchyard.engine.reply.Reply` says what to send
and when): they are about idle connections, which in-process callers do not have.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.stream import StreamError


async def encode_stream(encoder: Any, events: Any) -> AsyncIterator[bytes]:
    """SSE bytes for ``events`` (an ``EventStream``) through ``encoder``; closing the writer
    closes the event stream (and with it the upstream connection)."""
    try:
        async for event in events:
            chunk: bytes = encoder.encode(event)
            if chunk:
                yield chunk
        end: bytes = encoder.finish()
        if end:
            yield end
    finally:
        await events.aclose()


def stream_aborter(encoder: Any, events: Any) -> Callable[[ErrorInfo], bytes]:
    """``Reply.abort`` for a stream: marks ``events``' record as interrupted and encodes the
    closing error event with the stream's own encoder (so a Responses stream's sequence numbers
    and open items stay consistent)."""

    def abort(error: ErrorInfo) -> bytes:
        events.interrupt(error)
        out: bytes = encoder.encode(StreamError(error=error))
        return out

    return abort
