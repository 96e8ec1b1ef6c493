"""The ``decision_model`` router: a decision model's probabilities pick the target.

Layer: ``routers`` — imports ``protocol`` only. No I/O: the decision model is reached through
the injected call (see :mod:`switchyard.routers.decision.ask`).

Flow (shared with the LLM classifier, :class:`~switchyard.routers.classifier.ClassifierRouter`):
session affinity first (``classify_trigger``), then the decision model, then:

* a usable verdict whose best target reaches ``min_probability`` → that target, the others as
  fallbacks in order of probability (source ``decision-model``);
* a verdict below the cutoff, a malformed one, a timeout or an upstream error →
  ``default_target`` first, the others after it (source ``fail_open``, abstained, with
  ``judge_failure`` naming why). A decision model never fails the request.

The record carries the probabilities per target and per label, the decision call's latency and
tokens, and the model's own confidence when it reports one; the engine books the call's tokens
and USD in ``router_cost`` like any judge call.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.affinity import Affinity
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.classifier import ClassifierRouter
from switchyard.routers.decision.ask import Asked, Asker
from switchyard.routers.decision.verdict import Ranking, check, rank
from switchyard.routers.judge import JudgeFailure
from switchyard.routers.transcript import task_view


@dataclass(slots=True)
class _Once:
    """One asking of the decision model (one option order)."""

    response: ChatResponse | None = None
    asked: Asked | None = None
    dist: dict[str, float] | None = None
    failure: JudgeFailure | None = None


class DecisionModelRouter(ClassifierRouter):
    """Routes by a decision model's distribution over labelled targets.

    Args:
        askers: How the decision model is asked (RLCD JSON or a typed choice), one per option
            order: with several, they are asked at once and their distributions averaged
            (against a preference for the first or last option offered).
        labels: Label → target, in config order.
        default_target: Serves when there is no usable verdict or it is below the cutoff.
        min_probability: Probability the best target needs to be trusted.
        sum_tolerance: How far the probabilities may sum from 1.
        affinity: Trigger and session handling.
        recent_turn_window: As for the LLM classifier's view.
        message_chars: Cap on each message shown.
        cheapest: The route's cheapest target (``None``: none is cheapest alone): its probability
            is recorded as ``details.p_success`` (see :meth:`_verdict_details`).
    """

    def __init__(
        self,
        askers: Sequence[Asker],
        *,
        labels: Mapping[str, str],
        default_target: str,
        min_probability: float,
        sum_tolerance: float,
        affinity: Affinity,
        recent_turn_window: int | None = None,
        message_chars: int = 4000,
        cheapest: str | None = None,
    ) -> None:
        super().__init__(affinity)
        if not askers:
            raise ValueError("a decision_model router needs at least one asker")
        self.askers = tuple(askers)
        self.labels = dict(labels)
        self.default_target = default_target
        self.min_probability = min_probability
        self.sum_tolerance = sum_tolerance
        self.recent_turn_window = recent_turn_window
        self.message_chars = message_chars
        self.targets = tuple(dict.fromkeys([*self.labels.values(), default_target]))
        self.cheapest = cheapest

    @property
    def asker(self) -> Asker:
        """The asker of the configured option order."""
        return self.askers[0]

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        view = task_view(request.messages, window=self.recent_turn_window, message_chars=self.message_chars)
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(self._ask(asker, call, view) for asker in self.askers))
        facts = self._call_facts(started, outcomes)
        failed = next((o.failure for o in outcomes if o.failure is not None), None)
        if failed is not None:
            return self._fail_open(failed.reason, failed.detail, facts, None)
        dists = [o.dist for o in outcomes if o.dist is not None]
        averaged = {label: math.fsum(d[label] for d in dists) / len(dists) for label in self.labels}
        ranking = rank(averaged, self.labels)
        chosen = ranking.ranked[0]
        p = ranking.targets[chosen]
        if p < self.min_probability:
            detail = f"{chosen!r} has probability {p:.3f} < min_probability {self.min_probability:g}"
            return self._fail_open("below_cutoff", detail, facts, ranking)
        return Decision(
            candidates=ranking.ranked,
            source="decision-model",
            confidence=p,
            reason=f"decision model chose {ranking.label!r} → {chosen!r} (p={p:.3f})",
            details={**self._verdict_details(ranking), "decision_model": facts, "label": ranking.label},
        )

    async def _ask(self, asker: Asker, call: ModelCall, view: str) -> _Once:
        once = _Once()
        try:
            once.response = await asker.ask(call, view)
            once.asked = asker.read(once.response)
            once.dist = check(
                once.asked.pairs,
                list(self.labels),
                named=once.asked.named,
                tolerance=self.sum_tolerance,
                judge=asker.target,
            )
        except JudgeFailure as failure:
            once.failure = failure
        return once

    def _fail_open(self, reason: str, detail: str, facts: dict[str, Any], ranking: Ranking | None) -> Decision:
        order = ranking.ranked if ranking is not None else self.targets
        candidates = (self.default_target, *(t for t in order if t != self.default_target))
        details: dict[str, Any] = {"judge_failure": reason, "judge_failure_detail": detail, "decision_model": facts}
        if ranking is not None:
            details.update(self._verdict_details(ranking))
        return Decision(
            candidates=candidates,
            source="fail_open",
            confidence=ranking.targets[ranking.ranked[0]] if ranking is not None else None,
            reason=f"decision model {self.asker.target!r}: {reason}; {self.default_target!r} serves",
            details=details,
            abstained=True,
        )

    def _verdict_details(self, ranking: Ranking) -> dict[str, Any]:
        details: dict[str, Any] = {
            "probabilities": {t: round(p, 6) for t, p in ranking.targets.items()},
            "label_probabilities": {lb: round(p, 6) for lb, p in ranking.labels.items()},
            "min_probability": self.min_probability,
        }
        # P(the cheapest target is good enough): the labels say which tasks a target fits, so the
        # probability that the cheapest fits is the chance the task needs nothing pricier. A
        # pricier target's probability says nothing cheaper fits, not that it succeeds: no entry.
        # `switchyard eval` scores this against the recorded outcomes (ECE), as for learned routes.
        cheapest = self.cheapest
        if cheapest is not None and cheapest in ranking.targets:
            details["p_success"] = {cheapest: round(ranking.targets[cheapest], 6)}
        return details

    def _call_facts(self, started: float, outcomes: Sequence[_Once]) -> dict[str, Any]:
        """The decision call(s) as the record shows them: protocol, target, latency, and (when an
        answer came back) the model that answered, the tokens of every call, and the model's own
        confidence (averaged over option orders) if it reports one."""
        facts: dict[str, Any] = {
            "protocol": self.asker.protocol,
            "target": self.asker.target,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        }
        if len(outcomes) > 1:
            facts["option_orders"] = len(outcomes)
        responses = [o.response for o in outcomes if o.response is not None]
        if responses:
            facts.update(
                model=responses[0].model,
                input_tokens=sum(r.usage.input_tokens for r in responses),
                output_tokens=sum(r.usage.output_tokens for r in responses),
            )
        confidences = [o.asked.confidence for o in outcomes if o.asked is not None and o.asked.confidence is not None]
        if confidences and len(confidences) == len(outcomes):
            facts["confidence"] = math.fsum(confidences) / len(confidences)
        return facts
