"""The escalation router: the efficient model works, a judge watches, trouble latches the session.

Layer: ``routers`` — imports ``protocol`` only. Model calls go through the injected
:class:`~switchyard.protocol.call.ModelCall`; the engine books them as routing overhead.

Per request of a session:

1. **Latched** sessions go straight to the strong (capable) target — no efficient call, no
   judge (source ``latched``). With ``recovery_confirmations > 0`` see *Recovery* below.
2. Otherwise the weak (efficient) target answers and its turn is buffered. If that call fails,
   the strong target serves this turn (nothing is latched) instead of failing the request.
3. The judge reviews the buffered turn in a condensed transcript
   (:func:`~switchyard.routers.transcript.condense`) and answers ``{"reason", "escalate"}``.
   ``escalate`` extends the session's streak, a clear verdict resets it, and a judge failure
   leaves it as it is (an outage never creates a latch; source ``fail_open``).
4. When the streak reaches ``confirmations``, the buffered turn is discarded, the strong target
   answers this very request (the engine makes that call, streaming included), and the session
   is latched. Otherwise the buffered efficient turn is the answer (source ``escalation``);
   streaming callers receive it as a stream once the verdict is in.

**Recovery** (``recovery_confirmations: N``, default 0 = a latch is permanent): each latched
turn first asks a *hand-back* judge whether the trouble is over and the remaining work is
routine, judging the conversation as it stands (the strong model's recent turns and their tool
results). The strong target still serves that turn. After ``N`` consecutive hand-back verdicts
the session de-latches and the same request runs the normal efficient-first flow, now on
probation: the next escalate verdict re-latches at once. ``max_recoveries`` bounds how often a
session may de-latch (default 1), so a session cannot oscillate between tiers.

Session state (``RouteContext.store``, key ``escalation``) is a small JSON dict; requests with
no session identity start from a fresh state every time, so with ``confirmations > 1`` they
never latch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.errors import ContextWindowExceededError, UpstreamError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.judge import JsonJudge, JudgeFailure
from switchyard.routers.transcript import condense

STATE_KEY = "escalation"


@dataclass(slots=True)
class EscalationState:
    """What an escalation route remembers about one session.

    Attributes:
        streak: Consecutive escalate verdicts.
        latched: Whether the strong target serves every turn.
        latched_turn: Turn index at which the latch happened.
        hand_back_streak: Consecutive hand-back verdicts while latched.
        recoveries: How often the session de-latched.
        probation: After a recovery: the next escalate verdict re-latches immediately.
        judged_turns: Turns the escalation judge reviewed.
    """

    streak: int = 0
    latched: bool = False
    latched_turn: int | None = None
    hand_back_streak: int = 0
    recoveries: int = 0
    probation: bool = False
    judged_turns: int = 0

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> EscalationState:
        """Reads a stored state, ignoring unknown or mistyped keys."""
        state = cls()
        if not raw:
            return state
        for f in fields(cls):
            value = raw.get(f.name)
            default = getattr(state, f.name)
            if f.name == "latched_turn":
                if isinstance(value, int) and not isinstance(value, bool):
                    state.latched_turn = value
            elif value is not None and type(value) is type(default):
                setattr(state, f.name, value)
        return state

    def to_dict(self) -> dict[str, Any]:
        """The state as stored."""
        return asdict(self)


class EscalationRouter:
    """``llm_classifier`` in ``escalation`` mode.

    Args:
        judge: The escalation judge (schema ``{"reason", "escalate"}``).
        strong: Capable target (serves latched sessions).
        weak: Efficient target (answers first).
        confirmations: Consecutive escalate verdicts that latch a session.
        recent_turn_window: Messages of recent history the judge sees.
        window_message_chars: Cap on each of those messages.
        transcript_max_chars: Cap on the whole transcript.
        hand_back: The recovery judge (schema ``{"reason", "hand_back"}``), when recovery is on.
        recovery_confirmations: Consecutive hand-back verdicts that de-latch (0: never).
        max_recoveries: How often one session may de-latch.
        ttl_s: Idle lifetime of the session state (``None``: the store's default).
    """

    def __init__(
        self,
        judge: JsonJudge,
        *,
        strong: str,
        weak: str,
        confirmations: int = 2,
        recent_turn_window: int = 28,
        window_message_chars: int = 500,
        transcript_max_chars: int = 18_000,
        hand_back: JsonJudge | None = None,
        recovery_confirmations: int = 0,
        max_recoveries: int = 1,
        ttl_s: float | None = None,
    ) -> None:
        if confirmations < 1:
            raise ValueError("confirmations must be >= 1")
        if recovery_confirmations and hand_back is None:
            raise ValueError("recovery_confirmations needs a hand-back judge")
        self.judge = judge
        self.strong = strong
        self.weak = weak
        self.confirmations = confirmations
        self.window = recent_turn_window
        self.message_chars = window_message_chars
        self.max_chars = transcript_max_chars
        self.hand_back = hand_back
        self.recovery_confirmations = recovery_confirmations
        self.max_recoveries = max_recoveries
        self.ttl_s = ttl_s

    def transcript(self, request: ChatRequest, review: Message | None) -> str:
        """The judge's view of ``request`` (plus the turn under review)."""
        return condense(
            request.messages,
            review=review,
            window=self.window,
            message_chars=self.message_chars,
            max_chars=self.max_chars,
        )

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        state = EscalationState.from_dict(await ctx.store.get(STATE_KEY))
        notes: dict[str, Any] = {}
        if state.latched:
            if self.hand_back is None or not self.recovery_confirmations or state.recoveries >= self.max_recoveries:
                await self._refresh(ctx)  # an active latched session stays latched
                return self._latched(state, "session is latched")
            recovered = await self._consider_recovery(request, ctx, call, state)
            if recovered is not None:
                return recovered
            notes["recovered"] = True
        try:
            answer = await call(self.weak, request)
        except UpstreamError as exc:
            await self._refresh(ctx)
            kind = "context window exceeded" if isinstance(exc, ContextWindowExceededError) else type(exc).__name__
            return Decision(
                candidates=(self.strong, self.weak),
                source="escalation",
                reason=f"efficient target failed ({kind}); {self.strong!r} serves this turn",
                details={"escalation": {**notes, "efficient_error": kind, "streak": state.streak}},
            )
        return await self._review(request, ctx, call, state, answer, notes)

    async def _review(
        self,
        request: ChatRequest,
        ctx: RouteContext,
        call: ModelCall,
        state: EscalationState,
        answer: ChatResponse,
        notes: dict[str, Any],
    ) -> Decision:
        review = Message(role="assistant", content=list(answer.content))
        try:
            verdict = await self.judge.ask(call, self.transcript(request, review))
        except JudgeFailure as failure:
            state = await self._reread(ctx)
            return Decision(
                response=answer,
                answered_by=self.weak,
                source="fail_open",
                score=state.streak / self.confirmations,
                reason=f"judge gave no verdict ({failure.reason}); efficient answer served, streak kept",
                details={
                    "escalation": {**notes, "streak": state.streak},
                    "judge_failure": failure.reason,
                    "judge_failure_detail": failure.detail,
                },
            )
        escalate = bool(verdict["escalate"])
        turn = ctx.session.turn_index

        def judged(current: EscalationState) -> None:
            # Applied to the state as stored *now* (another turn of the session may have moved it
            # while this one waited for its answer and verdict), atomically.
            if current.latched:
                return  # latched meanwhile: like a turn judged after the latch, nothing to count
            current.judged_turns += 1
            current.streak = current.streak + 1 if escalate else 0
            if escalate and (current.streak >= self.confirmations or current.probation):
                current.latched, current.latched_turn, current.probation = True, turn, False
                current.hand_back_streak = 0

        state = await self._apply(ctx, judged)
        info = {**notes, "escalate": escalate, "judge_reason": str(verdict.get("reason", ""))[:500]}
        if escalate and state.latched:
            return Decision(
                candidates=(self.strong, self.weak),
                source="escalation",
                score=1.0,
                reason=f"escalate confirmed ({state.streak}/{self.confirmations}); efficient answer discarded, "
                f"session latched to {self.strong!r}",
                details={"escalation": {**info, "streak": state.streak, "latched": True}},
            )
        return Decision(
            response=answer,
            answered_by=self.weak,
            source="escalation",
            score=min(1.0, state.streak / self.confirmations),
            reason=f"{'escalate' if escalate else 'continue'} verdict, streak {state.streak}/{self.confirmations}; "
            "efficient answer served",
            details={"escalation": {**info, "streak": state.streak}},
        )

    async def _consider_recovery(
        self, request: ChatRequest, ctx: RouteContext, call: ModelCall, state: EscalationState
    ) -> Decision | None:
        """Asks the hand-back judge; ``None`` when the session just de-latched."""
        assert self.hand_back is not None
        try:
            verdict = await self.hand_back.ask(call, self.transcript(request, None))
        except JudgeFailure as failure:
            state = await self._reread(ctx)
            decision = self._latched(state, f"hand-back judge gave no verdict ({failure.reason})")
            decision.details["judge_failure"] = failure.reason
            return decision
        hand_back = bool(verdict["hand_back"])

        def reviewed(current: EscalationState) -> None:
            if not current.latched:
                return  # another turn already de-latched the session
            current.hand_back_streak = current.hand_back_streak + 1 if hand_back else 0
            if current.hand_back_streak >= self.recovery_confirmations:
                current.latched, current.latched_turn = False, None
                current.streak = current.hand_back_streak = 0
                current.recoveries += 1
                current.probation = True

        state = await self._apply(ctx, reviewed)
        if state.latched:
            decision = self._latched(state, f"hand-back streak {state.hand_back_streak}/{self.recovery_confirmations}")
            decision.details["escalation"]["hand_back_reason"] = str(verdict.get("reason", ""))[:500]
            return decision
        return None

    def _latched(self, state: EscalationState, why: str) -> Decision:
        return Decision(
            candidates=(self.strong, self.weak),
            source="latched",
            score=1.0,
            reason=f"{why}; {self.strong!r} serves (latched at turn {state.latched_turn})",
            details={"escalation": {"latched": True, "hand_back_streak": state.hand_back_streak}},
        )

    async def _apply(self, ctx: RouteContext, change: Callable[[EscalationState], None]) -> EscalationState:
        """Applies ``change`` to the stored state in one atomic read-modify-write; the result.

        ``change`` may run more than once (the Redis store retries on a conflicting write), so
        it only mutates the state it is given.
        """

        def fn(raw: dict[str, Any] | None) -> dict[str, Any]:
            current = EscalationState.from_dict(raw)
            change(current)
            return current.to_dict()

        return EscalationState.from_dict(await ctx.store.update(STATE_KEY, fn, ttl_s=self.ttl_s))

    async def _refresh(self, ctx: RouteContext) -> None:
        """Restarts the stored state's idle TTL without reading or writing it (one ``PEXPIRE``
        on Redis), for turns that change nothing and already hold the state they need."""
        await ctx.store.touch(STATE_KEY, ttl_s=self.ttl_s)

    async def _reread(self, ctx: RouteContext) -> EscalationState:
        """Re-writes the stored state unchanged (refreshing its idle TTL); the state as stored now.

        For turns that report the state after waiting for a model: never a copy read earlier in
        the request, since another turn may have changed the session meanwhile.
        """
        return await self._apply(ctx, lambda _: None)
