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

from switchyard.engine.replies import reply_headers
from switchyard.engine.reply import Reply
from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.stream import StreamError
from switchyard.wire.base import WireFormat

TAKES_RUNS = frozenset((WireFormat.OPENAI_CHAT, WireFormat.ANTHROPIC_MESSAGES))
"""Callers whose stream encoders take a :class:`~switchyard.wire.text_run.TextRun` (wire/text_run.py)."""


def stream_reply(
    encoder: Any, events: Any, keepalive: bytes | None, keepalive_s: float | None, *, hold: bool = False
) -> Reply:
    """The 200 reply that streams ``events`` (an ``EventStream``) through ``encoder``; with
    ``hold``, its record waits for :attr:`Reply.release` (``EventStream.hold_record``)."""
    return Reply(
        200,
        reply_headers(events.record, stream=True),
        stream=encode_stream(encoder, events),
        keepalive=keepalive,
        keepalive_s=keepalive_s,
        abort=stream_aborter(encoder, events),
        release=events.hold_record() if hold else None,
    )


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
