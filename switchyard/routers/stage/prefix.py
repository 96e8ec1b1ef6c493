"""Remembering a session's conversation counts, so each turn only reads its new messages.

Layer: ``routers`` — imports ``protocol`` only.

An agent's next request is its previous conversation plus a few messages. The whole-conversation
signals (turn depth, the compaction marker, totals) only grow, so they are kept per session and
the next request walks only the messages after the ones already counted. The windowed signals
never need the cache: they come from the last few messages.

A cached prefix is reused only if the new conversation is at least as long and still holds the
same first, middle and last message of that prefix (compared by a fingerprint of their content:
role, part kinds and the hashes of their texts, so the cache keeps no conversation alive);
anything else — a compacted or edited history, a side conversation under the same session id —
is counted afresh. Without a session id the key is the conversation's opening
(:func:`conversation_key`). Fingerprints computed for one request are shared between the key,
the check and the store (``known``), and the middle message is picked so that it stays the same
for several turns in a row, so a turn usually fingerprints four messages.
The cache lives in the router's process and is bounded (least recently used sessions go first);
losing it only costs one full walk.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Generic, Protocol, TypeVar

from switchyard.protocol.messages import ContentPart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest

Known = dict[int, int]
"""Fingerprints already computed for one conversation, by message index."""


class Covering(Protocol):
    """Counts over the first ``covered`` messages of a conversation: the signals' ``Aggregates``,
    or the run-level tally of :mod:`switchyard.routers.stage.runrules`."""

    @property
    def covered(self) -> int:
        """Messages covered."""
        ...


A = TypeVar("A", bound=Covering)


def conversation_key(request: ChatRequest, known: Known | None = None) -> int | None:
    """A cache key for a conversation without a session id: its first two messages.

    Different conversations may share it (the same task started twice); the validation in
    :meth:`PrefixCache.lookup` then sends them down the full walk, so sharing costs time, never
    correctness.

    Args:
        request: The request.
        known: Fingerprints of ``request.messages`` already computed; filled in.
    """
    messages = request.messages
    if not messages:
        return None
    second = _fingerprint_at(messages, 1, known) if len(messages) > 1 else None
    return hash(("conversation", _fingerprint_at(messages, 0, known), second))


def fingerprint(msg: Message) -> int:
    """What identifies a message's content, cheaply: a hash of its role and of each part's kind
    and text (``str`` caches its hash, so a message seen before costs almost nothing; a tool
    result contributes the hashes of its parts rather than of their joined text, which would be
    built afresh every time). An ``int``, so a remembered session gives the garbage collector
    nothing to track."""
    content = msg.content
    if len(content) == 1:
        return hash((msg.role, _part_hash(content[0])))
    return hash((msg.role, *[_part_hash(part) for part in content]))


def _part_hash(part: ContentPart) -> int:
    kind = type(part)
    if type(part) is TextPart or type(part) is ReasoningPart:
        return hash((kind, part.text))
    if type(part) is ToolCallPart:
        return hash((kind, part.name, part.arguments))
    if type(part) is ToolResultPart:
        inner = part.content
        if len(inner) == 1 and type(inner[0]) is TextPart:
            return hash((kind, inner[0].text))
        return hash((kind, *[hash(c.text) if isinstance(c, TextPart) else hash(c.url or c.data) for c in inner]))
    return hash((kind, getattr(part, "url", None) or getattr(part, "data", None)))


def _fingerprint_at(messages: Sequence[Message], index: int, known: Known | None) -> int:
    if known is None:
        return fingerprint(messages[index])
    value = known.get(index)
    if value is None:
        value = known[index] = fingerprint(messages[index])
    return value


def _middle(n: int) -> int:
    """The middle message checked for a prefix of ``n``: rounded down to a multiple of 8 in a
    longer conversation, so the next turn's store can reuse the fingerprint its check computed."""
    half = n // 2
    return half if n < 32 else half & ~7


class PrefixCache(Generic[A]):
    """Per-session counts (the stage signals' ``Aggregates``, or a run tally), validated against the conversation
    before reuse.

    Args:
        max_sessions: Sessions remembered at most.
    """

    def __init__(self, max_sessions: int = 4096) -> None:
        self._entries: OrderedDict[Hashable, tuple[A, int, int, int]] = OrderedDict()
        self._max = max_sessions
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Hashable, messages: Sequence[Message], known: Known | None = None) -> A | None:
        """The cached aggregates of a prefix of ``messages``, or ``None``.

        Args:
            key: The session key (or :func:`conversation_key`).
            messages: The conversation.
            known: Fingerprints of ``messages`` already computed; filled in.
        """
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        aggregates, first, middle, last = entry
        n = aggregates.covered
        if n == 0 or len(messages) < n:
            return None
        if (
            _fingerprint_at(messages, n - 1, known) != last
            or _fingerprint_at(messages, 0, known) != first
            or _fingerprint_at(messages, _middle(n), known) != middle
        ):
            return None
        return aggregates

    def store(self, key: Hashable, messages: Sequence[Message], aggregates: A, known: Known | None = None) -> None:
        """Remembers ``aggregates`` (which cover all of ``messages``) for ``key``.

        Args:
            key: The session key (or :func:`conversation_key`).
            messages: The conversation.
            aggregates: Its aggregates.
            known: Fingerprints of ``messages`` already computed.
        """
        n = aggregates.covered
        if n == 0 or n != len(messages):
            return
        entry = (
            aggregates,
            _fingerprint_at(messages, 0, known),
            _fingerprint_at(messages, _middle(n), known),
            _fingerprint_at(messages, n - 1, known),
        )
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
