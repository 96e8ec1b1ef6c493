"""The advisor gate: the executor serves every turn; the advisor reviews chosen turns.

Layer: ``routers`` — imports ``protocol`` only. Model calls go through the injected
:class:`~switchyard.protocol.call.ModelCall`, so the engine books them as router cost (advisor
tokens and USD, and the executor turns a REDO discards).

Per request:

1. **Budget spent** (``max_reviews`` reviews, or 3 failed consults, in this session) → the
   executor serves the turn directly: no buffering, streams as it is produced
   (source ``advisor:unreviewed``).
2. Otherwise the executor's turn is buffered and the **triggers** checked:
   ``no_tool_call`` — the turn calls no tool and the conversation holds at least
   ``gate_min_tool_results`` tool results; ``pattern`` — ``gate_trigger_pattern`` matches the
   turn's visible text; **stall** — ``gate_stall_turns > 0``, the conversation has that many
   assistant turns, and the stall review has not fired in this session yet. No trigger → the
   buffered turn is the answer (``advisor:no_trigger``).
3. A review is reserved from the session's budget (state store, before the call, so parallel
   requests cannot overspend) and the advisor is asked with a bounded transcript
   (:mod:`~switchyard.routers.advisor.review`).
4. ``APPROVE`` → the buffered turn is replayed unchanged (``advisor:approve``). ``REDO`` → it is
   discarded and the executor answers again with two messages appended: its discarded turn
   (as text) and the advisor's plan after ``redo_feedback_prefix``; that answer is made by the
   engine, streaming included (``advisor:redo``). An unparseable verdict or a failed advisor
   call refunds the review, counts a failed consult and approves (``advisor:fail_open``); with
   ``fail_open: false`` a failed call fails the request instead.

Streaming callers get the buffered turn as a stream once the review is done, as with the
escalation router.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, fields
from typing import Any, Literal

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.advisor.review import (
    DEFAULT_REDO_PREFIX,
    DEFAULT_REVIEWER_PROMPT,
    Verdict,
    parse_verdict,
    review_transcript,
)
from switchyard.routers.base import Decision, RouteContext

logger = logging.getLogger("switchyard.routers.advisor")

STATE_KEY = "advisor"
MAX_FAILED_CONSULTS = 3
"""Failed consults after which a session stops being reviewed (a broken advisor costs nothing more)."""

Trigger = Literal["no_tool_call", "pattern"]


@dataclass(slots=True, frozen=True)
class AdvisorConfig:
    """Everything an :class:`AdvisorRouter` needs (YAML keys as NVIDIA names them).

    Attributes:
        executor_target: Serves every turn.
        advisor_target: Reviews; never serves a turn unless the executor fails.
        gate_trigger: ``no_tool_call`` or ``pattern``.
        gate_trigger_pattern: Regex searched in the turn's visible text (``pattern`` only).
        max_reviews: Reviews per session.
        gate_stall_turns: Review once when the conversation reaches this many assistant turns
            (0: off).
        gate_min_tool_results: Tool results the conversation needs before ``no_tool_call``
            fires.
        advisor_max_tokens: Output cap of the advisor call.
        advisor_temperature: Sampling temperature of the advisor call.
        transcript_max_chars: Bound on the advisor's transcript.
        fail_open: A failed advisor call approves the turn (``False``: fails the request).
        reviewer_system_prompt: The advisor's instructions.
        redo_feedback_prefix: Put before the advisor's plan in the message to the executor.
    """

    executor_target: str
    advisor_target: str
    gate_trigger: Trigger = "no_tool_call"
    gate_trigger_pattern: str | None = None
    max_reviews: int = 1
    gate_stall_turns: int = 0
    gate_min_tool_results: int = 0
    advisor_max_tokens: int = 2048
    advisor_temperature: float | None = None
    transcript_max_chars: int = 200_000
    fail_open: bool = True
    reviewer_system_prompt: str = DEFAULT_REVIEWER_PROMPT
    redo_feedback_prefix: str = DEFAULT_REDO_PREFIX


@dataclass(slots=True)
class ReviewState:
    """What the gate remembers per session: reviews spent, failed consults, stall fired."""

    reviews: int = 0
    failed: int = 0
    stall_fired: bool = False

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> ReviewState:
        """Reads a stored state, ignoring unknown or mistyped keys."""
        state = cls()
        for f in fields(cls):
            value = (raw or {}).get(f.name)
            # exact types: a stored ``true`` is no review count (bool is an int subclass)
            if type(value) is type(getattr(state, f.name)):
                setattr(state, f.name, value)
        return state


class AdvisorRouter:
    """The advisor gate (see the module docstring).

    Args:
        config: The route's settings.
        ttl_s: Idle lifetime of a session's review state (``None``: the store's default).
    """

    def __init__(self, config: AdvisorConfig, *, ttl_s: float | None = None) -> None:
        self.config = config
        self.ttl_s = ttl_s
        self._pattern = re.compile(config.gate_trigger_pattern) if config.gate_trigger_pattern else None

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        cfg = self.config
        state = ReviewState.from_dict(await ctx.store.get(STATE_KEY))
        if state.reviews >= cfg.max_reviews or state.failed >= MAX_FAILED_CONSULTS:
            spent = "review budget spent" if state.reviews >= cfg.max_reviews else "advisor failing"
            return Decision(
                candidates=(cfg.executor_target, cfg.advisor_target),
                source="advisor:unreviewed",
                reason=f"{spent} ({state.reviews}/{cfg.max_reviews} reviews, {state.failed} failed); executor serves",
                details={"advisor": asdict(state)},
            )
        try:
            turn = await call(cfg.executor_target, request)
        except UpstreamError as exc:
            return Decision(
                candidates=(cfg.advisor_target, cfg.executor_target),
                source="advisor:executor_failed",
                reason=f"executor failed ({type(exc).__name__}); {cfg.advisor_target!r} serves this turn",
                details={"advisor": {**asdict(state), "executor_error": exc.message}},
            )
        trigger = self.trigger(request, turn, ctx, state)
        if trigger is None:
            return self._served(turn, "advisor:no_trigger", "no trigger fired; executor turn served", state)
        reserved = await self._reserve(ctx, trigger)
        if reserved is None:
            return self._served(turn, "advisor:unreviewed", "review budget spent by a parallel turn", state, trigger)
        return await self._review(request, ctx, call, turn, trigger, reserved)

    def trigger(self, request: ChatRequest, turn: ChatResponse, ctx: RouteContext, state: ReviewState) -> str | None:
        """Which trigger fires for ``turn`` (the configured one first, then stall), or ``None``."""
        cfg = self.config
        if cfg.gate_trigger == "no_tool_call":
            calls = bool(turn.tool_calls) or turn.stop_reason == "tool_use"
            results = sum(len(m.tool_results) for m in request.messages)
            if not calls and results >= cfg.gate_min_tool_results:
                return "no_tool_call"
        elif self._pattern is not None and self._pattern.search(turn.text):
            return "pattern"
        if cfg.gate_stall_turns > 0 and not state.stall_fired and ctx.session.turn_index >= cfg.gate_stall_turns:
            return "stall"
        return None

    async def _review(
        self,
        request: ChatRequest,
        ctx: RouteContext,
        call: ModelCall,
        turn: ChatResponse,
        trigger: str,
        state: ReviewState,
    ) -> Decision:
        cfg = self.config
        ask = ChatRequest(
            messages=[
                Message.of("system", cfg.reviewer_system_prompt),
                Message.of("user", review_transcript(request.messages, turn, cfg.transcript_max_chars)),
            ],
            max_tokens=cfg.advisor_max_tokens,
            temperature=cfg.advisor_temperature,
        )
        try:
            reply = await call(cfg.advisor_target, ask)
        except UpstreamError as exc:
            await self._refund(ctx, state)
            if not cfg.fail_open:
                raise
            logger.warning("advisor %r failed (%s); the turn passes unreviewed", cfg.advisor_target, exc.message)
            return self._served(turn, "advisor:fail_open", f"advisor call failed ({exc.message})", state, trigger)
        verdict = parse_verdict(reply)
        if verdict is None:
            await self._refund(ctx, state)
            return self._served(
                turn, "advisor:fail_open", "advisor verdict unparseable", state, trigger, reply=reply.text[:200]
            )
        if verdict.kind == "approve":
            return self._served(turn, "advisor:approve", f"advisor approved ({trigger})", state, trigger, verdict)
        return self._redo(request, turn, trigger, verdict, state)

    def _redo(
        self, request: ChatRequest, turn: ChatResponse, trigger: str, verdict: Verdict, state: ReviewState
    ) -> Decision:
        cfg = self.config
        discarded = turn.text.strip() or _calls_summary(turn)
        plan = verdict.plan or "Re-check your work against the task and state how you verified it."
        messages = [
            *request.messages,
            Message.of("assistant", discarded),
            Message.of("user", cfg.redo_feedback_prefix + plan),
        ]
        return Decision(
            candidates=(cfg.executor_target, cfg.advisor_target),
            request=request.model_copy(update={"messages": messages}),
            source="advisor:redo",
            reason=f"advisor sent the turn back ({trigger}); executor re-asked with the plan",
            details={
                "advisor": {
                    **asdict(state),
                    "trigger": trigger,
                    "verdict": "redo",
                    "plan": plan[:500],
                    "discarded_output_tokens": turn.usage.output_tokens,
                    "verdict_from_reasoning": verdict.from_reasoning,
                }
            },
        )

    def _served(
        self,
        turn: ChatResponse,
        source: str,
        why: str,
        state: ReviewState,
        trigger: str | None = None,
        verdict: Verdict | None = None,
        reply: str | None = None,
    ) -> Decision:
        info: dict[str, Any] = asdict(state)
        if trigger is not None:
            info["trigger"] = trigger
        if verdict is not None:
            info["verdict"] = verdict.kind
            info["verdict_from_reasoning"] = verdict.from_reasoning
        if reply is not None:
            info["unparsed_reply"] = reply
        return Decision(
            response=turn,
            answered_by=self.config.executor_target,
            source=source,
            reason=why,
            details={"advisor": info},
        )

    async def _reserve(self, ctx: RouteContext, trigger: str) -> ReviewState | None:
        """Takes one review from the session's budget before the advisor call, atomically (the
        store's ``update``), so parallel turns — on one replica or several — cannot overspend it;
        the state after the reservation, or ``None`` when the budget is spent."""
        granted = False

        def take(raw: dict[str, Any] | None) -> dict[str, Any]:
            nonlocal granted
            current = ReviewState.from_dict(raw)
            granted = current.reviews < self.config.max_reviews and current.failed < MAX_FAILED_CONSULTS
            if granted:
                current.reviews += 1
                current.stall_fired = current.stall_fired or trigger == "stall"
            return asdict(current)

        state = ReviewState.from_dict(await ctx.store.update(STATE_KEY, take, ttl_s=self.ttl_s))
        return state if granted else None

    async def _refund(self, ctx: RouteContext, state: ReviewState) -> None:
        """Gives a failed consult's review back and counts the failure (atomically, like
        :meth:`_reserve`); ``state`` is updated to what is stored."""

        def give_back(raw: dict[str, Any] | None) -> dict[str, Any]:
            current = ReviewState.from_dict(raw)
            current.reviews = max(0, current.reviews - 1)
            current.failed += 1
            return asdict(current)

        stored = ReviewState.from_dict(await ctx.store.update(STATE_KEY, give_back, ttl_s=self.ttl_s))
        state.reviews, state.failed, state.stall_fired = stored.reviews, stored.failed, stored.stall_fired


def _calls_summary(turn: ChatResponse) -> str:
    """A text stand-in for a discarded turn that only called tools (an empty assistant message
    is invalid for Anthropic upstreams, and a tool call without its result for every API)."""
    calls = turn.tool_calls
    if not calls:
        return "(empty turn)"
    return "(I was about to call: " + ", ".join(f"{c.name}({c.arguments[:200]})" for c in calls) + ")"
