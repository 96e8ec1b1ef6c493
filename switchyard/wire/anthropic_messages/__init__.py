"""Anthropic Messages codec (``/v1/messages``).

Layer: ``wire`` — imports ``protocol`` only.

``CODEC`` and ``DEFAULT_MAX_TOKENS`` are built on first access: modules that need only a helper
of this package (``thinking``) do not load its decoders and encoders, so a proxy that serves
only Chat callers and upstreams never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchyard.wire.module_codec import FormatCodec

    CODEC: FormatCodec
    DEFAULT_MAX_TOKENS: int


def _codec() -> FormatCodec:
    from switchyard.wire.anthropic_messages import request as _request
    from switchyard.wire.anthropic_messages import request_encode as _request_encode
    from switchyard.wire.anthropic_messages import response as _response
    from switchyard.wire.anthropic_messages import stream as _stream
    from switchyard.wire.base import WireFormat
    from switchyard.wire.module_codec import FormatCodec

    return FormatCodec(
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


def __getattr__(name: str) -> Any:
    if name == "CODEC":
        value: Any = _codec()
    elif name == "DEFAULT_MAX_TOKENS":
        from switchyard.wire.anthropic_messages.request_encode import DEFAULT_MAX_TOKENS as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later look-ups find it without coming here
    return value


__all__ = ["CODEC", "DEFAULT_MAX_TOKENS"]
