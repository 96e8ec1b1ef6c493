"""Stage 7, answer/stream: the answer the caller gets, as JSON or as an event stream.

Layer: ``engine``. Reads the prepared request (:class:`~switchyard.engine.handoff.Prepared`);
runs the attempt stage (:mod:`switchyard.engine.attempt`) unless the router answered itself
(:mod:`switchyard.engine.own_answer`), and the book stage (:mod:`switchyard.engine.book`) on
what it returns. Changes the record only through them, and ``Prepared.options`` of a stream a
verifier checks whole (fetched as JSON: no streamed body replay).

A stream is handed on as an :class:`~switchyard.engine.event_stream.EventStream`: the
verifier's checks run as it flows (:func:`~switchyard.engine.verify.gated_stream`), its usage,
cost and health outcome are booked at its end. The wire encoding of either is the caller's
(``Engine.handle``, ``engine/replies.py``, ``engine/stream_out.py``).
"""

from __future__ import annotations

from dataclasses import replace

from switchyard.engine import attempt, book, own_answer
from switchyard.engine.event_stream import EventStream
from switchyard.engine.handoff import Answer, Prepared, Serving
from switchyard.engine.stream_health import StreamHealth
from switchyard.engine.target import Completion
from switchyard.engine.verify import gated_stream
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import MessageStart, response_to_events


async def completion(serving: Serving, prep: Prepared, *, emit: bool = True) -> Completion:
    """The JSON answer to ``prep``, booked; its record goes to the sinks unless held (``emit``;
    a router's own answer's goes at once)."""
    if prep.decision.response is not None:
        return own_answer.answered(prep, serving.targets, serving.health, serving.emit)
    target, response, tried = await attempt.answered(serving, prep, attempt.complete)
    assert isinstance(response, ChatResponse)  # attempt.complete's
    await book.book(serving, prep, target, response, tried, emit=emit)
    return Completion(response, prep.record, target.info.name)


async def relayed(serving: Serving, prep: Prepared, *, emit: bool) -> Answer:
    """The JSON answer to a plain Chat stand-in ``prep`` (no answer of the router's own):
    through the relay lane when it can, the walk when it must; booked as :func:`completion`
    books it."""
    target, answer, tried = await attempt.answered(serving, prep, attempt.complete_plain, relayed=True)
    await book.book(serving, prep, target, answer, tried, emit=emit)
    return answer


async def stream(serving: Serving, prep: Prepared, *, runs: bool = False, relay: bool = False) -> EventStream:
    """The answer stream to ``prep``, open on the first candidate that accepts it; with ``runs``
    (a Chat or Anthropic caller's reply), through ``open_stream_runs`` where it exists; with
    ``relay`` (a plain Chat stand-in), through the relay lane when it can."""
    if prep.decision.response is not None:
        return own_answer.answered_stream(prep, serving.targets, serving.health, serving.emit)
    verify = prep.route.verify
    if verify is not None and verify.buffers(prep.candidates, prep.request):
        return await buffered(serving, prep)
    target, events, first, tried, prompt = await attempt.opened(serving, prep, runs=runs, relayed=relay)
    record = prep.record
    start = next((e for e in first if isinstance(e, MessageStart)), MessageStart(id="", model=""))
    await book.served(serving, prep, target, tried, start.id, start.model)
    events = gated_stream(verify, prep.request, record, target.info.name, first, events)  # docs/verify.md
    hooks = StreamHealth(serving.health, target, record)
    return EventStream(
        first,
        events,
        record,
        target,
        serving.emit,
        prep.t0,
        on_failure=hooks.failed_mid_stream,
        on_markup=hooks.leaked if target.reliability.markup_leak != "off" else None,
        on_end=hooks.ended,
        # Charged when no usage report came; the fallback's own size (counted at most once).
        prompt_tokens=prompt.tokens,
    )


async def buffered(serving: Serving, prep: Prepared) -> EventStream:
    """Active verification of a stream: the answer is checked whole before any is released."""
    prep.options = replace(prep.options, raw_body=None)  # fetched whole: no streamed body replay
    done = await completion(serving, prep, emit=False)
    target = serving.targets[done.target]
    return EventStream(response_to_events(done.response), None, prep.record, target, serving.emit, prep.t0)
