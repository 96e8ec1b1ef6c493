"""The LLM classifier: a judge forecasts, before the work, which target should serve.

Layer: ``routers`` — imports ``protocol`` only.

Two modes share one flow (:class:`ClassifierRouter`): session affinity first (see
:mod:`switchyard.routers.affinity`), then the judge, then the fail-open default.

* ``capability`` — the judge estimates ``p_solve``, the probability that the weak (efficient)
  target completes the task, and names the capability rule that governs the task's crux. The
  route picks weak iff ``p_solve >= base_threshold + k * threshold_step`` with ``k`` = 0 for a
  ``supported`` boundary, 1 for ``uncertain``/``unmatched``, 2 for ``unsupported``. Any judge
  failure routes strong (source ``fail_open``).
* ``custom`` — the user's prompt and JSON Schema; a JSON Pointer picks a label out of the
  verdict and the label names the target. Anything unusable routes ``default_target``.

:class:`CapabilityJudge` is the reusable piece: other routers (the stage router's ambiguous
turns) call ``await judge.classify(request, ctx, call)`` for a verdict or ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.affinity import Affinity
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.jsonschema import resolve_pointer
from switchyard.routers.judge import JsonJudge, JudgeFailure, JudgeSettings, packaged_schema, packaged_text
from switchyard.routers.transcript import task_view

BOUNDARY_OF_PREFIX = {"SUP": "supported", "UNC": "uncertain", "LIM": "unsupported"}
STEPS = {"supported": 0, "uncertain": 1, "unmatched": 1, "unsupported": 2}
"""How many ``threshold_step`` s each capability boundary adds to ``base_threshold``."""

_EPSILON = 1e-9  # p_solve of exactly the threshold routes weak despite float noise


@dataclass(frozen=True, slots=True)
class CapabilityVerdict:
    """A validated capability forecast.

    Attributes:
        crux: The step that makes or breaks the task.
        primary_rule: Capability-card rule id (``SUP-1`` … ``LIM-2``) or ``none``.
        capability_boundary: ``supported``, ``uncertain``, ``unsupported`` or ``unmatched``.
        p_solve: Probability that the efficient model completes the task.
    """

    crux: str
    primary_rule: str
    capability_boundary: str
    p_solve: float

    @property
    def score(self) -> float:
        """Probability that the capable model is needed (``1 - p_solve``)."""
        return 1.0 - self.p_solve

    def as_dict(self) -> dict[str, Any]:
        """The verdict as recorded in decision details."""
        return {
            "crux": self.crux,
            "primary_rule": self.primary_rule,
            "capability_boundary": self.capability_boundary,
            "p_solve": self.p_solve,
        }


def boundary_problem(verdict: Mapping[str, Any]) -> str | None:
    """Checks that the rule and the boundary agree (``SUP-*`` ⇔ ``supported`` …)."""
    rule = str(verdict.get("primary_rule", ""))
    boundary = verdict.get("capability_boundary")
    expected = "unmatched" if rule == "none" else BOUNDARY_OF_PREFIX.get(rule.split("-")[0])
    if expected != boundary:
        return f"primary_rule {rule!r} implies capability_boundary {expected!r}, got {boundary!r}"
    return None


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The capability policy: weak iff ``p_solve >= base + k * step``.

    Attributes:
        base: Threshold for a ``supported`` boundary.
        step: Added once for ``uncertain``/``unmatched``, twice for ``unsupported``.
    """

    base: float
    step: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.base <= 1.0:
            raise ValueError("base_threshold must be within [0, 1]")
        if not 0.0 <= self.step < float("inf"):
            raise ValueError("threshold_step must be finite and >= 0")
        if self.base + 2 * self.step > 1.0 + _EPSILON:
            raise ValueError(
                f"base_threshold + 2 * threshold_step must be <= 1 (got {self.base + 2 * self.step:g}), "
                "or unsupported tasks could never route weak"
            )

    def threshold(self, boundary: str) -> float:
        """The ``p_solve`` a verdict with ``boundary`` needs to route weak."""
        return self.base + STEPS.get(boundary, 1) * self.step

    def prefers_weak(self, verdict: CapabilityVerdict) -> bool:
        """Whether the verdict clears its boundary's threshold."""
        return verdict.p_solve >= self.threshold(verdict.capability_boundary) - _EPSILON


class CapabilityJudge:
    """Asks a judge whether the efficient model can do the task (reusable by other routers).

    Args:
        settings: Judge target and call options.
        prompt: Replacement instructions (default: the packaged capability prompt).
        recent_turn_window: ``None`` shows the opening task and the latest user message;
            ``N`` adds the newest ``N`` messages (tool calls never split from their results).
        message_chars: Cap on each message shown to the judge.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        prompt: str | None = None,
        recent_turn_window: int | None = None,
        message_chars: int = 4000,
    ) -> None:
        self.judge = JsonJudge(
            settings,
            prompt=prompt or packaged_text("capability.md"),
            schema=packaged_schema("capability.json"),
            schema_name="capability_forecast",
            check=boundary_problem,
        )
        self.recent_turn_window = recent_turn_window
        self.message_chars = message_chars

    @property
    def target(self) -> str:
        """The judge target."""
        return self.judge.target

    def view(self, request: ChatRequest) -> str:
        """What the judge is shown of ``request``."""
        return task_view(request.messages, window=self.recent_turn_window, message_chars=self.message_chars)

    async def judge_request(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> CapabilityVerdict:
        """The verdict for ``request``.

        Raises:
            JudgeFailure: No usable verdict (timeout, upstream error, invalid or inconsistent).
        """
        value = await self.judge.ask(call, self.view(request))
        return CapabilityVerdict(
            crux=str(value["crux"]),
            primary_rule=str(value["primary_rule"]),
            capability_boundary=str(value["capability_boundary"]),
            p_solve=float(value["p_solve"]),
        )

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> CapabilityVerdict | None:
        """The verdict for ``request``, or ``None`` when the judge gave none (already logged)."""
        try:
            return await self.judge_request(request, ctx, call)
        except JudgeFailure:
            return None


class ClassifierRouter:
    """Shared flow: affinity → judge → fail-open default; subclasses implement :meth:`classify`."""

    def __init__(self, affinity: Affinity) -> None:
        self.affinity = affinity

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        kept = await self.affinity.reuse(request, ctx)
        if kept is not None:
            return kept
        decision = await self.classify(request, ctx, call)
        await self.affinity.remember(ctx, decision)
        return decision

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        """Asks the judge and turns its answer into a decision."""
        raise NotImplementedError


def _fail_open(target: str, failure: JudgeFailure, judge: str) -> Decision:
    return Decision(
        candidates=(target,),
        source="fail_open",
        reason=f"judge {judge!r} gave no verdict ({failure.reason}); {target!r} serves",
        details={"judge_failure": failure.reason, "judge_failure_detail": failure.detail},
        abstained=True,
    )


class CapabilityRouter(ClassifierRouter):
    """``llm_classifier`` in ``capability`` mode."""

    def __init__(self, judge: CapabilityJudge, thresholds: Thresholds, *, strong: str, weak: str, affinity: Affinity):
        super().__init__(affinity)
        self.judge = judge
        self.thresholds = thresholds
        self.strong = strong
        self.weak = weak

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        try:
            verdict = await self.judge.judge_request(request, ctx, call)
        except JudgeFailure as failure:
            return _fail_open(self.strong, failure, self.judge.target)
        threshold = self.thresholds.threshold(verdict.capability_boundary)
        weak = self.thresholds.prefers_weak(verdict)
        chosen = self.weak if weak else self.strong
        relation = ">=" if weak else "<"
        return Decision(
            candidates=(chosen,),
            source="llm-classifier",
            score=verdict.score,
            confidence=abs(verdict.p_solve - threshold),
            reason=(
                f"p_solve {verdict.p_solve:.2f} {relation} {threshold:.2f} "
                f"({verdict.capability_boundary}, {verdict.primary_rule})"
            ),
            details={"verdict": verdict.as_dict(), "threshold": threshold},
        )


class CustomRouter(ClassifierRouter):
    """``llm_classifier`` in ``custom`` mode: user schema, JSON Pointer selector, labelled targets.

    Args:
        judge: The judge with the user's prompt and schema.
        labels: Label → target name.
        selector: JSON Pointer into the verdict whose value is a label.
        default_target: Target when the judge fails or the value is no label.
        affinity: Trigger and state handling.
        message_chars: Cap on each message shown to the judge.
        recent_turn_window: As for the capability judge.
    """

    def __init__(
        self,
        judge: JsonJudge,
        *,
        labels: Mapping[str, str],
        selector: str,
        default_target: str,
        affinity: Affinity,
        recent_turn_window: int | None = None,
        message_chars: int = 4000,
    ) -> None:
        super().__init__(affinity)
        self.judge = judge
        self.labels = dict(labels)
        self.selector = selector
        self.default_target = default_target
        self.recent_turn_window = recent_turn_window
        self.message_chars = message_chars

    async def classify(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        view = task_view(request.messages, window=self.recent_turn_window, message_chars=self.message_chars)
        try:
            verdict = await self.judge.ask(call, view)
        except JudgeFailure as failure:
            return _fail_open(self.default_target, failure, self.judge.target)
        label = resolve_pointer(verdict, self.selector)
        if not isinstance(label, str) or label not in self.labels:
            return Decision(
                candidates=(self.default_target,),
                source="fail_open",
                reason=f"verdict value at {self.selector!r} is no configured label ({label!r}); "
                f"{self.default_target!r} serves",
                details={"verdict": verdict, "judge_failure": "unknown_label"},
                abstained=True,
            )
        target = self.labels[label]
        return Decision(
            candidates=(target,),
            source="llm-classifier",
            reason=f"judge chose label {label!r} → {target!r}",
            details={"verdict": verdict, "label": label},
        )
