"""``type: stage_router`` — the route's YAML keys.

Layer: ``routers`` — imports ``protocol`` only.

Example:
    .. code-block:: yaml

        routes:
          agent:
            type: stage_router
            capable: frontier
            efficient: lightning
            picker: efficient_first
            confidence_threshold: 0.5
            hold_turns: {capable: 2}
            tool_semantics: {run_query: read, apply_migration: write}
            handoff_notes:
              escalation_note: "[router] The previous model was stuck; re-check the state first."
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchyard.routers.base import BuildContext, Router, RouterSpec, Tiers
from switchyard.routers.stage.judge import StageClassifierSpec
from switchyard.routers.stage.router import HandoffNotes, StageConfig, StageRouter
from switchyard.routers.stage.runrules import DEFAULT_IGNORED, FLAGGED, RunRules
from switchyard.routers.stage.tables import SUBSTRING_ERRORS, ToolKind

_KINDS = {kind.value: kind for kind in ToolKind}
ERROR_CLASSES = (
    *(name for name, _, _ in SUBSTRING_ERRORS),
    "tool_error",
    "failing_tests",
    "compile_error",
    "runtime_exception",
    "runtime_panic",
    "patch_error",
    FLAGGED,
)
"""Every error class the stage router's result reader names (``persistent_errors.ignore``)."""


class HandoffNotesSpec(BaseModel):
    """``handoff_notes`` — text appended to the request the new tier receives.

    A note goes at the end of the trailing user message (or in a new user message when the
    conversation ends on a tool result or an assistant turn), so the cached prefix stays intact.
    It is only in the request sent upstream, never in the caller's conversation.

    Attributes:
        escalation_note: For a turn that goes to the capable tier.
        deescalation_note: For a turn that goes back to the efficient tier.
        only_on_wrong_signal_escalation: Escalation note only when the signals escalated
            (``override``/``dimensions``), not when a classifier did.
        when: ``switch`` (default): only on the turn the tier changes, as far as the session
            tells; ``every_turn``: every turn the signals decide (NVIDIA's behaviour, and the
            default under ``compat: nvidia``).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    escalation_note: str | None = Field(default=None, min_length=1)
    deescalation_note: str | None = Field(default=None, min_length=1)
    only_on_wrong_signal_escalation: bool = True
    when: Literal["switch", "every_turn"] | None = None

    @model_validator(mode="after")
    def _some_note(self) -> HandoffNotesSpec:
        if self.escalation_note is None and self.deescalation_note is None:
            raise ValueError("set escalation_note, deescalation_note or both")
        return self


class HoldTurnsSpec(BaseModel):
    """``hold_turns: {capable: N, efficient: M}`` — per-tier hysteresis."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    capable: int = Field(default=0, ge=0, le=1000)
    efficient: int = Field(default=0, ge=0, le=1000)


class PersistentErrorsSpec(BaseModel):
    """``persistent_errors`` — escalate when the same kind of error keeps coming back in the run.

    Attributes:
        repeats: Tool results of the run one error class must appear in (2: the first failure
            of a kind is exploration, its return is trouble).
        ignore: Error classes that never count; by default ``timeout`` (an interactive
            command left running) and ``command_not_found`` (looking for a tool), which are
            normal while a terminal agent explores. ``[]`` counts everything.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    repeats: int = Field(default=2, ge=2, le=1000)
    ignore: list[str] = Field(
        default=list(DEFAULT_IGNORED), json_schema_extra={"items": {"type": "string", "enum": list(ERROR_CLASSES)}}
    )

    @field_validator("ignore")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in ERROR_CLASSES:
                raise ValueError(f"unknown error class {name!r}; use some of {', '.join(ERROR_CLASSES)}")
        return value


def run_rules(persistent_errors: PersistentErrorsSpec | None, turn_budget: int | None) -> RunRules | None:
    """The run rules a route's ``persistent_errors`` and ``turn_budget`` keys set (``None``: neither).

    Args:
        persistent_errors: The ``persistent_errors`` block, if any.
        turn_budget: The ``turn_budget`` key, if any.
    """
    if persistent_errors is None and turn_budget is None:
        return None
    return RunRules(
        repeats=None if persistent_errors is None else persistent_errors.repeats,
        ignore=frozenset(DEFAULT_IGNORED if persistent_errors is None else persistent_errors.ignore),
        turn_budget=turn_budget,
    )


class StageRouterSpec(RouterSpec):
    """``type: stage_router`` — picks the capable or efficient tier from the agent's tool activity.

    Attributes:
        capable: Target of the capable tier.
        efficient: Target of the efficient tier.
        picker: Tier an undecided turn goes to: ``efficient_first`` (default) or ``capable_first``.
        confidence_threshold: Confidence (0 to 1) the signal scorer must exceed to decide alone;
            0.5 is NVIDIA's calibrated value for ``efficient_first``.
        recent_turn_window: How many of the newest tool calls/results count as recent (default 3).
        tool_semantics: Tool name → ``write``, ``edit``, ``read``, ``plan``, ``shell`` (classify
            by its ``command`` argument) or ``other``; extends (and may override) the built-in table.
        handoff_notes: Notes for the model that takes over (see :class:`HandoffNotesSpec`).
        capable_system_prompt: System message put first when the capable tier serves the turn.
        efficient_system_prompt: System message put first when the efficient tier serves the turn.
        hold_turns: After switching tier, keep it for this many turns (an int for both tiers or
            ``{capable: N, efficient: M}``); needs a session id; overrides and passing tests
            still switch at once.
        classifier: The LLM capability judge for ambiguous turns (see
            :class:`~switchyard.routers.stage.judge.StageClassifierSpec`); without it ambiguous
            turns go to the picker's default tier.
        compat: ``none`` (default) or ``nvidia``: reproduce NVIDIA nemo-switchyard 0.3.0's
            decisions (no tests-passed rule, no capable_first fix, their turn depth and vocabulary).
        persistent_errors: Escalate when one error class comes back across the run (see
            :class:`PersistentErrorsSpec`); off by default.
        turn_budget: Escalate a run that has this many assistant turns and is still going;
            off by default.
    """

    kind = "stage_router"
    type: Literal["stage_router"]
    capable: str
    efficient: str
    picker: Literal["efficient_first", "capable_first"] = "efficient_first"
    confidence_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    recent_turn_window: int = Field(default=3, ge=1, le=1000)
    tool_semantics: dict[str, str] = Field(default_factory=dict)
    handoff_notes: HandoffNotesSpec | None = None
    capable_system_prompt: str | None = Field(default=None, min_length=1)
    efficient_system_prompt: str | None = Field(default=None, min_length=1)
    hold_turns: HoldTurnsSpec | None = None
    classifier: StageClassifierSpec | None = None
    compat: Literal["none", "nvidia"] = "none"
    persistent_errors: PersistentErrorsSpec | None = None
    turn_budget: int | None = Field(default=None, ge=1, le=100_000)

    @field_validator("tool_semantics")
    @classmethod
    def _semantics(cls, value: dict[str, str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for name, kind in value.items():
            if not name.strip():
                raise ValueError("tool names must not be empty")
            if kind not in _KINDS:
                raise ValueError(f"tool {name!r}: unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
            lower = name.lower()
            if lower in seen and seen[lower] != kind:
                raise ValueError(f"tool {name!r} is given twice (names are case-insensitive) with different kinds")
            seen[lower] = kind
        return value

    @field_validator("hold_turns", mode="before")
    @classmethod
    def _hold(cls, value: Any) -> Any:
        # One number holds both tiers.
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= 1000:
                raise ValueError(f"must be a number of turns from 0 to 1000 (got {value})")
            return {"capable": value, "efficient": value}
        return value

    @model_validator(mode="after")
    def _distinct(self) -> StageRouterSpec:
        if self.capable == self.efficient:
            raise ValueError("capable and efficient must name different targets")
        if self.compat == "nvidia" and (self.persistent_errors is not None or self.turn_budget is not None):
            # NVIDIA's router has no run-level rules: with them the decisions would not be theirs.
            raise ValueError("persistent_errors and turn_budget are not part of compat: nvidia")
        return self

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        """Whether the route keeps per-session state (hysteresis, notes only on a switch, or a
        judge verdict reused for its user turn)."""
        judge_state = self.classifier is not None and self.classifier.classify_trigger == "user_turn"
        return self.config().stateful or judge_state

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        return [] if self.classifier is None else [("classifier.target", self.classifier.target)]

    def tiers(self) -> Tiers:
        return Tiers(capable=self.capable, efficient=self.efficient)

    def config(self) -> StageConfig:
        """The router settings this block describes."""
        hold: dict[str, int] = {}
        if self.hold_turns is not None:
            hold = {"capable": self.hold_turns.capable, "efficient": self.hold_turns.efficient}
        notes = None
        if self.handoff_notes is not None:
            spec = self.handoff_notes
            default_when: Literal["switch", "every_turn"] = "every_turn" if self.compat == "nvidia" else "switch"
            notes = HandoffNotes(
                escalation=spec.escalation_note,
                deescalation=spec.deescalation_note,
                only_on_signal_escalation=spec.only_on_wrong_signal_escalation,
                when=spec.when or default_when,
            )
        return StageConfig(
            capable=self.capable,
            efficient=self.efficient,
            picker=self.picker,
            threshold=self.confidence_threshold,
            window=self.recent_turn_window,
            semantics={name.lower(): _KINDS[kind] for name, kind in self.tool_semantics.items()},
            notes=notes,
            capable_system_prompt=self.capable_system_prompt,
            efficient_system_prompt=self.efficient_system_prompt,
            hold=hold,
            compat=self.compat,
            run_rules=run_rules(self.persistent_errors, self.turn_budget),
        )

    def build(self, ctx: BuildContext) -> Router:
        classifier = None if self.classifier is None else self.classifier.build(ctx.config_dir)
        return StageRouter(self.config(), classifier)
