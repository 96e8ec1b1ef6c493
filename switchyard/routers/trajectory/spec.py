"""``type: trajectory`` — the config block of the learned trajectory router.

Layer: ``routers`` — imports ``protocol`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, ValidatorFunctionWrapHandler, field_validator

from switchyard.routers.base import BuildContext, Router, RouterSpec, Tiers
from switchyard.routers.learned.control import ThresholdControl, ThresholdController, threshold_shape
from switchyard.routers.learned.sync import SharedControl
from switchyard.routers.stage.spec import PersistentErrorsSpec, run_rules
from switchyard.routers.trajectory.model import load
from switchyard.routers.trajectory.router import Prices, TrajectoryConfig, TrajectoryRouter

DEFAULT_THRESHOLD = 0.15
"""The gain threshold when neither the route nor the checkpoint names one."""


class TrajectorySpec(RouterSpec):
    """``type: trajectory`` — switch a run to the capable target when the estimated gain is worth it.

    Attributes:
        capable: The capable target.
        efficient: The efficient target (serves every turn until the switch).
        checkpoint: A checkpoint file (relative to the config file); unset: the shipped one.
        threshold: A gain threshold in [-1, 1] (switch when the estimated gain — net of the
            switch price when ``value_per_task_usd`` is set — reaches it), or a block held online:
            ``{target_capable_share: 0.3}`` (the share of calls on the capable target) or
            ``{budget_usd_per_hour: 5}``. Unset: the checkpoint's recorded default for the
            route's score (with ``persistent_errors``: the one chosen with that rule on).
        value_per_task_usd: USD a resolved task is worth to you; set, every decision weighs the
            switch price (the capable model's cache write of the whole context and the price
            difference of a run as long again) against the gain.
        output_tokens: Output tokens a turn is assumed to produce (switch price).
        latch: Stay on the capable target for the rest of the session once switched (default).
        score: ``gain`` (default) or ``gain_per_cost``: the gain divided by the capable model's
            predicted cost on the task relative to a typical task (the checkpoint's cost head).
        persistent_errors: The stage router's run rule: switch when one error class comes back.
        turn_budget: The stage router's run rule: switch a run still going after this many turns.
    """

    kind: ClassVar[str] = "trajectory"
    stateful: ClassVar[bool] = True

    type: Literal["trajectory"]
    capable: str
    efficient: str
    checkpoint: str | None = None
    threshold: Annotated[float, Field(ge=-1.0, le=1.0)] | ThresholdControl | None = Field(
        default=None, union_mode="left_to_right"
    )
    value_per_task_usd: PositiveFloat | None = None
    output_tokens: PositiveInt = 400
    latch: bool = True
    score: Literal["gain", "gain_per_cost"] = "gain"
    persistent_errors: PersistentErrorsSpec | None = None
    turn_budget: int | None = Field(default=None, ge=1, le=100_000)

    @field_validator("threshold", mode="wrap")
    @classmethod
    def _threshold_shape(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return threshold_shape(value, handler, "a gain in [-1, 1] or a block such as {target_capable_share: 0.3}")

    def target_refs(self) -> list[tuple[str, str]]:
        return [("capable", self.capable), ("efficient", self.efficient)]

    def hashes_first_message(self) -> bool:
        # The latch is per session: an agent that sends no session id (Hermes, most SDK agents)
        # is kept on its run by a hash of its first user message, i.e. per task.
        return self.latch

    def tiers(self) -> Tiers:
        """The route's two tiers."""
        return Tiers(capable=self.capable, efficient=self.efficient)

    def threshold_key(self) -> str | None:
        """``threshold`` (capable iff ``Decision.score >= threshold`` on turns not yet latched);
        ``None`` for a controlled threshold."""
        return None if isinstance(self.threshold, ThresholdControl) else "threshold"

    def build(self, ctx: BuildContext) -> Router:
        path: Path | None = None
        if self.checkpoint is not None:
            path = Path(self.checkpoint)
            if not path.is_absolute() and ctx.config_dir:
                path = Path(ctx.config_dir) / path
        model = load(path)
        per_cost = self.score == "gain_per_cost"
        if per_cost and not model.cost:
            raise ValueError(f"score: gain_per_cost needs a checkpoint with a cost head; {model.path} has none")
        # the checkpoint's defaults were each chosen with the rule they serve (docs/trajectory-router.md)
        if per_cost:
            key = "default_threshold_per_cost"
        elif self.persistent_errors is not None:
            key = "default_threshold_with_rules"
        else:
            key = "default_threshold"
        recorded = model.training.get(key)
        fixed = float(recorded) if isinstance(recorded, int | float) else DEFAULT_THRESHOLD
        control = None
        threshold = self.threshold
        if isinstance(threshold, ThresholdControl):
            start = threshold.start if threshold.start is not None else min(threshold.max, max(threshold.min, fixed))
            control = SharedControl(ThresholdController(threshold, start))
        elif threshold is not None:
            fixed = float(threshold)

        def price(name: str) -> tuple[float, float, float, float]:
            info = ctx.targets.get(name)
            if info is None:
                return 0.0, 0.0, 0.0, 0.0
            p = info.price
            read = p.input_per_mtok if p.cached_input_per_mtok is None else p.cached_input_per_mtok
            write = p.input_per_mtok if p.cache_write_per_mtok is None else p.cache_write_per_mtok
            return p.input_per_mtok, read, write, p.output_per_mtok

        _, c_read, c_write, c_out = price(self.capable)
        _, e_read, _, e_out = price(self.efficient)
        config = TrajectoryConfig(
            capable=self.capable,
            efficient=self.efficient,
            threshold=fixed,
            value_per_task_usd=self.value_per_task_usd,
            output_tokens=self.output_tokens,
            latch=self.latch,
            run_rules=run_rules(self.persistent_errors, self.turn_budget),
            per_cost=per_cost,
        )
        return TrajectoryRouter(config, model, Prices(c_write, c_read, c_out, e_read, e_out), control)
