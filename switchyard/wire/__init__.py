"""Pure codecs per wire format: requests, responses, streams, errors. No HTTP.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from switchyard.wire.base import Codec, StreamDecoder, StreamEncoder, WireFormat
from switchyard.wire.sse import SSEEvent, SSEParser

_codecs: dict[WireFormat, Codec] = {}


def codec(fmt: WireFormat | str) -> Codec:
    """The codec for a wire format.

    Raises:
        KeyError: The format is not implemented.
    """
    key = WireFormat(fmt)
    found = _codecs.get(key)
    if found is None:
        if key is WireFormat.OPENAI_CHAT:
            from switchyard.wire.openai_chat import CODEC
        else:
            raise KeyError(f"wire format {key.value!r} is not implemented yet")
        _codecs[key] = found = CODEC
    return found


def available_formats() -> list[str]:
    """Formats with a codec."""
    return [WireFormat.OPENAI_CHAT.value]


__all__ = [
    "Codec",
    "SSEEvent",
    "SSEParser",
    "StreamDecoder",
    "StreamEncoder",
    "WireFormat",
    "available_formats",
    "codec",
]
