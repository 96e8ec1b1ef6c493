"""Stage 5, attempt (with stage 6, verify): the answer call on the first candidate that gives one.

Layer: ``engine``. Reads the prepared request (:class:`~switchyard.engine.handoff.Prepared`):
its candidates, options, budget and restriction; changes the record's attempts, skips and
overhead, ``Prepared.first``, and the health of the targets tried (breakers, counters, learned
context windows, markup leaks). A request no candidate answers, or that is cancelled, is booked
and recorded here (``engine/book.py``) with the error the caller gets.

Two strategies make the attempts:

* the fallback walk (:class:`~switchyard.engine.fallback.Fallback`): candidates in order,
  retries, breakers, context-window fallback, the restriction as a last line;
* the relay lane (:mod:`switchyard.engine.relay`), for a plain Chat stand-in: its first
  candidate called at once when the walk would call it at once; anything else, and any attempt
  of the lane's that does not succeed, goes to the walk, which judges it as its own first.

A route with a verifier checks a JSON answer here (:func:`switchyard.engine.verify.gate`), and
may walk again for a better one; a stream's checks run as it flows (the answer stage's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

from switchyard.engine import book, relay
from switchyard.engine.event_stream import open_first
from switchyard.engine.fallback import Fallback
from switchyard.engine.handoff import Answer, Prepared, Serving, prompt_size
from switchyard.engine.markup import check_answer
from switchyard.engine.target import Target
from switchyard.engine.verify import gate
from switchyard.engine.windows import PromptSize
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.response import ChatResponse

Call = Callable[[Serving, Target, Prepared, CallOptions], Awaitable[Answer]]
"""One answer call on one target: :func:`complete` or :func:`complete_plain`."""


def walk(serving: Serving, prep: Prepared, *, stream: bool = False) -> Fallback:
    """The fallback walk over ``prep``'s candidates (a ``stream``'s success is told at its end)."""
    return Fallback(
        serving.targets,
        serving.health,
        budget=prep.budget,
        auth_fallback=prep.route.fallback_on_auth_error,
        attempts=prep.record.attempts,
        skipped=prep.record.skipped,
        prompt=prompt_size(prep),
        defer_success=stream,
        allowed=prep.restriction.allowed if prep.restriction is not None else None,
        first=prep.first,
    )


async def complete(serving: Serving, target: Target, prep: Prepared, options: CallOptions) -> ChatResponse:
    """One answer call, with the markup check for Chat upstreams that ask for it."""
    response = await target.backend.complete(prep.request, target.info, options)
    check_answer(serving.health, target, prep.record, response)
    return response


async def complete_plain(serving: Serving, target: Target, prep: Prepared, options: CallOptions) -> Answer:
    """The plain Chat lane's answer call: a plain answer comes back without the IR
    (``HttpBackend.complete_plain``, wire/openai_chat/plain_answer.py)."""
    call = getattr(target.backend, "complete_plain", None) or target.backend.complete
    answer: Answer = await call(prep.request, target.info, options)
    check_answer(serving.health, target, prep.record, answer)
    return answer


async def answered(
    serving: Serving, prep: Prepared, call: Call, *, relayed: bool = False
) -> tuple[Target, Answer, int]:
    """The JSON answer from the first candidate that gives one (``relayed``: the relay lane
    tried first), verified where the route verifies: its target, the answer and how many
    targets were tried.

    Raises:
        SwitchyardError: No candidate answered (recorded and emitted).
    """
    if relayed:
        found = await relay.first_attempt(serving, prep, lambda t, o: call(serving, t, prep, o), stream=False)
        if found is not None:
            return found[0], found[1], 1
    record, verify = prep.record, prep.route.verify
    if prep.first is None:  # else measured before the relay lane's attempt
        record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
    if not prep.candidates:
        raise book.exhausted(serving, record, None, prep.t0)
    runner = walk(serving, prep)
    try:
        target, response = await runner.run(prep.candidates, lambda t, o: call(serving, t, prep, o), prep.options)
        if verify is not None and verify.gates(target.info.name, prep.request):  # docs/verify.md
            assert isinstance(response, ChatResponse)  # the plain lane takes no verified route
            again = lambda names: runner.run(names, lambda t, o: complete(serving, t, prep, o), prep.options)  # noqa: E731
            target, response = await gate(verify, prep.request, record, target, response, again)
    except UpstreamError as exc:
        raise book.exhausted(serving, record, exc, prep.t0, len(runner.tried)) from None
    except asyncio.CancelledError as exc:
        book.cancelled(serving, record, prep.t0, len(runner.tried), exc)
        raise
    return target, response, len(runner.tried)


async def opened(
    serving: Serving, prep: Prepared, *, runs: bool, relayed: bool
) -> tuple[Target, AsyncIterator[Any], list[Any], int, PromptSize]:
    """The stream of the first candidate that opens one and sends content (``runs``: through
    ``open_stream_runs`` where the backend has it; ``relayed``: the relay lane tried first):
    its target, the rest of its events, its first events, how many targets were tried, and the
    prompt's size (the fallback's own, when it counted it).

    Raises:
        SwitchyardError: No candidate opened a stream (recorded and emitted).
    """
    record = prep.record
    record.overhead_ms = (time.perf_counter() - prep.t0) * 1000
    if not prep.candidates:
        raise book.exhausted(serving, record, None, prep.t0)
    opener = partial(open_first, serving.health, prep.request, record, runs)
    found = await relay.first_attempt(serving, prep, opener, stream=True) if relayed else None  # else the walk
    if found is not None:
        target, (events, first) = found
        return target, events, first, 1, prompt_size(prep)
    runner = walk(serving, prep, stream=True)
    try:
        target, (events, first) = await runner.run(prep.candidates, opener, prep.options)
    except UpstreamError as exc:
        raise book.exhausted(serving, record, exc, prep.t0, len(runner.tried)) from None
    except asyncio.CancelledError as exc:
        book.cancelled(serving, record, prep.t0, len(runner.tried), exc)
        raise
    return target, events, first, len(runner.tried), runner.prompt or prompt_size(prep)
