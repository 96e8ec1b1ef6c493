"""Remembering a session's conversation counts, so each turn only reads its new messages.

Layer: ``routers`` — imports ``protocol`` only.

An agent's next request is its previous conversation plus a few messages. The whole-conversation
signals (turn depth, the compaction marker, totals) only grow, so they are kept per session and
the next request walks only the messages after the ones already counted. The windowed signals
never need the cache: they come from the last few messages.

A cached prefix is reused only if the new conversation is at least as long and still holds the
same first, middle and last message of that prefix (compared by a fingerprint of their content:
role, part kinds and the hashes of their texts, so the cache keeps no conversation alive);
anything else — a
compacted or edited history, a side conversation under the same session id — is counted afresh.
Without a session id the key is the conversation's opening (:func:`conversation_key`).
The cache lives in the router's process and is bounded (least recently used sessions go first);
losing it only costs one full walk.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.routers.stage.signals import Aggregates


def conversation_key(request: ChatRequest) -> str | None:
    """A cache key for a conversation without a session id: its opening messages, abridged.

    Different conversations may share it (the same task started twice); the validation in
    :meth:`PrefixCache.lookup` then sends them down the full walk, so sharing costs time, never
    correctness.
    """
    head = request.messages[:2]
    if not head:
        return None
    parts = []
    for msg in head:
        text = msg.text
        parts.append(f"{msg.role}:{len(text)}:{text[:64]}")
    return "conv:" + "|".join(parts)


Fingerprint = tuple[object, ...]


def fingerprint(msg: Message) -> Fingerprint:
    """What identifies a message's content, cheaply: its role and, per part, the kind and the
    hash of its text (``str`` caches its hash, so a message seen before costs almost nothing)."""
    out: list[object] = [msg.role]
    for part in msg.content:
        text = getattr(part, "text", None)
        if not isinstance(text, str):
            alt = getattr(part, "arguments", None) or getattr(part, "call_id", None) or part.type
            text = alt if isinstance(alt, str) else part.type
        out.append((part.type, len(text), hash(text)))
    return tuple(out)


@dataclass(slots=True, frozen=True)
class _Entry:
    aggregates: Aggregates
    first: Fingerprint
    middle: Fingerprint
    last: Fingerprint


class PrefixCache:
    """Per-session :class:`Aggregates`, validated against the conversation before reuse.

    Args:
        max_sessions: Sessions remembered at most.
    """

    def __init__(self, max_sessions: int = 4096) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._max = max_sessions
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str, messages: Sequence[Message]) -> Aggregates | None:
        """The cached aggregates of a prefix of ``messages``, or ``None``."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        n = entry.aggregates.count
        if n == 0 or len(messages) < n:
            return None
        if (
            fingerprint(messages[n - 1]) != entry.last
            or fingerprint(messages[0]) != entry.first
            or fingerprint(messages[n // 2]) != entry.middle
        ):
            return None
        return entry.aggregates

    def store(self, key: str, messages: Sequence[Message], aggregates: Aggregates) -> None:
        """Remembers ``aggregates`` (which cover all of ``messages``) for ``key``."""
        n = aggregates.count
        if n == 0 or n != len(messages):
            return
        entry = _Entry(
            aggregates, fingerprint(messages[0]), fingerprint(messages[n // 2]), fingerprint(messages[n - 1])
        )
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
