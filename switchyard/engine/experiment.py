"""Applying a route's ``experiment:`` block to one decision: shadow mode and the control group.

Layer: ``engine`` — imports ``routers`` (the block and the sticky draw) and ``protocol``.

One code path for every route: the router decides (or, for a control session, is not asked),
and :meth:`Experiment.apply` turns its decision into the one that serves, writing the arm on the
record. See :mod:`switchyard.routers.experiment` for the settings and ``docs/rollout.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from switchyard._dataclass import dataclass
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import Decision
from switchyard.routers.experiment import control_draw, mirror_draw


@dataclass(slots=True, frozen=True)
class Experiment:
    """A route's experiment, built from its ``experiment:`` block.

    Attributes:
        mode: ``route`` or ``shadow``.
        control_share: Share of sessions kept on the baseline (``route`` mode).
        baseline: The target that serves shadow and control requests.
        mirror_share: Share of shadow sessions mirrored to the router's choice (``engine/mirror.py``).
        mirror_concurrency: Most mirror calls of the route in flight at once.
    """

    mode: str
    control_share: float
    baseline: str
    mirror_share: float = 0.0
    mirror_concurrency: int = 4

    def mirrored(self, tenant: str | None, session_id: str | None, request_id: str) -> bool:
        """Whether a shadow request is mirrored: the sticky draw of its tenant and session id
        (of its request id without a session) is below ``mirror_share``."""
        if self.mode != "shadow" or self.mirror_share <= 0:
            return False
        if self.mirror_share >= 1:
            return True
        unit = session_id if session_id is not None else f"\x00{request_id}"
        return mirror_draw(tenant, unit) < self.mirror_share

    def arm(self, session: SessionInfo, request_id: str) -> str:
        """The arm of a request: ``shadow``; else ``control`` or ``routed`` by the sticky draw of
        its tenant and session id (a request without a session id draws on its request id)."""
        if self.mode == "shadow":
            return "shadow"
        if self.control_share <= 0:
            return "routed"
        unit = session.session_id
        if unit is None:
            draw = int.from_bytes(hashlib.sha256(request_id.encode()).digest()[:8], "big") / 2.0**64
        else:
            draw = control_draw(session.tenant, unit)
        return "control" if draw < self.control_share else "routed"

    async def decide(
        self, session: SessionInfo, record: DecisionRecord, route: Callable[[], Awaitable[Decision]]
    ) -> Decision:
        """The decision that serves the request: ``route()`` (the router's) for the routed and
        shadow arms, turned into the baseline for shadow (:meth:`apply`); the baseline without
        asking the router for the control arm (its sessions are never routed, so neither the
        router's state nor its judge calls touch them)."""
        arm = self.arm(session, record.request_id)
        if arm == "control":
            record.details["arm"] = arm
            record.source, record.reason = "control", "control group: kept on the baseline"
            return Decision(candidates=(self.baseline,), source="control", reason=record.reason)
        return self.apply(await route(), arm, record)

    def apply(self, decision: Decision, arm: str, record: DecisionRecord) -> Decision:
        """The decision that serves ``arm``, with ``details.arm`` (and for shadow requests
        ``details.would_select``, the router's own choice) written on ``record``.

        A shadow request serves the baseline with the caller's own request: a router's rewrite
        of it (an advisor's plan) and an answer it produced itself are recorded, not served.
        """
        record.details["arm"] = arm
        if arm != "shadow":
            return decision
        would = decision.answered_by or (decision.candidates[0] if decision.candidates else None)
        record.details["would_select"] = would
        if decision.response is not None:
            record.details["would_answer_itself"] = True
        return Decision(
            candidates=(self.baseline,),
            source=decision.source,
            score=decision.score,
            confidence=decision.confidence,
            reason=decision.reason,
            details=decision.details,
        )


__all__ = ["Experiment"]
