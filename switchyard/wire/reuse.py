"""Decoded messages and tools reused across an agent's turns, so each turn decodes only its new tail.

Layer: ``wire`` — imports ``protocol`` only.

An agent sends its whole conversation every turn: the next request is the previous one plus a
few messages. Decoding 400 messages into the IR (a model per message and part) is most of what a
route that needs the IR spends on a 260 KB body (docs/benchmarks.md, "Agent-sized requests"),
while comparing the parsed messages with the previous turn's is a C-level walk over dicts and
strings that costs a small fraction of it. :class:`MessageReuse` keeps the parsed and decoded
messages of the last few conversations and hands back the decoded message of every position
whose parsed message compares equal — same keys, same values — to the one decoded before.

What makes that exact:

* a message's decoding reads only the message itself (its index only names it in an error), so
  equal messages decode to equal models;
* a message whose decoding reported a lossy conversion (:mod:`switchyard.wire.diagnostics`) is
  never reused but decoded again, so the counters count each request as before;
* Python's ``==`` equates ``1``, ``1.0`` and ``true``, which decode differently where a decoder
  stringifies a value or carries a free-form object through: a decoder calls :func:`loose` when
  it does, and that message is never reused either;
* a codec whose decoding reads what ``==`` does not pin (an object's key order, written out
  as tool-call arguments) compares the messages' JSON texts instead (``key=json_text``), which
  pin order and types alike;
* a conversation is reused only when its last already-known message and every earlier one
  compare equal (one list comparison), or when the new one is a prefix of a kept one (an agent
  that goes back to an earlier turn; the kept one stays as it was); with ``slack``, also when
  all but the kept one's last few messages do (a client that moves a cache marker to the newest
  message), those being decoded again; anything else — an edited or compacted history — is
  decoded in full;
* the decoded models are shared between requests: nothing in switchyard changes a decoded
  message in place (routers and encoders copy with ``model_copy``); a caller of
  :func:`decode_messages` that wants to must copy first.

The kept parsed messages are the ones that were decoded: a later request's equal messages are
compared with them and let go of with that request, so the collector's full collections do not
walk every request's body anew (they walk what is kept).

:class:`ExactReuse` does the same for a value decoded whole (a request's tool definitions, the
same every turn), keyed by its JSON text as orjson writes it, which tells ``1``, ``1.0`` and
``true`` apart, and compared with ``==`` as well, which tells apart what writes the same text
(a list and a tuple, a string and a UUID or an enum; subclasses of the JSON types are not
written at all): a kept decoding is handed out only for a value of the same types throughout.

Bounds: :data:`SLOTS` conversations of at most :data:`MAX_MESSAGES` messages each, the least
recently matched going first; conversations shorter than :data:`MIN_MESSAGES` are decoded as
they come (nothing to gain). The slots hold references to the parsed bodies' message objects
and their models, about twice to three times a body's size each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import orjson

from switchyard.wire import diagnostics

SLOTS = 8
"""Conversations remembered (one per agent session that is talking at once)."""

MIN_MESSAGES = 8
"""Conversations shorter than this are decoded without looking for a previous turn."""

MAX_MESSAGES = 2_000
"""Longer conversations are decoded in full and not kept (engine/offload.py sends them to a thread)."""

MAX_KEY_BYTES = 1 << 20
"""Values whose JSON text is longer than this are decoded as they come and not kept."""

_EXACT = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""orjson refuses these instead of writing them as the JSON type they resemble."""

T = TypeVar("T")


class _LooseCount(threading.local):
    """Calls of :func:`loose` on this thread: a message is decoded on the thread that marks it,
    so a per-thread count is exact and needs no lock on the decode path."""

    n = 0


_loose = _LooseCount()


def loose() -> None:
    """Says the message being decoded read a value that ``==`` does not pin to one JSON text.

    Call it where a decoder stringifies a non-string (``str(1)``, ``str(True)``) or keeps a
    free-form object (a ``cache_control``, parsed tool arguments): an equal message of another
    request could hold ``1.0`` or ``true`` there and must be decoded on its own.
    """
    _loose.n += 1


def _marks() -> tuple[int, int]:
    return diagnostics.reported(), _loose.n


class _Kept:
    """What both caches share: their kept entries (``_kept``, a list or a mapping) under a lock."""

    _kept: list[Any] | OrderedDict[bytes, Any]
    _lock: threading.Lock

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        """Forgets everything kept (tests)."""
        with self._lock:
            self._kept.clear()


class MessageReuse(_Kept, Generic[T]):
    """The last :data:`SLOTS` conversations, parsed and decoded, for the next turn to reuse.

    Thread-safe: the decode of a very long body runs on a worker thread (engine/offload.py).
    """

    def __init__(self, slots: int = SLOTS, *, key: Callable[[Any], Any] | None = None, slack: int = 0) -> None:
        """How many conversations are kept, and how their messages are compared.

        Args:
            slots: Conversations kept.
            key: What messages are compared by instead of themselves (``None``: the parsed
                message, with ``==``). A codec whose decoding reads what ``==`` does not pin —
                the order of an object's keys, ``1`` vs ``1.0`` — passes :func:`json_text`:
                equal texts parse to the same value, order and types included. The kept keys
                are bytes, which the collector does not walk.
            slack: How many of a kept conversation's last messages may differ in the next turn
                (a client that moves a marker such as ``cache_control`` to the newest message
                each turn): the rest is reused, those are decoded again.
        """
        self._slots = slots
        self._key = key
        self._slack = slack
        # (parsed messages or their keys, decoded messages or None where one must be decoded again, whether
        # there is no None), most recently matched last.
        self._kept: list[tuple[list[Any], list[T | None], bool]] = []
        self._lock = threading.Lock()

    def _previous(self, messages: Sequence[Any]) -> tuple[list[Any], list[T | None], bool, bool] | None:
        """The kept conversation that ``messages`` continue or go back into, cut to what they share,
        and whether they go back (a rewind).

        First one that ``messages`` continue (the usual next turn), taken out of the slots; else
        one that ``messages`` are a prefix of (an agent that goes back to an earlier turn, a retry
        from there, another session that opens alike): it stays kept, whole, for whoever
        continues it.
        """
        n_new = len(messages)
        with self._lock:
            for k in range(len(self._kept) - 1, -1, -1):
                raw = self._kept[k][0]
                n = len(raw)
                # The newest known message first: it tells sessions apart that share a system
                # prompt and the opening, then the whole prefix as one C-level list comparison.
                if n <= n_new and raw[n - 1] == messages[n - 1] and raw == messages[:n]:
                    return (*self._kept.pop(k), False)
            for k in range(len(self._kept) - 1, -1, -1):
                raw, decoded, complete = self._kept[k]
                # The kept conversation but its last few messages (a moved marker): cut to
                # what is shared, the rest decoded again.
                for m in range(len(raw) - 1, max(len(raw) - 1 - self._slack, 0), -1):
                    if m <= n_new and raw[m - 1] == messages[m - 1] and raw[:m] == messages[:m]:
                        del self._kept[k]
                        decoded = decoded[:m]
                        complete = complete or all(d is not None for d in decoded)
                        return raw[:m], decoded, complete, False
            last = messages[n_new - 1]
            for k in range(len(self._kept) - 1, -1, -1):
                raw, decoded, complete = self._kept[k]
                if len(raw) > n_new and raw[n_new - 1] == last and raw[:n_new] == messages:
                    self._kept.append(self._kept.pop(k))  # the most recently matched
                    decoded = decoded[:n_new]
                    # (``is``, not ``in``: ``None in`` would call pydantic's ``__eq__`` per model.)
                    complete = complete or all(d is not None for d in decoded)
                    return raw[:n_new], decoded, complete, True
        return None

    def _keep(self, messages: list[Any], decoded: list[T | None], complete: bool) -> None:
        with self._lock:
            self._kept.append((messages, decoded, complete))
            if len(self._kept) > self._slots:
                del self._kept[0]

    def decode(self, messages: list[Any], decode_one: Callable[[Any, int], T]) -> list[T]:
        """``[decode_one(m, i) for i, m in enumerate(messages)]``, reusing a previous turn's models.

        Args:
            messages: The parsed messages (a JSON array's items).
            decode_one: The codec's decoding of one message at its index; deterministic in the
                message, raising for an invalid one.

        Raises:
            Whatever ``decode_one`` raises for an invalid message (nothing is kept then).
        """
        n_new = len(messages)
        if n_new < MIN_MESSAGES or n_new > MAX_MESSAGES:
            return [decode_one(m, i) for i, m in enumerate(messages)]
        parsed = messages
        if self._key is not None:
            try:
                messages = [self._key(m) for m in messages]
            except (TypeError, ValueError):  # not writable as it came: decoded as it comes
                return [decode_one(m, i) for i, m in enumerate(parsed)]
        previous = self._previous(messages)
        # The kept parsed messages of the shared prefix stay the ones kept before (they compare
        # equal to these): this request's own parse is let go of with the request, instead of
        # taking their place and, long-lived, being walked by the collector's full collections.
        raw: list[Any] = previous[0] if previous is not None else []
        known: list[T | None] = previous[1] if previous is not None else []
        out: list[T] = []
        kept: list[T | None] = []
        complete = True
        if previous is not None and previous[2]:
            # The usual turn: the whole previous conversation is reused at once.
            out.extend(known)  # type: ignore[arg-type]  # no None in it
            kept.extend(known)
        for i in range(len(out), n_new):
            done = known[i] if i < len(known) else None
            if done is not None:
                out.append(done)
                kept.append(done)
                continue
            before = _marks()
            one = decode_one(parsed[i], i)
            out.append(one)
            if _marks() == before:
                kept.append(one)
            else:
                kept.append(None)
                complete = False
        if previous is None or not previous[3]:  # (a rewind's whole conversation stays kept)
            # A new list either way: the body's own list may be edited later.
            self._keep(raw + messages[len(raw) :], kept, complete)
        return out


def json_text(value: Any) -> bytes:
    """``value``'s JSON text as orjson writes it: a :class:`MessageReuse` key that tells ``1``,
    ``1.0`` and ``true`` apart and an object's key order, which ``==`` does not.

    Raises:
        TypeError: A value orjson refuses (a subclass of a JSON type, an int past 64 bits).
    """
    return orjson.dumps(value, option=_EXACT)


class ExactReuse(_Kept, Generic[T]):
    """The decodings of the last :data:`SLOTS` values, keyed by their JSON text.

    For a value an agent sends unchanged every turn and that is decoded whole (the tool
    definitions): its text costs a fraction of a decode, and equal texts denote the same value,
    types included. A decoding that reported a lossy conversion is not kept (the counters count
    each request). The decoded objects are shared between requests, as :class:`MessageReuse`'s.
    Thread-safe.
    """

    def __init__(self, slots: int = SLOTS) -> None:
        self._slots = slots
        self._kept: OrderedDict[bytes, tuple[Any, T]] = OrderedDict()  # text: (value, its decoding)
        self._lock = threading.Lock()

    def decode(self, value: Any, decode: Callable[[Any], T]) -> T:
        """``decode(value)``, or the decoding of an earlier value with the same JSON text.

        Args:
            value: A parsed JSON value.
            decode: Its decoding; deterministic in the value, raising for an invalid one.

        Raises:
            Whatever ``decode`` raises (nothing is kept then).
        """
        try:
            key = orjson.dumps(value, option=_EXACT)
        except orjson.JSONEncodeError:  # a subclass, a date, an int past 64 bits: as it comes
            return decode(value)
        with self._lock:
            done = self._kept.get(key)
            if done is not None:
                self._kept.move_to_end(key)
        if done is not None and done[0] == value:
            return done[1]
        before = _marks()
        out = decode(value)
        if _marks() == before and len(key) <= MAX_KEY_BYTES:
            with self._lock:
                self._kept[key] = (value, out)
                if len(self._kept) > self._slots:
                    self._kept.popitem(last=False)
        return out
