"""OpenAI Chat Completions codec (also what vLLM speaks).

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from switchyard.wire.base import WireFormat
from switchyard.wire.module_codec import FormatCodec
from switchyard.wire.openai_chat import request as _request
from switchyard.wire.openai_chat import response as _response
from switchyard.wire.openai_chat import stream as _stream
from switchyard.wire.sse import KEEPALIVE

CODEC = FormatCodec(
    format=WireFormat.OPENAI_CHAT,
    path="/chat/completions",
    request_decoder=_request.decode_request,
    request_encoder=_request.encode_request,
    response_decoder=_response.decode_response,
    response_encoder=_response.encode_response,
    stream_decoder_factory=_stream.ChatStreamDecoder,
    stream_encoder_factory=lambda model, include_usage: _stream.ChatStreamEncoder(
        model=model, include_usage=include_usage
    ),
    error_encoder=_response.encode_error,
    error_decoder=_response.decode_error,
    stream_error_encoder=_stream.stream_error,
    keepalive_bytes=KEEPALIVE,
)

__all__ = ["CODEC"]
