"""A router's own answer (``Decision.response``): recorded and served like an upstream's.

Layer: ``engine``: the answer stage's way when the decide stage brought an answer. Reads the
decision's answer; changes the record (served target, usage, cost, overhead) and the target's
markup-leak health. Routers that answer themselves (an advisor's review, a cascade's accepted
draft) made the answer call already; the engine only books it, checks its markup and replays it
as JSON or as a stream.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from switchyard.engine import served_model
from switchyard.engine.event_stream import EventStream
from switchyard.engine.handoff import Emit, Prepared
from switchyard.engine.health import Health
from switchyard.engine.markup import flag_leak, response_marker
from switchyard.engine.target import Completion, NoBackend, Target
from switchyard.protocol.stream import response_to_events
from switchyard.protocol.targets import TargetInfo


def answered(prep: Prepared, targets: Mapping[str, Target], health: Health, emit: Emit) -> Completion:
    """The router's answer as a completion, its record finished and emitted."""
    completion = _unemitted(prep, targets, health)
    record, response = completion.record, completion.response
    target = targets.get(completion.target)
    if target is not None:
        record.cost_usd = target.info.price.cost(response.usage)
    record.set_usage(response.usage)
    record.duration_ms = (time.perf_counter() - prep.t0) * 1000
    emit(record)
    return completion


def answered_stream(prep: Prepared, targets: Mapping[str, Target], health: Health, emit: Emit) -> EventStream:
    """The router's answer replayed as a stream (the record is emitted at its end)."""
    completion = _unemitted(prep, targets, health)
    events = response_to_events(completion.response)
    fake_target = targets.get(completion.target) or Target(
        TargetInfo(name=completion.target, model=completion.response.model), NoBackend()
    )
    return EventStream(events, None, prep.record, fake_target, emit, prep.t0)


def _unemitted(prep: Prepared, targets: Mapping[str, Target], health: Health) -> Completion:
    response = prep.decision.response
    assert response is not None
    name = prep.decision.answered_by or (prep.candidates[0] if prep.candidates else "")
    target = targets.get(name)
    if target is not None:
        prep.record.served_by(target.info)
        served_model.note(prep.record, response.model)
        if target.reliability.markup_leak != "off":
            # The router made this call itself: too late to fall back, but worth flagging.
            marker = response_marker(response)
            if marker is not None:
                flag_leak(health, target, marker, prep.record, replaceable=False)
    # The answer call a router made itself is not routing overhead.
    answer_ms = float(prep.record.details.get("answer_elapsed_ms", 0.0))
    prep.record.overhead_ms = (time.perf_counter() - prep.t0) * 1000 - answer_ms
    return Completion(response, prep.record, name)
