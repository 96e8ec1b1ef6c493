"""Config of ``type: llm_classifier`` routes: ``mode: capability``, ``custom`` or ``escalation``.

Layer: ``routers`` — imports ``protocol`` only.

One route type, three modes with different keys. The registered :class:`LlmClassifierSpec`
reads ``mode`` and validates the block with the mode's own spec class, so a key that belongs to
another mode is reported as an unknown key at its YAML path. See ``docs/llm-classifier.md`` and
``docs/escalation.md`` for every key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self, cast

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from switchyard.routers.affinity import AffinityKeys
from switchyard.routers.base import BuildContext, Router, RouterSpec, SpecClass, Tiers
from switchyard.routers.classifier import CapabilityJudge, CapabilityRouter, CustomRouter, Thresholds
from switchyard.routers.escalation import EscalationRouter
from switchyard.routers.jsonschema import check_pointer, check_schema
from switchyard.routers.judge import (
    LEGACY_PLACEHOLDER,
    JsonJudge,
    JudgeSettings,
    ResponseFormatType,
    packaged_schema,
    packaged_text,
    read_prompt,
)

MODES = ("capability", "custom", "escalation")
_LEGACY_PLACEHOLDER = LEGACY_PLACEHOLDER


class LlmClassifierSpec(RouterSpec):
    """``type: llm_classifier`` — keys shared by every mode.

    Attributes:
        mode: ``capability`` (default), ``custom`` or ``escalation``.
        classifier_target: The judge's target. It is called, never routed to.
        response_format_type: ``json_schema`` (structured output) or ``json_object`` (schema in
            the prompt, validated locally).
        max_output_tokens: Cap on the judge's answer.
        judge_timeout_s: Deadline of one judge call; past it the route fails open.
        verdict_from_reasoning: Read the verdict from the reasoning text when the judge's
            content is empty (Nemotron, DeepSeek and other reasoning judges).
        prompt: Replacement judge instructions (inline text).
        prompt_file: Replacement judge instructions from a file (relative to the config).
        state_ttl_s: Idle lifetime of the session state (default: ``state.ttl_s``).
    """

    kind = "llm_classifier"
    stateful: ClassVar[bool] = True

    type: Literal["llm_classifier"]
    mode: str = "capability"
    classifier_target: str
    response_format_type: ResponseFormatType = "json_schema"
    max_output_tokens: PositiveInt = 4096
    judge_timeout_s: PositiveFloat | None = 30.0
    verdict_from_reasoning: bool = False
    prompt: str | None = Field(default=None, min_length=1)
    prompt_file: str | None = None
    state_ttl_s: PositiveFloat | None = None

    @classmethod
    def variant_for(cls, block: Mapping[str, Any]) -> SpecClass:
        mode = block.get("mode", "capability")
        return _MODE_SPECS.get(mode, cls) if isinstance(mode, str) else cls

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Validates ``obj`` with the spec class of its ``mode``."""
        if cls is not LlmClassifierSpec or not isinstance(obj, dict):
            return super().model_validate(obj, **kwargs)
        spec = cls.variant_for(obj)
        if spec is cls:
            mode = obj.get("mode")
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    {
                        "type": "literal_error",
                        "loc": ("mode",),
                        "input": mode,
                        "ctx": {"expected": ", ".join(repr(m) for m in MODES)},
                    }
                ],
            )
        return cast(Self, spec.model_validate(obj, **kwargs))

    @model_validator(mode="after")
    def _one_prompt(self) -> Self:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("set either 'prompt' or 'prompt_file', not both")
        if self.prompt and _LEGACY_PLACEHOLDER in self.prompt:
            raise ValueError(
                f"'prompt' contains {_LEGACY_PLACEHOLDER}: remove it, the schema is supplied automatically "
                "(response_format, or appended to the prompt in json_object mode)"
            )
        return self

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        return [("classifier_target", self.classifier_target)]

    def keeps_state(self) -> bool:
        return True

    def judge_settings(self) -> JudgeSettings:
        """How the judge is called."""
        return JudgeSettings(
            target=self.classifier_target,
            response_format_type=self.response_format_type,
            max_output_tokens=self.max_output_tokens,
            timeout_s=self.judge_timeout_s,
            verdict_from_reasoning=self.verdict_from_reasoning,
        )

    def custom_prompt(self, ctx: BuildContext) -> str | None:
        """The user's prompt (inline or read from ``prompt_file``), if any."""
        return read_prompt(self.prompt, self.prompt_file, ctx.config_dir)


class _TriggeredSpec(AffinityKeys, LlmClassifierSpec):
    """Keys of the modes that classify before the work (capability, custom): the judge's keys
    and the trigger and view keys of :class:`~switchyard.routers.affinity.AffinityKeys`."""


class CapabilitySpec(_TriggeredSpec):
    """``mode: capability`` — judge forecasts ``p_solve``; weak iff it clears the threshold.

    Attributes:
        strong_target: Capable target (also the fail-open target).
        weak_target: Efficient target.
        base_threshold: ``p_solve`` needed for weak when the boundary is ``supported``.
        threshold_step: Added once for ``uncertain``/``unmatched``, twice for ``unsupported``.
    """

    mode: Literal["capability"] = "capability"
    strong_target: str
    weak_target: str
    base_threshold: float = Field(ge=0.0, le=1.0)
    threshold_step: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)

    @field_validator("threshold_step")
    @classmethod
    def _policy(cls, step: float, info: ValidationInfo) -> float:
        base = info.data.get("base_threshold")
        if isinstance(base, float | int):
            Thresholds(float(base), step)  # raises ValueError stating the rule
        return step

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        if self.strong_target == self.weak_target:
            raise ValueError("strong_target and weak_target must differ")
        return self

    def target_refs(self) -> list[tuple[str, str]]:
        return [("strong_target", self.strong_target), ("weak_target", self.weak_target)]

    def tiers(self) -> Tiers:
        return {"capable": self.strong_target, "efficient": self.weak_target}

    def threshold_key(self) -> str | None:
        # With a boundary step the effective threshold differs per verdict, so no single key
        # maps onto "capable iff score >= t"; only the flat form is calibratable.
        return "base_threshold" if self.threshold_step == 0 else None

    def threshold_for_score(self, score_threshold: float) -> float:
        # score = 1 - p_solve and weak iff p_solve >= base, so capable iff score > 1 - base.
        return 1.0 - score_threshold

    def build(self, ctx: BuildContext) -> Router:
        judge = CapabilityJudge(
            self.judge_settings(),
            prompt=self.custom_prompt(ctx),
            recent_turn_window=self.recent_turn_window,
            message_chars=self.message_chars,
        )
        return CapabilityRouter(
            judge,
            Thresholds(self.base_threshold, self.threshold_step),
            strong=self.strong_target,
            weak=self.weak_target,
            affinity=self.affinity(),
        )


class CustomSpec(_TriggeredSpec):
    """``mode: custom`` — your prompt and schema; a JSON Pointer picks the label.

    Attributes:
        targets: Label → target name (at least two).
        default_target: Target when the judge fails or answers no known label.
        response_schema: JSON Schema of the verdict (a mapping, or a JSON string).
        selector: JSON Pointer to the label in the verdict, e.g. ``/route``.
    """

    mode: Literal["custom"]
    targets: dict[str, str] = Field(min_length=2)
    default_target: str
    response_schema: dict[str, Any]
    selector: str

    @field_validator("targets")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for label in value:
            if not label.strip() or label != label.strip():
                raise ValueError(f"label {label!r} must be non-empty without surrounding spaces")
        if len(set(value.values())) != len(value):
            raise ValueError("each label must name a different target")
        return value

    @field_validator("response_schema", mode="before")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON Schema object")
        check_schema(value)
        if value.get("type") != "object":
            raise ValueError("must describe a JSON object (type: object)")
        return value

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be a JSON Pointer into the verdict such as '/route' (got {value!r})")
        return check_pointer(value)

    @model_validator(mode="after")
    def _needs_prompt(self) -> Self:
        if self.prompt is None and self.prompt_file is None:
            raise ValueError("mode 'custom' needs 'prompt' or 'prompt_file': the judge's instructions")
        return self

    def target_refs(self) -> list[tuple[str, str]]:
        refs = [(f"targets.{label}", target) for label, target in self.targets.items()]
        if self.default_target not in self.targets.values():
            refs.append(("default_target", self.default_target))
        return refs

    def build(self, ctx: BuildContext) -> Router:
        prompt = self.custom_prompt(ctx)
        assert prompt is not None
        judge = JsonJudge(
            self.judge_settings(), prompt=prompt, schema=self.response_schema, schema_name="switchyard_classifier"
        )
        return CustomRouter(
            judge,
            labels=self.targets,
            selector=self.selector,
            default_target=self.default_target,
            affinity=self.affinity(),
            recent_turn_window=self.recent_turn_window,
            message_chars=self.message_chars,
        )


class EscalationSpec(LlmClassifierSpec):
    """``mode: escalation`` — efficient first, a judge reviews each turn, trouble latches.

    Attributes:
        strong_target: Capable target (serves latched sessions).
        weak_target: Efficient target (answers first).
        confirmations: Consecutive escalate verdicts that latch the session.
        recent_turn_window: Newest messages shown to the judge.
        window_message_chars: Cap on each of those messages.
        transcript_max_chars: Cap on the judge's whole transcript.
        recovery_confirmations: Consecutive hand-back verdicts that de-latch (0: never).
        max_recoveries: How often one session may de-latch.
    """

    mode: Literal["escalation"]
    strong_target: str
    weak_target: str
    confirmations: int = Field(default=2, ge=1)
    recent_turn_window: int = Field(default=28, ge=1)
    window_message_chars: int = Field(default=500, ge=50)
    transcript_max_chars: int = Field(default=18_000, ge=2_000)
    recovery_confirmations: int = Field(default=0, ge=0)
    max_recoveries: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        if self.strong_target == self.weak_target:
            raise ValueError("strong_target and weak_target must differ")
        return self

    def target_refs(self) -> list[tuple[str, str]]:
        return [("strong_target", self.strong_target), ("weak_target", self.weak_target)]

    def tiers(self) -> Tiers:
        return {"capable": self.strong_target, "efficient": self.weak_target}

    def build(self, ctx: BuildContext) -> Router:
        settings = self.judge_settings()
        judge = JsonJudge(
            settings,
            prompt=self.custom_prompt(ctx) or packaged_text("escalation.md"),
            schema=packaged_schema("escalation.json"),
            schema_name="escalation_verdict",
        )
        hand_back = None
        if self.recovery_confirmations:
            hand_back = JsonJudge(
                settings,
                prompt=packaged_text("hand_back.md"),
                schema=packaged_schema("hand_back.json"),
                schema_name="hand_back_verdict",
            )
        return EscalationRouter(
            judge,
            strong=self.strong_target,
            weak=self.weak_target,
            confirmations=self.confirmations,
            recent_turn_window=self.recent_turn_window,
            window_message_chars=self.window_message_chars,
            transcript_max_chars=self.transcript_max_chars,
            hand_back=hand_back,
            recovery_confirmations=self.recovery_confirmations,
            max_recoveries=self.max_recoveries,
            ttl_s=self.state_ttl_s,
        )


_MODE_SPECS: dict[str, type[LlmClassifierSpec]] = {
    "capability": CapabilitySpec,
    "custom": CustomSpec,
    "escalation": EscalationSpec,
}
