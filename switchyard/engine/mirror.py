"""Shadow mode's mirror: the request also sent to the target the router chose, off the caller's path.

Layer: ``engine``. Reads the prepared request of a shadow request
(:class:`~switchyard.engine.handoff.Prepared`) and its finished decision record; changes the
record's ``details.mirror`` and ``experiment_cost_usd``, and when the record reaches the sinks.

Shadow mode prices the baseline's tokens at the chosen target's price (``would_cost_usd``),
which is right only when both models write as much. For a sticky share of shadow sessions
(``experiment.mirror_share``; :meth:`Experiment.mirrored
<switchyard.engine.experiment.Experiment.mirrored>`), every request whose router choice is not
the baseline is sent to that choice as well, once the caller's answer is complete: the answer
is discarded, its usage and cost are written on the record, and ``switchyard stats
--experiment`` corrects the prediction with what these pairs measured
(:mod:`switchyard.engine.mirror_stats`).

The rules, each the reason a mirror is *not* sent:

* the caller never waits for it: it starts when the record is handed to the sinks (after the
  answer — for the proxy, after the reply's last byte), and the record goes to the sinks when
  the mirror ends (answered, failed, or cancelled at shutdown: never lost);
* a target the request's ``restrict:`` rules forbid is never sent the request
  (``details.mirror.skipped: restricted``);
* at most ``experiment.mirror_concurrency`` mirrors of a route run at once per event loop; a
  request beyond that is not mirrored (``skipped: busy``), so a slow target cannot pile up work;
* its spend is booked: ``experiment_cost_usd`` is part of the record's ``total_cost_usd``, which
  key budgets, ``/v1/stats``, metrics and the dashboard count;
* a stream is mirrored as one JSON call (every supported API answers either way); no retries,
  no fallback, and breakers are not touched: a mirror measures, it does not serve.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.handoff import Prepared
from switchyard.engine.records import DecisionRecord
from switchyard.engine.target import Target
from switchyard.protocol.call import CallOptions

MAX_PENDING = 10_000
"""Most planned mirrors waiting for their record (a record is always emitted, so this bound is a
guard, not a limit that traffic reaches)."""


@dataclass(slots=True)
class _Plan:
    target: Target
    prep: Prepared
    route: str
    limit: int


class Mirrors:
    """The mirrors of one engine (one event loop): planned when a shadow request is decided,
    started when its record is emitted."""

    def __init__(self) -> None:
        self._pending: OrderedDict[str, _Plan] = OrderedDict()
        self._in_flight: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Mirror calls running now, all routes together."""
        return len(self._tasks)

    def plan(self, prep: Prepared, targets: Mapping[str, Target]) -> None:
        """Plans ``prep``'s mirror when it is a shadow request of a mirrored session whose router
        chose another target than the baseline; notes a mirror the restriction forbids."""
        experiment, record = prep.route.experiment, prep.record
        if experiment is None or experiment.mirror_share <= 0 or record.details.get("arm") != "shadow":
            return
        would = record.details.get("would_select")
        if not isinstance(would, str) or would == experiment.baseline or would not in targets:
            return  # the baseline's own answer is the measurement; a router's own answer is booked
        if record.details.get("would_answer_itself") or not experiment.mirrored(
            record.tenant, record.session_id, record.request_id
        ):
            return
        if prep.restriction is not None and not prep.restriction.permits(would):
            record.details["mirror"] = {"target": would, "skipped": "restricted"}
            return
        self._pending[record.request_id] = _Plan(targets[would], prep, prep.route.name, experiment.mirror_concurrency)
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)

    def start(self, record: DecisionRecord, emit: Callable[[DecisionRecord], None]) -> bool:
        """Starts ``record``'s planned mirror, which hands the record to ``emit`` when it ends.

        Returns:
            ``False`` when there is none to start (no plan, a failed answer, the route's mirrors
            all busy, no running loop): the caller emits the record itself.
        """
        plan = self._pending.pop(record.request_id, None) if self._pending else None
        if plan is None or record.status >= 400:
            return False
        if self._in_flight.get(plan.route, 0) >= plan.limit:
            record.details["mirror"] = {"target": plan.target.info.name, "skipped": "busy"}
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._in_flight[plan.route] = self._in_flight.get(plan.route, 0) + 1
        task = loop.create_task(self._run(plan, record, emit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, plan: _Plan, record: DecisionRecord, emit: Callable[[DecisionRecord], None]) -> None:
        target, prep = plan.target, plan.prep
        found: dict[str, Any] = {"target": target.info.name, "model": target.info.model}
        started = time.perf_counter()
        try:
            request = prep.decode() if prep.decode is not None else prep.request
            if request.stream:
                request = request.model_copy(update={"stream": False})
            options = CallOptions(headers=dict(prep.options.headers))
            response = await target.backend.complete(request, target.info, options)
            usage = response.usage
            usd = target.info.price.cost(usage)
            found.update(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_creation_tokens=usage.cache_creation_tokens,
                cost_usd=usd,
            )
            record.experiment_cost_usd += usd
        except asyncio.CancelledError:
            found["error"] = "cancelled: the engine closed before the mirror answered"
            raise
        except Exception as exc:  # a mirror's failure is recorded, never raised to anyone
            found["error"] = f"{type(exc).__name__}: {exc}"[:500]
        finally:
            found["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 3)
            record.details["mirror"] = found
            self._in_flight[plan.route] -= 1
            emit(record)

    async def aclose(self) -> None:
        """Cancels the mirrors in flight; their records are emitted with the cancellation noted."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._pending.clear()  # a record emitted after this goes to the sinks unmirrored


__all__ = ["Mirrors"]
