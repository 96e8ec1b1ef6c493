"""Server-Sent Events framing without I/O: bytes ⇄ events.

Layer: ``wire`` — imports ``protocol`` only.

The parser accepts what real servers send (``\\n``, ``\\r\\n`` or bare ``\\r`` line ends,
``data:`` with or without a space, comments, ``id:``/``retry:`` fields, chunks split anywhere,
even inside a UTF-8 character) and yields only events that carry data. The writer emits the
strict subset every SDK parses: optional ``event:`` line, one ``data:`` line, blank line.
"""

from __future__ import annotations

from typing import Any

from switchyard._dataclass import dataclass


@dataclass(slots=True, frozen=True)
class SSEEvent:
    """One dispatched event: its name (``None`` when unnamed) and its data."""

    event: str | None
    data: str


class SSEParser:
    """Incremental SSE parser. Feed it byte chunks; it returns completed events."""

    __slots__ = ("_buf", "_data", "_event", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event: str | None = None
        self._pending_cr = False

    def _lines(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes; the unfinished last one waits in ``_buf``."""
        if not chunk:
            # An empty read must not forget a pending CR: the LF completing it may come next.
            return []
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        buf = self._buf + chunk
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                # A CR at the end may be the first half of CRLF; remember to drop a leading LF.
                self._pending_cr = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        return lines

    @property
    def idle(self) -> bool:
        """Between events: no line, data, name or carriage return held from earlier bytes."""
        return not self._buf and not self._data and self._event is None and not self._pending_cr

    def feed_raw(self, chunk: bytes) -> list[SSEEvent | bytes]:
        """:meth:`feed`, except that an event of one ``data:`` line and no name comes as that
        line's value, undecoded (``bytes``): a decoder that recognises the value as bytes skips
        decoding it and the :class:`SSEEvent` (the plain Chat lane, ``ChatStreamDecoder``)."""
        out: list[SSEEvent | bytes] = []
        held: bytes | None = None  # the value of a lone data line, until the line after it
        for raw in self._lines(chunk):
            if held is not None:
                if not raw:
                    if held:
                        out.append(held)
                    held = None
                    continue
                self._data.append(held.decode("utf-8", errors="replace"))
                held = None
            if raw.startswith(b"data: ") and not self._data and self._event is None:
                held = raw[6:]
            else:
                self._line(raw, out)
        if held is not None:
            self._data.append(held.decode("utf-8", errors="replace"))
        return out

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Adds bytes and returns the events they completed."""
        lines = self._lines(chunk)
        out: list[SSEEvent] = []
        data = self._data
        for raw in lines:
            # The two lines of nearly every event, inline (a stream of 50 events is 100 lines):
            # ``data: <json>`` and the blank line that dispatches it. Same result as ``_line``.
            if raw.startswith(b"data: "):
                data.append(raw[6:].decode("utf-8", errors="replace"))
            elif not raw and self._event is None and len(data) == 1:
                if data[0]:
                    out.append(SSEEvent(None, data[0]))
                data.clear()
            else:
                self._line(raw, out)
        return out

    def finish(self) -> list[SSEEvent]:
        """Flushes a final event that was not followed by a blank line."""
        out: list[SSEEvent] = []
        if self._buf:
            self._line(self._buf, out)
            self._buf = b""
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[Any]) -> None:
        if not raw:
            data = "\n".join(self._data)
            # A lone empty ``data:`` line dispatches nothing (as the SSE spec says): an event with
            # empty data would make JSON-parsing clients such as openai-python fail.
            if data:
                out.append(SSEEvent(self._event, data))
            self._data.clear()  # in place: ``feed`` holds the list
            self._event = None
            return
        if raw[:1] == b":":
            return
        line = raw.decode("utf-8", errors="replace")
        name, sep, value = line.partition(":")
        if not sep:
            value = ""
        elif value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value or None
        # ``id`` and ``retry`` carry nothing a router needs.


def frame(data: bytes, event: str | None = None) -> bytes:
    """Frames one SSE event. ``data`` must not be empty or contain newlines."""
    if event is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


DONE = b"data: [DONE]\n\n"
"""The OpenAI Chat stream terminator."""

KEEPALIVE = b": keep-alive\n\n"
"""A comment line every SSE client ignores."""
