"""What a router gets to work with: model calls through the engine's fallback, booked as router cost.

Layer: ``engine``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from switchyard.engine.fallback import Fallback
from switchyard.engine.health import Health
from switchyard.engine.records import Attempt, DecisionRecord
from switchyard.engine.restriction import Restriction
from switchyard.engine.target import Target
from switchyard.engine.timeouts import Budget
from switchyard.engine.windows import PromptSize
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import RouterError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse


class RouterCall:
    """The :class:`~switchyard.protocol.call.ModelCall` a router gets: the engine's fallback and
    retries (:mod:`switchyard.engine.fallback`), the request's deadline, and cost booking.

    Every call is booked in ``record.router_cost`` (calls, tokens, USD, elapsed), including
    calls a router's own deadline cancelled. A restricted request's calls reach only eligible
    targets; a call none of whose targets is eligible raises
    :class:`~switchyard.engine.restriction.RestrictedError` without being made. When a router
    returns one of these answers as the request's answer (escalation serving its buffered
    efficient turn), :meth:`unbook` moves it out of the overhead so it is not counted twice.
    """

    def __init__(
        self,
        targets: Mapping[str, Target],
        health: Health,
        record: DecisionRecord,
        budget: Budget | None = None,
        restriction: Restriction | None = None,
        route: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._targets = targets
        # The caller's forwarded headers (anthropic-beta …): a router's answer call continues
        # the caller's request, beta features (message threads) included. Copied at the first
        # call: most routers (passthrough, random) never make one.
        self._headers = headers
        self._options: CallOptions | None = None
        self._health = health
        self._record = record
        self._budget = budget
        self._restriction = restriction
        self._route = route
        self._booked: dict[int, tuple[ChatResponse, float, float]] = {}

    def unbook(self, response: ChatResponse) -> float | None:
        """Removes ``response``'s call from the router cost; returns its elapsed ms if it was one."""
        booked = self._booked.pop(id(response), None)
        if booked is None:
            return None
        _, usd, elapsed = booked
        cost = self._record.router_cost
        cost.calls -= 1
        cost.input_tokens -= response.usage.input_tokens
        cost.output_tokens -= response.usage.output_tokens
        cost.cost_usd -= usd
        cost.elapsed_ms -= elapsed
        return elapsed

    async def __call__(self, targets: str | Sequence[str], request: ChatRequest) -> ChatResponse:
        names = [targets] if isinstance(targets, str) else list(targets)
        if not names:
            raise RouterError("router asked for a model call with no targets")
        unknown = [n for n in names if n not in self._targets]
        if unknown:
            raise RouterError(f"router asked for a model call on unknown target(s) {unknown}")
        restriction = self._restriction
        if restriction is not None:
            kept = restriction.keep(names)
            if not kept:
                # Refused before any byte leaves: the router degrades as after a failed call.
                restriction.refused.append(names)
                self._record.details["restriction"] = restriction.to_dict()
                raise restriction.error(self._route, names, "see this router call")
            names = kept
        cost = self._record.router_cost
        attempts: list[Attempt] = []
        runner = Fallback(
            self._targets,
            self._health,
            budget=self._budget,
            attempts=attempts,
            prompt=PromptSize(request),
            allowed=restriction.allowed if restriction is not None else None,
        )
        if self._options is None:
            self._options = CallOptions(headers=dict(self._headers or {}))
        started = time.perf_counter()
        try:
            target, response = await runner.run(
                names, lambda t, o: t.backend.complete(request, t.info, o), self._options
            )
        finally:
            # Booked even when a router deadline (e.g. judge_timeout_s) cancelled the call; a call
            # refused outright (every breaker open, deadline spent) counts as one failed call.
            cost.calls += len(attempts) or 1
            cost.failures += sum(not a.ok for a in attempts) if attempts else 1
            cost.elapsed_ms += (time.perf_counter() - started) * 1000
            self._record.router_attempts.extend(attempts)  # per-call detail for traces
        elapsed = attempts[-1].elapsed_ms if attempts else (time.perf_counter() - started) * 1000
        usd = target.info.price.cost(response.usage)
        cost.input_tokens += response.usage.input_tokens
        cost.output_tokens += response.usage.output_tokens
        cost.cost_usd += usd
        self._booked[id(response)] = (response, usd, elapsed)
        return response
