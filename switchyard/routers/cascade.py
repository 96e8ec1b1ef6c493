"""``type: cascade`` — routers asked in order; the first decisive one wins, a default closes.

Layer: ``routers`` — imports ``protocol`` only.

Each stage is a route name (that route's router, built once) or an inline router spec. A stage
*abstains* when its decision has ``Decision.abstained`` set — what that means is each router's
own rule (docs/cascade.md has the table): the stage router without a decisive signal, a probe
whose score sits inside its ``abstain_band``, a judge without a usable verdict. An abstaining
stage's model calls are still paid (and booked as router cost); its decision is kept in the
record's trail. When every stage abstains the ``default`` target serves.

The decision source names the deciding stage, 1-based, with the stage router's type:
``cascade:2/prefill_probe``; ``cascade:default`` when the default closed. Each stage keeps its
session state in its own slot of the cascade's (``stage1.``, ``stage2.`` …).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec, Tiers


@dataclass(slots=True, frozen=True)
class Stage:
    """One built stage.

    Attributes:
        router: The stage's router.
        kind: Its router type (named in the decision source).
        name: The route it names, or ``None`` for an inline spec.
        scored: Whether its score is the cascade's (the stage ``switchyard calibrate`` tunes).
    """

    router: Router
    kind: str
    name: str | None = None
    scored: bool = False


class CascadeRouter:
    """Asks each stage in order; the first that does not abstain decides.

    Args:
        stages: The stages, in order.
        default: Target that serves when every stage abstains.
    """

    def __init__(self, stages: Sequence[Stage], default: str) -> None:
        self.stages = tuple(stages)
        self.default = default

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        trail: list[dict[str, Any]] = []
        for number, stage in enumerate(self.stages, start=1):
            prefix = f"stage{number}."
            shared = None if ctx.shared is None else NamespacedStore(ctx.shared, prefix)
            stage_ctx = dataclasses.replace(ctx, store=NamespacedStore(ctx.store, prefix), shared=shared)
            decision = await stage.router.route(request, stage_ctx, call)
            step: dict[str, Any] = {
                "stage": number,
                "type": stage.kind,
                "source": decision.source,
                "abstained": decision.abstained,
                "reason": decision.reason,
            }
            if stage.name is not None:
                step["route"] = stage.name
            if decision.score is not None:
                step["score"] = decision.score
            trail.append(step)
            if decision.abstained and decision.response is None:
                continue
            return self._decided(number, stage, decision, trail)
        return Decision(
            candidates=(self.default,),
            source="cascade:default",
            reason=f"all {len(self.stages)} stage(s) abstained; default {self.default!r} serves",
            details={"cascade": trail},
        )

    @staticmethod
    def _decided(number: int, stage: Stage, decision: Decision, trail: list[dict[str, Any]]) -> Decision:
        details = dict(decision.details)
        details["cascade"] = trail
        details["stage_source"] = decision.source
        return dataclasses.replace(
            decision,
            source=f"cascade:{number}/{stage.kind}",
            reason=f"stage {number} ({stage.kind}, {decision.source}): {decision.reason}",
            # Only the calibrated stage's score is the cascade's: calibration's contract is
            # "capable iff score >= threshold", which no other stage's score obeys.
            score=decision.score if stage.scored else None,
            details=details,
            abstained=False,
        )

    async def aclose(self) -> None:
        """Closes inline stages that hold connections (named routes are closed by the engine)."""
        for stage in self.stages:
            closer = getattr(stage.router, "aclose", None)
            if stage.name is None and closer is not None:
                await closer()


class CascadeSpec(RouterSpec):
    """``type: cascade`` — stages in order, each a route name or an inline router spec.

    Example::

        agent:
          type: cascade
          stages:
            - {type: stage_router, capable: capable, efficient: efficient}
            - probe                                   # the route named 'probe'
            - {type: llm_classifier, mode: capability, classifier_target: judge,
               strong_target: capable, weak_target: efficient, base_threshold: 0.5}
          default: capable

    Attributes:
        stages: Route names or inline router specs, asked in order.
        default: Target that serves when every stage abstains.
        calibrate: 1-based stage whose threshold ``switchyard calibrate`` sets and whose score
            the cascade reports (default: the only inline stage that has a threshold).
    """

    kind = "cascade"
    type: Literal["cascade"]
    stages: list[str | dict[str, Any]] = Field(min_length=1)
    default: str
    calibrate: int | None = Field(default=None, ge=1)

    @field_validator("stages", mode="before")
    @classmethod
    def _stage_shapes(cls, stages: Any) -> Any:
        if not isinstance(stages, list):
            return stages
        for i, stage in enumerate(stages):
            if isinstance(stage, str) and not stage.strip():
                raise ValueError(f"stages[{i}] is an empty route name")
            if not isinstance(stage, str | dict):
                raise ValueError(
                    f"stages[{i}] must be a route name or an inline router (a mapping with 'type'), got {stage!r}"
                )
        return stages

    # -- composition -----------------------------------------------------------------------

    def inline_blocks(self) -> list[tuple[str, Mapping[str, Any]]]:
        inline = [(f"stages[{i}]", s) for i, s in enumerate(self.stages) if isinstance(s, dict)]
        return [*inline, *super().inline_blocks()]

    def route_refs(self) -> list[tuple[str, str]]:
        return [(f"stages[{i}]", s) for i, s in enumerate(self.stages) if isinstance(s, str)]

    def stage_spec(self, index: int) -> RouterSpec:
        """The validated spec of stage ``index`` (0-based), inline or named."""
        return self.nested(f"stages[{index}]")

    def _inline_indexes(self) -> list[int]:
        return [i for i, s in enumerate(self.stages) if isinstance(s, dict)]

    def target_refs(self) -> list[tuple[str, str]]:
        refs: list[tuple[str, str]] = []
        for i in range(len(self.stages)):
            spec = self.stage_spec(i)
            prefix = f"stages[{i}]"
            refs += [(f"{prefix}.{path}" if isinstance(self.stages[i], dict) else prefix, t) for path, t in _all(spec)]
        refs.append(("default", self.default))
        return refs

    def checked_target_refs(self) -> list[tuple[str, str]]:
        named = {f"stages[{i}]" for i, s in enumerate(self.stages) if isinstance(s, str)}
        own = [(path, t) for path, t in self.target_refs() if path not in named]
        return [*own, *self._subagent_refs()]

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        return [
            (f"stages[{i}].{path}", t)
            for i in self._inline_indexes()
            for path, t in self.stage_spec(i).auxiliary_refs()
        ]

    def keeps_state(self) -> bool:
        return any(self.stage_spec(i).uses_session_state() for i in range(len(self.stages)))

    def hashes_first_message(self) -> bool:
        return any(self.stage_spec(i).hashes_first_message() for i in range(len(self.stages)))

    # -- offline evaluation ----------------------------------------------------------------

    def tiers(self) -> Tiers | None:
        """The stages' tiers when every stage that declares tiers agrees and the default is one
        of them."""
        found = {(t["capable"], t["efficient"]) for i in range(len(self.stages)) if (t := self.stage_spec(i).tiers())}
        if len(found) != 1:
            return None
        capable, efficient = found.pop()
        if self.default not in (capable, efficient):
            return None
        return Tiers(capable=capable, efficient=efficient)

    def scored_stage(self) -> int | None:
        """0-based index of the stage whose threshold calibration tunes, if there is one."""
        if self.calibrate is not None:
            index = self.calibrate - 1
            return index if index < len(self.stages) else None
        keyed = [i for i in self._inline_indexes() if self.stage_spec(i).threshold_key() is not None]
        return keyed[0] if len(keyed) == 1 else None

    def threshold_key(self) -> str | None:
        """``stages[i].<key>`` of the calibrated stage, when it is inline and has a threshold.

        Requests another stage decides carry no score: calibration holds them fixed.
        """
        index = self.scored_stage()
        if index is None or not isinstance(self.stages[index], dict):
            return None
        key = self.stage_spec(index).threshold_key()
        return None if key is None else f"stages[{index}].{key}"

    def threshold_for_score(self, score_threshold: float) -> float:
        index = self.scored_stage()
        assert index is not None
        return self.stage_spec(index).threshold_for_score(score_threshold)

    # -- building ----------------------------------------------------------------------------

    def build(self, ctx: BuildContext) -> Router:
        scored = self.scored_stage()
        stages: list[Stage] = []
        for i, raw in enumerate(self.stages):
            spec = self.stage_spec(i)
            if isinstance(raw, str):
                if ctx.router_of is None:
                    raise ValueError(f"stages[{i}] names route {raw!r}; build the cascade through switchyard.config")
                stages.append(Stage(ctx.router_of(raw), spec.type, name=raw, scored=i == scored))
            else:
                stages.append(Stage(spec.build(ctx), spec.type, scored=i == scored))
        return CascadeRouter(stages, self.default)


def _all(spec: RouterSpec) -> list[tuple[str, str]]:
    """A stage's routable target references, its sub-agent policy's included."""
    refs = list(spec.target_refs())
    sub = spec.subagent_spec()
    if sub is not None:
        refs += [(f"subagents.{p}", t) for p, t in _all(sub)]
    return refs
