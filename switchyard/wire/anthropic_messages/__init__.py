"""Anthropic Messages codec (``/v1/messages``).

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from switchyard.wire.anthropic_messages import request as _request
from switchyard.wire.anthropic_messages import request_encode as _request_encode
from switchyard.wire.anthropic_messages import response as _response
from switchyard.wire.anthropic_messages import stream as _stream
from switchyard.wire.anthropic_messages.request_encode import DEFAULT_MAX_TOKENS
from switchyard.wire.base import WireFormat
from switchyard.wire.module_codec import FormatCodec

CODEC = FormatCodec(
    format=WireFormat.ANTHROPIC_MESSAGES,
    path="/v1/messages",
    request_decoder=_request.decode_request,
    request_encoder=_request_encode.encode_request,
    response_decoder=_response.decode_response,
    response_encoder=_response.encode_response,
    stream_decoder_factory=_stream.AnthropicStreamDecoder,
    # Anthropic streams always carry usage (message_start / message_delta).
    stream_encoder_factory=lambda model, include_usage: _stream.AnthropicStreamEncoder(model=model),
    error_encoder=_response.encode_error,
    error_decoder=_response.decode_error,
    stream_error_encoder=_stream.stream_error,
    keepalive_bytes=_stream.PING,
)

__all__ = ["CODEC", "DEFAULT_MAX_TOKENS"]
