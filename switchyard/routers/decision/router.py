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

import time
from collections.abc import Mapping
from typing import Any

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


class DecisionModelRouter(ClassifierRouter):
    """Routes by a decision model's distribution over labelled targets.

    Args:
        asker: How the decision model is asked (RLCD JSON or a typed choice).
        labels: Label → target, in config order.
        default_target: Serves when there is no usable verdict or it is below the cutoff.
        min_probability: Probability the best target needs to be trusted.
        sum_tolerance: How far the probabilities may sum from 1.
        affinity: Trigger and session handling.
        recent_turn_window: As for the LLM classifier's view.
        message_chars: Cap on each message shown.
    """

    def __init__(
        self,
        asker: Asker,
        *,
        labels: Mapping[str, str],
        default_target: str,
        min_probability: float,
        sum_tolerance: float,
        affinity: Affinity,
        recent_turn_window: int | None = None,
        message_chars: int = 4000,
    ) -> None:
        super().__init__(affinity)
        self.asker = asker
        self.labels = dict(labels)
        self.default_target = default_target
        self.min_probability = min_probability
        self.sum_tolerance = sum_tolerance
        self.recent_turn_window = recent_turn_window
        self.message_chars = message_chars
        self.targets = tuple(dict.fromkeys([*self.labels.values(), default_target]))

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        view = task_view(request.messages, window=self.recent_turn_window, message_chars=self.message_chars)
        started = time.perf_counter()
        response: ChatResponse | None = None
        asked: Asked | None = None
        try:
            response = await self.asker.ask(call, view)
            asked = self.asker.read(response)
            dist = check(
                asked.pairs, list(self.labels), named=asked.named, tolerance=self.sum_tolerance, judge=self.asker.target
            )
        except JudgeFailure as failure:
            facts = self._call_facts(started, response, asked)
            return self._fail_open(failure.reason, failure.detail, facts, None)
        facts = self._call_facts(started, response, asked)
        ranking = rank(dist, self.labels)
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
        return {
            "probabilities": {t: round(p, 6) for t, p in ranking.targets.items()},
            "label_probabilities": {lb: round(p, 6) for lb, p in ranking.labels.items()},
            "min_probability": self.min_probability,
        }

    def _call_facts(self, started: float, response: ChatResponse | None, asked: Asked | None) -> dict[str, Any]:
        """The decision call as the record shows it: protocol, target, latency, and (when an
        answer came back) the model that answered, its tokens and its own confidence."""
        facts: dict[str, Any] = {
            "protocol": self.asker.protocol,
            "target": self.asker.target,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        }
        if response is not None:
            facts.update(
                model=response.model,
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            )
        if asked is not None and asked.confidence is not None:
            facts["confidence"] = asked.confidence
        return facts
