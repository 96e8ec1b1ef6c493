"""Stage 8, book and record: what the answer cost, who served it, and the record to the sinks.

Layer: ``engine``. Reads the answer (its id, model and usage) and the target that gave it;
changes the decision record (served target, usage, cost, durations, fallbacks tried, status
and error), the thread and stored-response records a later request may continue from, and the
health counters of a cancelled request. Hands the finished record to the sinks (masked first:
what a ``restrict:`` rule matched reaches none of them).

A streamed answer is booked in two steps: who serves it when the stream opens
(:func:`served`), usage and cost at its end (:class:`~switchyard.engine.event_stream.EventStream`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from switchyard.engine import served_model, stored_responses, threads
from switchyard.engine.handoff import Answer, Prepared, Serving
from switchyard.engine.records import DecisionRecord, DecisionSink, mark_cancelled
from switchyard.engine.target import Target
from switchyard.protocol.errors import RouterError, SwitchyardError

logger = logging.getLogger("switchyard.engine")


async def book(serving: Serving, prep: Prepared, target: Target, answer: Answer, tried: int, *, emit: bool) -> None:
    """Books a JSON ``answer`` on ``prep``'s record: who served it (``tried``: the targets
    attempted), its usage and cost; hands the record to the sinks unless held (``emit``)."""
    await served(serving, prep, target, tried, answer.id, answer.model)
    record = prep.record
    record.set_usage(answer.usage)
    record.cost_usd = target.info.price.cost(answer.usage)
    record.duration_ms = (time.perf_counter() - prep.t0) * 1000
    if emit:
        serving.emit(record)


async def served(serving: Serving, prep: Prepared, target: Target, tried: int, message_id: str, model: str) -> None:
    """Books who serves an answer (``tried``: the targets attempted): a JSON answer in
    :func:`book`, a stream as it opens."""
    record = prep.record
    record.fallbacks_tried = tried - 1
    record.served_by(target.info)
    await answered_by(serving, prep, target, message_id, model)


async def answered_by(serving: Serving, prep: Prepared, target: Target, message_id: str, model: str) -> None:
    """What the answer says of itself: the model that served it, the reply a thread continues."""
    record = prep.record
    served_model.note(record, model)
    turn, restriction = record.turn_index, prep.restriction
    args = (record.session_id, turn, restriction, record.tenant)
    await threads.remember(serving.store, prep.request, target, message_id, *args)
    await stored_responses.remember(serving.store, prep.request, target, message_id, record.tenant)


def decision_only(serving: Serving, prep: Prepared, path: str | None = None, *, emit: bool = True) -> DecisionRecord:
    """Books a request decided without its answer call (``POST /v1/decision``, the library's
    ``decide``): the target chosen, ``details.decision_only`` (and ``details.answered`` when
    the router answered while deciding), no usage and no answer cost; hands the record to the
    sinks unless ``emit`` is off, so that the decision log, metrics, budgets and the feedback
    index see it as they see a proxied request's (``path``: the endpoint's, ``None`` in-process)."""
    record, decision = prep.record, prep.decision
    record.path = path
    record.selected = selected = decision.answered_by or (prep.candidates[0] if prep.candidates else None)
    if selected is not None and selected in serving.targets:
        record.selected_model = serving.targets[selected].info.model
    record.details["decision_only"] = True
    if decision.response is not None:
        record.details["answered"] = True
    record.overhead_ms = record.duration_ms = (time.perf_counter() - prep.t0) * 1000
    if emit:
        serving.emit(record)
    return record


def exhausted(
    serving: Serving, record: DecisionRecord, error: SwitchyardError | None, t0: float, tried: int = 0
) -> SwitchyardError:
    """Records a request no target answered (``error``; ``None``: no candidates) and returns
    the error the caller gets (``tried``: the targets attempted)."""
    record.fallbacks_tried = max(0, tried - 1)
    failure: SwitchyardError = error or RouterError("route has no candidate targets")
    record.status = failure.status
    record.error = failure.message
    record.duration_ms = (time.perf_counter() - t0) * 1000
    serving.emit(record)
    return failure


def cancelled(serving: Serving, record: DecisionRecord, t0: float, tried: int, exc: asyncio.CancelledError) -> None:
    """Records a cancelled request (caller gone, or shutdown: ``records.mark_cancelled``)."""
    if not mark_cancelled(record, t0, tried, exc):
        serving.health.count("cancelled")
    serving.emit(record)


def emit_to(sinks: Iterable[DecisionSink], record: DecisionRecord) -> None:
    """Masks ``record`` and hands it to every sink (a failing sink is logged; the rest still run)."""
    record.mask()  # what a restrict: rule matched reaches no sink (an upstream error may quote it)
    for sink in sinks:
        try:
            sink(record)
        except Exception:  # a broken sink must not break serving
            logger.exception("decision sink failed")
