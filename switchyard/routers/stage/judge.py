"""The stage router's ``classifier`` block: the LLM capability judge for ambiguous turns.

Layer: ``routers`` — imports ``protocol`` only.

When the signals leave a turn undecided (no override, no passing tests, scorer below the
threshold), the stage router asks the same capability judge the ``llm_classifier`` route uses:
weak iff ``p_solve >= base_threshold + k * threshold_step``. By default the verdict is reused
for the rest of the user turn (tool continuations do not ask again), so a long tool loop costs
one judge call, not one per tool result.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import RouteContext
from switchyard.routers.classifier import CapabilityJudge, Thresholds
from switchyard.routers.judge import LEGACY_PLACEHOLDER, JudgeSettings, ResponseFormatType, read_prompt
from switchyard.routers.stage.classifier import TierVerdict
from switchyard.routers.stage.scorer import Tier
from switchyard.routers.stage.signals import Signals

_STATE_KEY = "stage_judge"


class StageClassifierSpec(BaseModel):
    """``routes.<name>.classifier`` of a stage router.

    Attributes:
        target: The judge's target (called, never routed to).
        base_threshold: ``p_solve`` the judge must give for the efficient tier (supported tasks).
        threshold_step: Added once for uncertain/unmatched boundaries, twice for unsupported.
        classify_trigger: ``user_turn`` (default: one verdict per user turn, reused for its tool
            continuations) or ``every_request`` (ask on every ambiguous turn).
        recent_turn_window: Messages shown beyond the task and the latest user message.
        message_chars: Cap on each message shown to the judge.
        prompt: Replacement judge instructions (inline).
        prompt_file: Replacement judge instructions from a file (relative to the config).
        response_format_type: ``json_schema`` or ``json_object``.
        max_output_tokens: Cap on the judge's answer.
        judge_timeout_s: Deadline of one judge call; past it the turn falls open.
        verdict_from_reasoning: Read the verdict from the reasoning text when content is empty.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    target: str
    base_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    threshold_step: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    classify_trigger: Literal["user_turn", "every_request"] = "user_turn"
    recent_turn_window: PositiveInt | None = None
    message_chars: PositiveInt = 4000
    prompt: str | None = Field(default=None, min_length=1)
    prompt_file: str | None = None
    response_format_type: ResponseFormatType = "json_schema"
    max_output_tokens: PositiveInt = 4096
    judge_timeout_s: PositiveFloat | None = 30.0
    verdict_from_reasoning: bool = False

    @model_validator(mode="after")
    def _check(self) -> StageClassifierSpec:
        if self.base_threshold + 2 * self.threshold_step > 1.0 + 1e-9:
            raise ValueError("base_threshold + 2 * threshold_step must be <= 1")
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("set either 'prompt' or 'prompt_file', not both")
        if self.prompt and LEGACY_PLACEHOLDER in self.prompt:
            raise ValueError(f"'prompt' contains {LEGACY_PLACEHOLDER}: remove it, the schema is supplied automatically")
        return self

    def build(self, config_dir: str | None) -> JudgeTurnClassifier:
        """The turn classifier this block describes."""
        settings = JudgeSettings(
            target=self.target,
            response_format_type=self.response_format_type,
            max_output_tokens=self.max_output_tokens,
            timeout_s=self.judge_timeout_s,
            verdict_from_reasoning=self.verdict_from_reasoning,
        )
        judge = CapabilityJudge(
            settings,
            prompt=read_prompt(self.prompt, self.prompt_file, config_dir),
            recent_turn_window=self.recent_turn_window,
            message_chars=self.message_chars,
        )
        thresholds = Thresholds(self.base_threshold, self.threshold_step)
        return JudgeTurnClassifier(judge, thresholds, per_user_turn=self.classify_trigger == "user_turn")


def _user_turn_key(request: ChatRequest) -> str:
    """Identifies the current user turn: the latest message a person wrote and its position."""
    for index in range(len(request.messages) - 1, -1, -1):
        msg = request.messages[index]
        if msg.role == "user" and msg.text.strip():
            digest = hashlib.blake2b(msg.text.encode(), digest_size=8).hexdigest()
            return f"{index}:{digest}"
    return "none"


class JudgeTurnClassifier:
    """A :class:`~switchyard.routers.stage.classifier.TurnClassifier` over the capability judge.

    Args:
        judge: The capability judge.
        thresholds: The ``p_solve`` policy.
        per_user_turn: Reuse a verdict for the rest of its user turn (needs a session id).
    """

    def __init__(self, judge: CapabilityJudge, thresholds: Thresholds, *, per_user_turn: bool = True) -> None:
        self.judge = judge
        self.thresholds = thresholds
        self.per_user_turn = per_user_turn

    async def classify(
        self, request: ChatRequest, signals: Signals, ctx: RouteContext, call: ModelCall
    ) -> TierVerdict | None:
        turn = _user_turn_key(request)
        tier: Tier
        if self.per_user_turn and ctx.session.key is not None:
            saved = await ctx.store.get(_STATE_KEY)
            if saved is not None and saved.get("turn") == turn and saved.get("tier") in ("capable", "efficient"):
                tier = "capable" if saved["tier"] == "capable" else "efficient"
                return TierVerdict(
                    tier,
                    confidence=saved.get("confidence"),
                    p_capable=saved.get("p_capable"),
                    reason="judge verdict of this user turn, reused",
                    details={"reused": True, **saved.get("details", {})},
                )
        verdict = await self.judge.classify(request, ctx, call)
        if verdict is None:
            return None  # the judge failed; the turn falls open to the picker's default tier
        weak = self.thresholds.prefers_weak(verdict)
        need = self.thresholds.threshold(verdict.capability_boundary)
        tier = "efficient" if weak else "capable"
        details = {
            "crux": verdict.crux,
            "primary_rule": verdict.primary_rule,
            "capability_boundary": verdict.capability_boundary,
            "p_solve": verdict.p_solve,
            "p_solve_needed": need,
        }
        result = TierVerdict(
            tier,
            confidence=verdict.p_solve if weak else 1.0 - verdict.p_solve,
            p_capable=1.0 - verdict.p_solve,
            reason=f"judge: p_solve {verdict.p_solve:.2f} vs {need:.2f} needed ({verdict.capability_boundary})",
            details=details,
        )
        if self.per_user_turn and ctx.session.key is not None:
            await ctx.store.set(
                _STATE_KEY,
                {
                    "turn": turn,
                    "tier": result.tier,
                    "confidence": result.confidence,
                    "p_capable": result.p_capable,
                    "details": details,
                },
            )
        return result
