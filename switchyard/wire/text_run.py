"""A run of text deltas read together: the unit a Chat upstream's streamed text travels in.

Layer: ``wire`` — imports nothing of ours.

Nearly every event of a Chat stream is one piece of text (``delta: {"content": ...}``), and an
upstream that writes quickly hands the proxy dozens of them in one read. Turning each into a
:class:`~switchyard.protocol.stream.TextDelta` (a validated model) and passing it through the
engine's stream layers one by one was most of the CPU a streamed answer cost. When the engine
answers a Chat or an Anthropic caller (``Engine.handle``, no verifier on the route) it opens a
Chat upstream's stream with ``HttpBackend.open_stream_runs``: the decoder then collects the texts
of consecutive plain text chunks of one read into one :class:`TextRun`, which the engine's
bookkeeping and the caller's encoder (Chat or Anthropic) handle as that many ``TextDelta``
events, in order — the caller gets the same bytes.

A ``TextRun`` is never part of the IR that users see: only the Chat decoder makes one, only when
asked (``ChatStreamDecoder.gather``), and only the engine's replies over HTTP ask.
"""

from __future__ import annotations


class TextRun:
    """The texts of consecutive text deltas, in stream order; none of them empty."""

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __repr__(self) -> str:
        return f"TextRun({self.texts!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is TextRun and other.texts == self.texts

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it holds
