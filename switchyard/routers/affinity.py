"""Session affinity for classifier routes: when to ask the judge, when to keep its last answer.

Layer: ``routers`` — imports ``protocol`` only.

``classify_trigger`` decides how often a classifier route consults its judge:

* ``every_request`` — every model call, tool continuations included (no state kept);
* ``user_turn`` — when the newest message is one a person wrote; tool continuations of that
  turn keep the target the judge chose for it;
* ``new_session`` — once per session (and once per sub-agent: the key is
  :attr:`~switchyard.protocol.session.SessionInfo.key`).

Assignments live in ``RouteContext.store`` (JSON dicts with an idle TTL) — so they are bounded
and evicted least-recently-used by the memory store, and shared by replicas with a shared store,
instead of living in a per-process map that drops an arbitrary entry when full. Requests
without a session identity are classified on their own (the engine warns once); with
``message_hash_fallback`` the engine keys such sessions by a hash of the first user message.

A fail-open assignment (the judge failed, the strong target served) is *provisional*: tool
continuations keep it, but the next user turn asks the judge again, also under
``new_session`` — an outage must not pin a session to the expensive target for good.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

from switchyard._dataclass import dataclass
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.transcript import is_real_user

Trigger = Literal["every_request", "user_turn", "new_session"]
"""How often a classifier route consults its judge."""

STATE_KEY = "affinity"


def is_user_turn(request: ChatRequest) -> bool:
    """Whether the newest message is a person's (not tool results handed back)."""
    return bool(request.messages) and is_real_user(request.messages[-1])


@dataclass(slots=True)
class Affinity:
    """Keeps and reuses a route's per-session target assignment.

    Args:
        trigger: The route's ``classify_trigger``.
        ttl_s: Idle lifetime of an assignment (``None``: the store's default).
    """

    trigger: Trigger
    ttl_s: float | None = None

    async def reuse(self, request: ChatRequest, ctx: RouteContext) -> Decision | None:
        """The kept assignment as a decision, or ``None`` when the judge must be asked."""
        if self.trigger == "every_request" or ctx.session.key is None:
            return None
        state = await ctx.store.get(STATE_KEY)
        if not state or not isinstance(state.get("target"), str) or state["target"] not in ctx.targets:
            return None
        provisional = bool(state.get("provisional"))
        if is_user_turn(request) and (self.trigger == "user_turn" or provisional):
            return None
        # Restarting the idle TTL keeps an active session's assignment; ``touch`` changes no
        # value, so a judge verdict another turn stored meanwhile stays (and it is one round
        # trip on Redis, not a locked read-modify-write per request).
        await ctx.store.touch(STATE_KEY, ttl_s=self.ttl_s)
        score = state.get("score")
        return Decision(
            candidates=(state["target"],),
            source="affinity",
            score=float(score) if isinstance(score, int | float) else None,
            reason=f"kept {state['target']!r} from turn {state.get('turn', '?')} ({state.get('source', '?')})",
            details={"affinity": {"from_turn": state.get("turn"), "from_source": state.get("source")}},
            # A kept fail-open assignment is still no verdict: inside a cascade it abstains.
            abstained=provisional,
        )

    async def remember(self, ctx: RouteContext, decision: Decision) -> None:
        """Stores the judge's (or the fail-open) decision for later turns of the session."""
        if self.trigger == "every_request" or ctx.session.key is None or not decision.candidates:
            return
        state: dict[str, Any] = {
            "target": decision.candidates[0],
            "source": decision.source,
            "turn": ctx.session.turn_index,
            "provisional": decision.source == "fail_open" or decision.abstained,
        }
        if decision.score is not None:
            state["score"] = decision.score
        await ctx.store.set(STATE_KEY, state, ttl_s=self.ttl_s)


class AffinityKeys(BaseModel):
    """The config keys of a route that consults a model before the work (an ``llm_classifier``
    in capability or custom mode, a ``decision_model`` route): when it asks, and what of the
    conversation the model is shown.

    Attributes:
        classify_trigger: ``every_request``, ``user_turn`` or ``new_session``.
        message_hash_fallback: Key sessions without an id by a hash of their first user message.
        recent_turn_window: ``None`` shows the opening task and the latest user message; ``N``
            adds the newest ``N`` messages.
        message_chars: Cap on each message shown.
        state_ttl_s: Idle lifetime of the session's assignment (default: ``state.ttl_s``).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    classify_trigger: Trigger = "every_request"
    message_hash_fallback: bool = False
    recent_turn_window: int | None = Field(default=None, ge=0)
    message_chars: int = Field(default=4000, ge=200)
    state_ttl_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _hash_needs_affinity(self) -> Self:
        if self.message_hash_fallback and self.classify_trigger == "every_request":
            raise ValueError(
                "message_hash_fallback keys session affinity, which classify_trigger 'every_request' does not "
                "keep; use 'user_turn' or 'new_session'"
            )
        return self

    def keeps_state(self) -> bool:
        """Whether assignments are kept per session."""
        return self.classify_trigger != "every_request"

    def hashes_first_message(self) -> bool:
        """Whether sessions without an id are keyed by their first user message."""
        return self.message_hash_fallback

    def affinity(self) -> Affinity:
        """The route's trigger and affinity handling."""
        return Affinity(self.classify_trigger, self.state_ttl_s)
