"""``type: advisor`` in the YAML config (NVIDIA's key names and defaults).

Layer: ``routers`` — imports ``protocol`` only.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from switchyard.routers.advisor.gate import AdvisorConfig, AdvisorRouter
from switchyard.routers.advisor.review import DEFAULT_REDO_PREFIX, DEFAULT_REVIEWER_PROMPT
from switchyard.routers.base import BuildContext, Router, RouterSpec, Tiers


class AdvisorSpec(RouterSpec):
    """``type: advisor`` — the executor serves; the advisor reviews at chosen moments.

    Example::

        agent:
          type: advisor
          executor_target: efficient
          advisor_target: capable
          gate_trigger: no_tool_call
          gate_min_tool_results: 3
          gate_stall_turns: 30
          max_reviews: 3

    Attributes:
        executor_target: Serves every turn.
        advisor_target: Reviews turns (and serves only if the executor fails).
        gate_trigger: ``no_tool_call`` (default) or ``pattern``.
        gate_trigger_pattern: Python regex searched in the turn's text; required with
            ``pattern``, refused otherwise.
        max_reviews: Reviews per session (default 1).
        gate_stall_turns: Review once when the conversation has this many assistant turns
            (default 0: off).
        gate_min_tool_results: Tool results needed before ``no_tool_call`` fires (default 0).
        advisor_max_tokens: Advisor output cap (default 2048).
        advisor_temperature: Advisor sampling temperature (default: the upstream's).
        transcript_max_chars: Bound on the advisor's transcript (default 200000, at least 256).
        fail_open: A failed advisor call passes the turn (default true).
        reviewer_system_prompt: Replaces the packaged reviewer instructions.
        redo_feedback_prefix: Text before the advisor's plan in the REDO message.
        state_ttl_s: Idle lifetime of a session's review budget (default: the store's).
    """

    kind = "advisor"
    stateful = True
    type: Literal["advisor"]
    executor_target: str
    advisor_target: str
    gate_trigger: Literal["no_tool_call", "pattern"] = "no_tool_call"
    gate_trigger_pattern: str | None = None
    max_reviews: PositiveInt = 1
    gate_stall_turns: NonNegativeInt = 0
    gate_min_tool_results: NonNegativeInt = 0
    advisor_max_tokens: PositiveInt = 2048
    advisor_temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    transcript_max_chars: int = Field(default=200_000, ge=256)
    fail_open: bool = True
    reviewer_system_prompt: str = Field(default=DEFAULT_REVIEWER_PROMPT, min_length=1)
    redo_feedback_prefix: str = DEFAULT_REDO_PREFIX
    state_ttl_s: float | None = Field(default=None, gt=0)

    @field_validator("gate_trigger_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        # A field check, so the error names routes.<name>.gate_trigger_pattern and its line.
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"gate_trigger_pattern is not a valid regex: {exc}") from None
        return value

    @model_validator(mode="after")
    def _pattern(self) -> AdvisorSpec:
        if self.gate_trigger == "pattern":
            if not self.gate_trigger_pattern:
                raise ValueError("gate_trigger 'pattern' needs gate_trigger_pattern (a regex)")
        elif self.gate_trigger_pattern is not None:
            raise ValueError("gate_trigger_pattern is only used with gate_trigger 'pattern'")
        if self.executor_target == self.advisor_target:
            raise ValueError("executor_target and advisor_target must differ")
        return self

    def target_refs(self) -> list[tuple[str, str]]:
        return [("executor_target", self.executor_target), ("advisor_target", self.advisor_target)]

    def hashes_first_message(self) -> bool:
        # Without a session id the budget and the stall marker are kept per task (a hash of the
        # first user message) rather than per request (unbounded reviews) or per instance.
        return True

    def tiers(self) -> Tiers | None:
        return Tiers(capable=self.advisor_target, efficient=self.executor_target)

    def build(self, ctx: BuildContext) -> Router:
        config = AdvisorConfig(
            executor_target=self.executor_target,
            advisor_target=self.advisor_target,
            gate_trigger=self.gate_trigger,
            gate_trigger_pattern=self.gate_trigger_pattern,
            max_reviews=self.max_reviews,
            gate_stall_turns=self.gate_stall_turns,
            gate_min_tool_results=self.gate_min_tool_results,
            advisor_max_tokens=self.advisor_max_tokens,
            advisor_temperature=self.advisor_temperature,
            transcript_max_chars=self.transcript_max_chars,
            fail_open=self.fail_open,
            reviewer_system_prompt=self.reviewer_system_prompt,
            redo_feedback_prefix=self.redo_feedback_prefix,
        )
        return AdvisorRouter(config, ttl_s=self.state_ttl_s)
