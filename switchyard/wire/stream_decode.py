"""What the three stream decoders share: an event's JSON payload, and the plain-text fast path.

Layer: ``wire`` — imports ``protocol`` only.

Nearly every event of a streamed answer is one piece of text, and in every format such an event
is the one before it with another string in one place: Chat's
``{"id":…,"choices":[{"index":0,"delta":{"content":"…"},…}]}``, Anthropic's
``{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"…"}}``, Responses'
``{"type":"response.output_text.delta","item_id":…,"delta":"…",…,"sequence_number":7}`` (whose
``sequence_number`` also changes, and which no decoder reads). Once a decoder has decoded such an
event in full, it keeps it as a :class:`TextTemplate`: a later event that is the template with
another JSON string in that place (and, for Responses, another whole number in the number's
place) means exactly what the template meant with that text, so only the string is parsed —
the event is not decoded into a dict and dispatched. Anything else is decoded in full.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from switchyard.protocol.errors import UpstreamProtocolError

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # one JSON string literal, escapes included
_NUMBER = re.compile("0|[1-9][0-9]*")  # a JSON whole number (no sign, no leading zero)
_KEY_OPENS = frozenset("{, \t\r\n")  # what may stand before a key's opening quote


def event_json(data: str) -> dict[str, Any]:
    """The JSON object an upstream stream event carries.

    Raises:
        UpstreamProtocolError: The data is not JSON, or not an object.
    """
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"malformed JSON in upstream stream: {data[:200]!r}") from exc
    if type(payload) is not dict:  # orjson makes plain dicts
        raise UpstreamProtocolError(f"unexpected upstream stream payload: {data[:200]!r}")
    return payload


class TemplateDecoder:
    """What every stream decoder keeps: whether its stream has ended, and the template of a
    plain text event once it has learned one (its ``feed`` tries the template first)."""

    def __init__(self) -> None:
        self._done = False
        self._template: TextTemplate | None = None

    @property
    def done(self) -> bool:
        """Whether the stream has ended (its last event, or an error, was fed)."""
        return self._done


class TextTemplate:
    """A learned plain text event: ``prefix`` + one JSON string + ``suffix`` (see the module).

    Attributes:
        prefix: The learned event's data up to the text's string.
        suffix: The learned event's data after it.
        raw_prefix: ``prefix`` UTF-8 encoded (for a decoder that matches undecoded events);
            empty for a :class:`NumberedTemplate`.
        raw_suffix: ``suffix`` UTF-8 encoded; empty for a :class:`NumberedTemplate`.
    """

    __slots__ = ("prefix", "raw_prefix", "raw_suffix", "suffix")

    def __init__(self, prefix: str, suffix: str) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.raw_prefix = prefix.encode()
        self.raw_suffix = suffix.encode()

    def text(self, data: str) -> str | None:
        """The text of an event that is this template around one JSON string, else ``None``."""
        prefix, suffix = self.prefix, self.suffix
        if data.startswith(prefix) and data.endswith(suffix):
            # ``_string`` inline: this runs for nearly every event of a stream.
            try:
                text = orjson.loads(data[len(prefix) : len(data) - len(suffix)])
            except orjson.JSONDecodeError:
                return None
            if type(text) is str:
                return text
        return None


class NumberedTemplate(TextTemplate):
    """A template with a whole number whose value may differ: ``head`` + number + ``mid`` +
    string + ``tail`` (number first) or ``head`` + string + ``mid`` + number + ``tail``.

    Plain string operations, no regular expression: a pattern that spells out a 150-character
    event costs more than parsing the event whole.
    """

    __slots__ = ("_head", "_mid", "_number_first", "_tail")

    def __init__(self, prefix: str, suffix: str, head: str, mid: str, tail: str, *, number_first: bool) -> None:
        super().__init__(prefix, suffix)
        self.raw_prefix = self.raw_suffix = b""  # the parts vary: nothing to match as bytes
        self._head, self._mid, self._tail, self._number_first = head, mid, tail, number_first

    def text(self, data: str) -> str | None:
        """The text of an event that is this template around one JSON string and one whole
        number, else ``None``."""
        head, mid, tail = self._head, self._mid, self._tail
        if not (data.startswith(head) and data.endswith(tail)):
            return None
        if self._number_first:
            at = data.find(mid, len(head))
            number = data[len(head) : at]
            literal = data[at + len(mid) : len(data) - len(tail)]
        else:
            at = data.rfind(mid, len(head), len(data) - len(tail))
            number = data[at + len(mid) : len(data) - len(tail)]
            literal = data[len(head) : at]
        if at < 0 or not (number.isascii() and number.isdigit()) or (number[0] == "0" and number != "0"):
            return None
        return _string(literal)


def _string(literal: str) -> str | None:
    """The string ``literal`` is, when it is one JSON string."""
    try:
        text = orjson.loads(literal)
    except orjson.JSONDecodeError:
        return None  # not one string after all (or a control character in it): decoded in full
    return text if type(text) is str else None


def learn(data: str, mark: str, text: str, *, then: str = "", number: str | None = None) -> TextTemplate | None:
    """The template of a plain text event, when ``data`` is one; else ``None``.

    The caller has decoded ``data`` in full and knows that what it means depends on nothing but
    ``text`` (and the fixed rest of ``data``).

    Args:
        data: The event's data.
        mark: What stands right before the text's string, starting with a key's opening quote
            (``'"text":'``); it must occur once in ``data``, where a key starts.
        text: The text the event carries, which the string after ``mark`` must decode to.
        then: What must follow the string (a decoder that reads rows of events relies on it).
        number: A key (``'"sequence_number":'``) whose whole-number value the decoder ignores:
            any value matches. When ``data`` lacks it, the template is fixed.
    """
    start = data.find(mark)
    if start < 0 or data.rfind(mark) != start or (start and data[start - 1] not in _KEY_OPENS):
        return None
    start += len(mark)
    literal = _STRING.match(data, start)
    if literal is None or not data.startswith(then, literal.end()):
        return None
    try:
        if orjson.loads(literal.group()) != text:
            return None
    except orjson.JSONDecodeError:
        return None
    prefix, suffix = data[:start], data[literal.end() :]
    at = data.find(number) if number is not None else -1
    if number is None or at < 0:
        return TextTemplate(prefix, suffix)
    if data.rfind(number) != at or (at and data[at - 1] not in _KEY_OPENS):
        return None
    digits = _NUMBER.match(data, at + len(number))
    if digits is None or data[digits.end() : digits.end() + 1] not in (",", "}"):
        return None
    # The number's place and the string's, in the order they stand.
    if digits.end() <= start:
        return NumberedTemplate(
            prefix, suffix, data[: digits.start()], data[digits.end() : start], suffix, number_first=True
        )
    if at >= literal.end():
        return NumberedTemplate(
            prefix, suffix, prefix, data[literal.end() : digits.start()], data[digits.end() :], number_first=False
        )
    return None


__all__ = ["NumberedTemplate", "TemplateDecoder", "TextTemplate", "event_json", "learn"]
