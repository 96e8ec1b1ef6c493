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
    # ``WireFormat(x)`` is a Python-level call even for a member; an enum's ``.value`` too
    # (``_value_`` is the plain attribute): both add up on every request.
    key = fmt if type(fmt) is WireFormat else WireFormat(fmt)
    found = _codecs.get(key)
    if found is None:
        if key is WireFormat.OPENAI_CHAT:
            from switchyard.wire.openai_chat import CODEC as chat

            found = chat
        elif key is WireFormat.ANTHROPIC_MESSAGES:
            from switchyard.wire.anthropic_messages import CODEC as anthropic

            found = anthropic
        else:
            from switchyard.wire.openai_responses import CODEC as responses

            found = responses
        _codecs[key] = found
    return found


_FORMATS = tuple(f.value for f in WireFormat)


def available_formats() -> list[str]:
    """Formats with a codec."""
    return list(_FORMATS)


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
