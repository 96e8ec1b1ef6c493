"""Decoding a very large request body off the event loop.

Layer: ``engine``.

A 5 MB Chat request (100,000 short messages) takes seconds of CPU to decode into the IR; on the
event loop that would stall every other request for as long. It is decoded on a worker thread
instead. The hand-off is not free (the hop to the thread and back, pausing and freezing the
collector, a release thread per request), so only work that costs more than the hop takes it:
a body of :data:`PARSE_OFF_LOOP_BYTES` or more is parsed there, and a parsed body of
:data:`DECODE_OFF_LOOP_MESSAGES` messages or more is decoded there (:func:`decode`). An agent's
260 KiB conversation of a few hundred messages is read on the loop, once: parsing it takes a
fraction of a millisecond, and a same-format relay (``plain_chat``) never decodes it at all
(docs/benchmarks.md, *agent-sized requests*). Two things keep that thread from still stalling the loop through the GIL:

- pure-Python work gives the GIL back every switch interval (5 ms), so the loop keeps turning;
- the cyclic garbage collector is paused while the thread decodes: hundreds of thousands of new
  objects would otherwise trigger full collections, each of which walks every object in the
  process while holding the GIL (measured: loop stalls of 200 to 400 ms during one decode, ≤ 35 ms
  without collections). Reference counting still frees everything as usual; the collector is
  switched back on when the last concurrent decode ends (unless it was off to begin with).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from typing import Any

from switchyard.protocol.request import ChatRequest
from switchyard.wire.json import load_object

PARSE_OFF_LOOP_BYTES = 1024 * 1024
"""A request body this large is parsed (and decoded) on a worker thread. Below it, parsing on the
loop costs less than the hand-off (orjson reads an agent's conversation at several hundred MB/s:
about 0.35 ms for 260 KiB)."""

DECODE_OFF_LOOP_MESSAGES = 2000
"""A parsed body with this many messages (or Responses input items) is decoded into the IR on a
worker thread: the IR decode costs several µs a message, so 2,000 are some 15 ms of the loop."""

_lock = threading.Lock()
_paused = 0  # decodes running with the collector paused by us
_releasing = 0  # release threads still waiting or dismantling (see pending_releases)


def _pause_gc() -> bool:
    global _paused
    with _lock:
        if _paused == 0 and not gc.isenabled():
            return False  # someone else turned it off: leave it alone
        _paused += 1
        gc.disable()
        return True


def _resume_gc() -> None:
    global _paused
    with _lock:
        _paused -= 1
        if _paused == 0:
            # The new objects sit in the youngest generation (nothing was collected while paused):
            # the next collection would walk all of them at once. Frozen, no collection walks them.
            gc.freeze()
            gc.enable()


def _decode(codec: Any, body: bytes) -> tuple[dict[str, Any], ChatRequest]:
    paused = _pause_gc()
    try:
        raw = load_object(body)
        return raw, codec.decode_request(raw)
    finally:
        if paused:
            _resume_gc()


def _decode_raw(codec: Any, raw: dict[str, Any]) -> ChatRequest:
    paused = _pause_gc()
    try:
        request: ChatRequest = codec.decode_request(raw)
        return request
    finally:
        if paused:
            _resume_gc()


def _items(raw: dict[str, Any]) -> int:
    """How many messages (Chat, Anthropic) or input items (Responses) ``raw`` holds."""
    n = 0
    for key in ("messages", "input"):
        value = raw.get(key)
        if type(value) is list:
            n += len(value)
    return n


async def decode(codec: Any, raw: dict[str, Any]) -> ChatRequest:
    """The IR request of a parsed body: on the loop, or on a worker thread when it holds
    :data:`DECODE_OFF_LOOP_MESSAGES` items or more (and then let go of off the loop as well,
    :func:`release_off_loop`).

    Raises:
        SwitchyardError: As ``codec.decode_request``.
    """
    if _items(raw) < DECODE_OFF_LOOP_MESSAGES:
        request: ChatRequest = codec.decode_request(raw)
        return request
    request = await decode_raw_off_loop(codec, raw)
    release_off_loop(raw, request)
    return request


async def decode_raw_off_loop(codec: Any, raw: dict[str, Any]) -> ChatRequest:
    """The IR request of an already parsed body, decoded on a worker thread (as
    :func:`decode_off_loop`, for a caller that had to look at the JSON first)."""
    return await asyncio.to_thread(_decode_raw, codec, raw)


async def decode_off_loop(codec: Any, body: bytes) -> tuple[dict[str, Any], ChatRequest]:
    """The raw JSON object and its IR request, decoded on a worker thread.

    Raises:
        SwitchyardError: As ``codec.decode_request`` (an invalid body is a 400 as usual).
    """
    return await asyncio.to_thread(_decode, codec, body)


_PIECE = 2000


def _dismantle(objs: list[Any]) -> int:
    """Frees the long lists of ``objs`` a piece at a time (see :func:`release_off_loop`);
    returns how many items it freed that way."""
    freed = 0
    while objs:
        obj = objs.pop()
        lists = [obj.messages] if isinstance(obj, ChatRequest) else [v for v in obj.values() if isinstance(v, list)]
        # Held only here (``obj`` by this frame and the call; each list by ``obj``, ``lists``, the
        # loop and the call): emptying them changes nothing anyone else can see.
        if sys.getrefcount(obj) > 2:
            continue
        for items in lists:
            if len(items) > _PIECE and sys.getrefcount(items) <= 4:
                freed += len(items)
                while items:
                    del items[-_PIECE:]
        del obj, lists
    return freed


def release_off_loop(*objs: Any) -> None:
    """Lets go of a large decoded request on a worker thread, in pieces.

    Freeing 100,000 messages at once is one long C call (a few hundred ms here) that would run on
    the event loop when the request's last reference goes. Call this as soon as the request is
    decoded: a worker thread waits until every other reference is gone (the request answered),
    then empties the long lists of ``objs`` ``_PIECE`` items per step, so the loop gets the GIL
    in between. Anything still held elsewhere after ``_RELEASE_WAIT_S`` is left to the usual
    reference counting.
    """
    global _releasing
    with _lock:
        _releasing += 1
    # Its own thread, not the default executor's: it may wait as long as a stream runs.
    threading.Thread(target=_release_when_alone, args=(list(objs),), daemon=True).start()


def pending_releases() -> int:
    """Release threads that have not finished yet (each may still unfreeze the collector's
    frozen objects: tests wait for 0 before they look at ``gc.get_freeze_count()``)."""
    return _releasing


_RELEASE_WAIT_S = 900.0


def _release_when_alone(objs: list[Any]) -> None:
    global _releasing
    try:
        _release(objs)
    finally:
        with _lock:
            _releasing -= 1


def _release(objs: list[Any]) -> None:
    deadline = time.monotonic() + _RELEASE_WAIT_S
    delay = 0.005
    # ``objs``, the loop variable and the getrefcount argument: 3 references when nobody else
    # holds one.
    while any(sys.getrefcount(o) > 3 for o in objs) and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    _dismantle(objs)
    # Objects frozen after a decode (``_resume_gc``) go back under the collector, into its oldest
    # generation: a reference cycle that was alive at the freeze (another request's, say) is
    # collected again by the next full collection instead of being kept for the process's life.
    with _lock:
        if _paused == 0:
            gc.unfreeze()
