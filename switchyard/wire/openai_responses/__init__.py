"""OpenAI Responses codec (``/v1/responses``).

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from switchyard.wire.base import WireFormat
from switchyard.wire.module_codec import FormatCodec
from switchyard.wire.openai_responses import request as _request
from switchyard.wire.openai_responses import response as _response
from switchyard.wire.openai_responses import stream as _stream
from switchyard.wire.sse import KEEPALIVE

CODEC = FormatCodec(
    format=WireFormat.OPENAI_RESPONSES,
    path="/responses",
    request_decoder=_request.decode_request,
    request_encoder=_request.encode_request,
    response_decoder=_response.decode_response,
    response_encoder=_response.encode_response,
    stream_decoder_factory=_stream.ResponsesStreamDecoder,
    # Responses streams always end with response.completed, which carries usage.
    stream_encoder_factory=lambda model, include_usage: _stream.ResponsesStreamEncoder(model=model),
    error_encoder=_response.encode_error,
    error_decoder=_response.decode_error,
    stream_error_encoder=_stream.stream_error,
    keepalive_bytes=KEEPALIVE,
)

__all__ = ["CODEC"]
