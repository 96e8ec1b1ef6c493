"""The seam for a second opinion on turns the signals leave undecided.

Layer: ``routers`` — imports ``protocol`` only.

The stage router asks a :class:`TurnClassifier` only when its signals are ambiguous (no
override, no passing tests, scorer below threshold). Whatever implements it — an LLM judge
awaiting the injected model call, a local model, a rule — returns a :class:`TierVerdict`, or
``None`` to abstain; an exception counts as abstaining (the turn falls open to the picker's
default tier and the error goes into the decision record).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Protocol

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import RouteContext
from switchyard.routers.stage.scorer import Tier
from switchyard.routers.stage.signals import Signals


@dataclass(slots=True, frozen=True)
class TierVerdict:
    """A classifier's answer for one turn.

    Attributes:
        tier: ``capable`` or ``efficient``.
        confidence: The classifier's confidence in ``tier``, when it has one.
        p_capable: Its probability that the capable tier is needed, when it has one.
        reason: One line for the decision record.
        details: Anything worth recording (verdict fields, judge model).
    """

    tier: Tier
    confidence: float | None = None
    p_capable: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class TurnClassifier(Protocol):
    """Decides an ambiguous turn, or abstains."""

    async def classify(
        self, request: ChatRequest, signals: Signals, ctx: RouteContext, call: ModelCall
    ) -> TierVerdict | None:
        """Returns a verdict, or ``None`` to leave the turn to the picker's default tier.

        Args:
            request: The caller's request (must not be mutated).
            signals: What the stage router read off the conversation.
            ctx: The route context (session, targets, state store).
            call: The model call for judges; its cost is booked as routing overhead.
        """
        ...
