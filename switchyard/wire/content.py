"""What the three request codecs share around content: parts given as a string or a list of
typed objects, and optional fields copied from the request by a table.

Layer: ``wire`` — imports ``protocol`` only.

Chat message content, Anthropic tool-result content and Responses message content are each
``null``, a string (one text part) or a list of objects with a ``type``; only the part types
differ. :func:`decode_content` walks that shape, names the path of anything malformed and hands
each object to the format's own part decoder. :func:`put_present` writes the request fields a
format carries unchanged, from a table of ``(wire name, request attribute)`` pairs, in the
table's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.messages import ImagePart, TextPart
from switchyard.protocol.request import ChatRequest

PartDecoder = Callable[[dict[str, Any], str], TextPart | ImagePart | None]
"""A format's decoder of one content object (given with its path): the part, or ``None`` for one
that is dropped (the decoder reports it)."""


def bad(message: str, param: str) -> InvalidRequestError:
    """The error for a malformed caller request, naming the field at fault."""
    return InvalidRequestError(message, param=param)


def decode_content(
    content: Any, path: str, part: PartDecoder, *, listing: str = "a list of content parts"
) -> list[TextPart | ImagePart]:
    """The parts of ``content`` (``None``, a string, or a list of objects decoded by ``part``).

    Args:
        content: The field's value.
        path: Where it stands in the request (``messages[2].content``), for errors.
        part: The format's decoder of one object.
        listing: What the list holds, as the error for another type names it.

    Raises:
        InvalidRequestError: ``content`` or one of its entries has the wrong type.
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list):
        raise bad(f"{path} must be a string or {listing}", path)
    out: list[TextPart | ImagePart] = []
    for i, item in enumerate(content):
        at = f"{path}[{i}]"
        if not isinstance(item, dict):
            raise bad(f"{at} must be an object", at)
        decoded = part(item, at)
        if decoded is not None:
            out.append(decoded)
    return out


def put_present(body: dict[str, Any], request: ChatRequest, table: tuple[tuple[str, str], ...]) -> None:
    """Sets ``body[name]`` to the request's ``attribute`` for each pair of ``table`` whose value
    is not ``None``, in the table's order (the order the keys are written in)."""
    for name, attribute in table:
        value = getattr(request, attribute)
        if value is not None:
            body[name] = value


__all__ = ["PartDecoder", "bad", "decode_content", "put_present"]
