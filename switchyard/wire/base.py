"""The codec contract every wire format implements.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from switchyard.protocol.errors import ErrorInfo
    from switchyard.protocol.request import ChatRequest
    from switchyard.protocol.response import ChatResponse
    from switchyard.protocol.stream import StreamEvent
    from switchyard.wire.sse import SSEEvent


class WireFormat(StrEnum):
    """The provider APIs Switchyard speaks, inbound and upstream."""

    OPENAI_CHAT = "openai_chat"
    ANTHROPIC_MESSAGES = "anthropic_messages"
    OPENAI_RESPONSES = "openai_responses"


class StreamDecoder(Protocol):
    """Turns an upstream's SSE events into IR stream events (stateful, one per stream)."""

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Decodes one SSE event."""
        ...

    def finish(self) -> list[StreamEvent]:
        """Called when the byte stream ended; raises ``UpstreamProtocolError`` if it ended early."""
        ...

    @property
    def done(self) -> bool:
        """Whether the upstream signalled the end of the stream."""
        ...


class StreamEncoder(Protocol):
    """Turns IR stream events into SSE bytes in a caller's format (stateful, one per stream)."""

    def encode(self, event: StreamEvent) -> bytes:
        """Encodes one event; may return ``b""`` when nothing is due yet."""
        ...

    def finish(self) -> bytes:
        """Bytes that close the stream (e.g. ``data: [DONE]``)."""
        ...


class Codec(Protocol):
    """Pure encode/decode for one wire format."""

    @property
    def format(self) -> WireFormat:
        """The wire format."""
        ...

    @property
    def path(self) -> str:
        """Upstream path below the client's base URL, e.g. ``/chat/completions``."""
        ...

    def decode_request(self, body: dict[str, Any]) -> ChatRequest:
        """Caller JSON → IR. Raises ``InvalidRequestError`` for malformed input."""
        ...

    def encode_request(self, request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
        """IR → upstream JSON with ``model`` set."""
        ...

    def decode_response(self, body: dict[str, Any]) -> ChatResponse:
        """Upstream JSON → IR. Raises ``UpstreamProtocolError`` for malformed input."""
        ...

    def encode_response(self, response: ChatResponse, *, model: str) -> dict[str, Any]:
        """IR → caller JSON."""
        ...

    def stream_decoder(self) -> StreamDecoder:
        """A fresh decoder for one upstream stream."""
        ...

    def stream_encoder(self, *, model: str, include_usage: bool) -> StreamEncoder:
        """A fresh encoder for one caller stream."""
        ...

    def encode_error(self, error: ErrorInfo) -> dict[str, Any]:
        """An error body in this format's envelope."""
        ...

    def stream_error(self, error: ErrorInfo) -> bytes:
        """The SSE bytes that end a stream with an error in this format."""
        ...

    def decode_error(self, body: Any, status: int) -> ErrorInfo:
        """Reads an upstream error body of this format."""
        ...

    def keepalive(self) -> bytes:
        """SSE bytes that keep an idle stream open without changing its content (a comment
        line, or Anthropic's ``ping`` event)."""
        ...
