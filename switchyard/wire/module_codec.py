"""One :class:`~switchyard.wire.base.Codec` implementation shared by every wire format.

Layer: ``wire`` — imports ``protocol`` only.

Each format keeps its logic in three modules (request, response, stream); this class only puts
them behind the codec contract and adds the guards every format needs (malformed caller input is
a typed 400, malformed upstream output a typed 502).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.wire import guard
from switchyard.wire.base import StreamEncoder, WireFormat


@dataclass(frozen=True, slots=True)
class FormatCodec:
    """A wire format's codec, assembled from its modules' functions.

    Attributes:
        format: The wire format.
        path: Upstream path below a client's base URL.
        request_decoder: Caller JSON → IR (raises ``InvalidRequestError``).
        request_encoder: IR → upstream JSON.
        response_decoder: Upstream JSON → IR.
        response_encoder: IR → caller JSON.
        stream_decoder_factory: A fresh upstream stream decoder.
        stream_encoder_factory: A fresh caller stream encoder, given ``model`` and ``include_usage``.
        error_encoder: An error body in this format's envelope.
        error_decoder: Reads an upstream error body of this format.
        stream_error_encoder: The SSE bytes that end a stream with an error.
        keepalive_bytes: What to send during long upstream silences.
    """

    format: WireFormat
    path: str
    request_decoder: Callable[[dict[str, Any]], ChatRequest]
    request_encoder: Callable[..., dict[str, Any]]
    response_decoder: Callable[[dict[str, Any]], ChatResponse]
    response_encoder: Callable[..., dict[str, Any]]
    stream_decoder_factory: Callable[[], Any]
    stream_encoder_factory: Callable[[str, bool], StreamEncoder]
    error_encoder: Callable[[ErrorInfo], dict[str, Any]]
    error_decoder: Callable[[Any, int], ErrorInfo]
    stream_error_encoder: Callable[[ErrorInfo], bytes]
    keepalive_bytes: bytes

    def decode_request(self, body: dict[str, Any]) -> ChatRequest:
        """Caller JSON → IR."""
        return guard.caller_body(self.format.value, self.request_decoder, body)

    def encode_request(self, request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
        """IR → upstream JSON with ``model`` set."""
        return self.request_encoder(request, model=model, stream=stream)

    def decode_response(self, body: dict[str, Any]) -> ChatResponse:
        """Upstream JSON → IR."""
        return guard.upstream_body(self.format.value, self.response_decoder, body)

    def encode_response(self, response: ChatResponse, *, model: str) -> dict[str, Any]:
        """IR → caller JSON."""
        return self.response_encoder(response, model=model)

    def stream_decoder(self) -> Any:
        """A fresh decoder for one upstream stream (a :class:`~switchyard.wire.base.StreamDecoder`).

        Guarded, unless the decoder turns every malformed event into ``UpstreamProtocolError``
        itself (``guards_itself``): a wrapper would cost two calls per event for nothing.
        """
        decoder = self.stream_decoder_factory()
        if getattr(decoder, "guards_itself", False):
            return decoder
        return guard.GuardedDecoder(self.format.value, decoder)

    def stream_encoder(self, *, model: str, include_usage: bool) -> StreamEncoder:
        """A fresh encoder for one caller stream."""
        return self.stream_encoder_factory(model, include_usage)

    def encode_error(self, error: ErrorInfo) -> dict[str, Any]:
        """An error body in this format's envelope."""
        return self.error_encoder(error)

    def stream_error(self, error: ErrorInfo) -> bytes:
        """The SSE bytes that end a stream with an error."""
        return self.stream_error_encoder(error)

    def decode_error(self, body: Any, status: int) -> ErrorInfo:
        """Reads an upstream error body of this format."""
        return self.error_decoder(body, status)

    def keepalive(self) -> bytes:
        """What to send during long upstream silences."""
        return self.keepalive_bytes
