"""The relay lane: the attempt stage's strategy for a plain Chat request — its first candidate
called at once, without the fallback walk around the one call nearly every such request makes.

Layer: ``engine``. Reads the prepared request (:class:`~switchyard.engine.handoff.Prepared`) and
its first candidate's health; changes the record's attempts, the target's health counters and
``Prepared.first`` (an attempt that did not succeed, for the walk to judge).

A same-format passthrough of a plain Chat body (:func:`switchyard.engine.plain_chat.view`)
goes to its route's first candidate and, nearly always, is answered there. The general path
builds the walk of :class:`~switchyard.engine.fallback.Fallback` for it all the same: its
state, the candidate loop, the retry loop and their checks, about a tenth of the proxy's CPU
per request (docs/benchmarks.md, ``benchmarks/engine_layers.py``). The lane makes the checks
the walk would make before that first attempt, makes the same call with the same options, and
books the success as the walk books it. Everything else goes the general way:

* when a check would not let the attempt through as it is (a held backend, a breaker that is
  not closed, a learned context window, a passed deadline), nothing is done here and the walk
  runs as usual;
* when the attempt does not succeed (an upstream error, a cancelled request, a bug), the walk
  takes it as its own first attempt (:class:`~switchyard.engine.fallback.FirstAttempt`): the
  same judgement, retries, fallbacks, breaker counts, error reply and decision record as if the
  walk had made it.

The attempt stage (:mod:`switchyard.engine.attempt`) asks this lane first when the intake stage
took the plain lane. A stream of such a request is opened the same way, its first content read as
the walk reads it; its success reaches the target's breaker at the stream's end, as the walk
defers it for a stream.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from switchyard.engine.fallback import FirstAttempt, book_success, limited, tries_at_once
from switchyard.engine.handoff import Prepared, Serving

if TYPE_CHECKING:
    from switchyard.engine.target import Target
    from switchyard.protocol.call import CallOptions

T = TypeVar("T")


async def first_attempt(
    serving: Serving, prep: Prepared, call: Callable[[Target, CallOptions], Awaitable[T]], *, stream: bool
) -> tuple[Target, T] | None:
    """``call`` on the route's first candidate of a plain Chat relay ``prep`` when the walk
    would try it at once — for a ``stream``, its opening and first content (the event stream's
    ``open_first``) — booked as the walk books a success (a stream's is told to the breaker at
    its end, so not here); ``None`` when the walk is to make the attempt, or (``prep.first``
    set) to judge the one made here. A JSON answer's overhead is stamped here (a stream's was,
    before)."""
    name = prep.candidates[0] if prep.candidates else None
    target = serving.targets.get(name) if name is not None else None
    if target is None or not _ready(serving, prep, target):
        return None
    if not stream:
        prep.record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
    budget = prep.budget
    options = limited(prep.options, budget.deadline, budget.overrides or prep.options.timeout)
    started = time.perf_counter()
    try:
        found = await call(target, options)
    except BaseException as exc:  # the walk's to judge, as if it had made this attempt
        prep.first = FirstAttempt(target.info.name, exc, started)
        return None
    book_success(serving.health, prep.record.attempts, target.info.name, started, tell=not stream)
    return target, found


def _ready(serving: Serving, prep: Prepared, target: Target) -> bool:
    """Whether the walk would make its first attempt on ``target`` at once, with nothing to
    skip, count or take first, and nothing after it to check the answer against."""
    if prep.restriction is not None or prep.route.verify is not None:
        return False
    return tries_at_once(serving.health, target, prep.budget)
