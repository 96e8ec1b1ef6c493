"""What the engine hands back to the proxy and the in-process transport.

Layer: ``engine``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import field

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import ErrorInfo

SHUTDOWN_CANCEL = "server_shutting_down"
"""The message a server cancels a request's work with when its shutdown drain time is over
(the engine then records 503 ``details.interrupted`` instead of a caller's 499)."""


@dataclass(slots=True)
class Reply:
    """An HTTP-shaped answer: status, headers and either a body or a byte stream.

    Attributes:
        status: HTTP status.
        headers: Response headers (lower-case names).
        body: The whole body for JSON answers.
        stream: SSE bytes for streaming answers, one element per event group as it is due.
        keepalive: Bytes a network server sends when the stream has been silent for
            ``keepalive_s`` (an Anthropic ``ping`` event, an SSE comment otherwise), so idle
            connections are not cut while the model thinks; in-process callers ignore them.
        keepalive_s: Silence before a keep-alive (``None``: never).
        abort: For streams, ends the answer early on the server's behalf (a shutdown past its
            drain time): marks the decision record and returns the closing error event, in the
            caller's format, to write before the end of the body. Call it before closing
            ``stream``.
        release: Set when the consumer asked for the decision record to wait for the reply
            (``Switchyard.dispatch(..., hold_record=True)``): emits it to the sinks. A network
            server calls it once the reply's last byte is sent, so the decision log, the metrics
            and ``on_decision`` callbacks cost the caller no latency; it must then be called in
            every case (the reply abandoned too), and it may be called more than once. For a
            stream, the record is emitted once both the stream has ended and this was called.
    """

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    keepalive: bytes | None = None
    keepalive_s: float | None = None
    abort: Callable[[ErrorInfo], bytes] | None = None
    release: Callable[[], None] | None = None

    def released(self) -> None:
        """Calls :attr:`release` if it is set, at most once."""
        release, self.release = self.release, None
        if release is not None:
            release()

    @property
    def is_stream(self) -> bool:
        """Whether the answer is streamed."""
        return self.stream is not None
