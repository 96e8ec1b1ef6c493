"""Config of ``type: decision_model`` routes (see docs/decision-model.md for every key).

Layer: ``routers`` — imports ``protocol`` only.

How the decision model is asked follows from its client: a ``system_one`` client gets a typed
choice; any other (OpenAI-compatible, vLLM, Anthropic, Responses, LiteLLM) gets the RLCD JSON
request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from switchyard.routers.affinity import AffinityKeys
from switchyard.routers.base import BuildContext, Router, RouterSpec
from switchyard.routers.decision.ask import Asker, RlcdAsker, SystemOneAsker
from switchyard.routers.decision.router import DecisionModelRouter
from switchyard.routers.judge import JudgeSettings, ResponseFormatType

_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_QUESTION = "Which option is the best fit to handle the latest request of this conversation?"


class LabelSpec(BaseModel):
    """One label in its long form.

    Attributes:
        target: The target the label routes to.
        description: What the label means, as the decision model is told (default: the target's
            name and model id).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    target: str
    description: str | None = Field(default=None, min_length=1)


class DecisionModelSpec(AffinityKeys, RouterSpec):
    """``type: decision_model`` — a decision model's probabilities choose among labelled targets.

    Attributes:
        decision_target: The decision model's target. It is called, never routed to.
        labels: Label → target name, or label → ``{target, description}``; at least two labels
            naming at least two different targets (several labels may share one).
        default_target: Serves when the decision model fails, answers malformed, or its best
            target is below ``min_probability``; the other targets follow it as fallbacks.
        min_probability: Probability the best target needs (sum over its labels), in [0, 1].
        question: What the decision model is asked (System One's ``instructions``).
        timeout_s: Deadline of one decision call; past it the route fails open.
        sum_tolerance: How far the probabilities may sum from 1 before the verdict is rejected.
        response_format_type: RLCD only: ``json_object`` (schema in the prompt) or ``json_schema``
            (structured output, e.g. vLLM's guided decoding).
        max_output_tokens: RLCD only: cap on the verdict's tokens.
        verdict_from_reasoning: RLCD only: read the verdict from the reasoning text when the
            content is empty.
        option_orders: Ask in this many option orders at once (1 to 3: as configured, reversed,
            rotated by one) and average the distributions, against a model's preference for an
            option's position; each order is one more call. Orders that repeat one already asked
            (two labels have only two) are left out.
    """

    kind = "decision_model"
    stateful: ClassVar[bool] = True

    type: Literal["decision_model"]
    decision_target: str
    labels: dict[str, str | LabelSpec] = Field(min_length=2)
    default_target: str
    min_probability: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    question: str = Field(default=DEFAULT_QUESTION, min_length=1)
    timeout_s: PositiveFloat | None = 10.0
    sum_tolerance: float = Field(default=0.02, ge=0.0, le=0.5, allow_inf_nan=False)
    response_format_type: ResponseFormatType = "json_object"
    max_output_tokens: PositiveInt = 512
    verdict_from_reasoning: bool = False
    option_orders: int = Field(default=1, ge=1, le=3)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str | LabelSpec]) -> dict[str, str | LabelSpec]:
        for label in value:
            if not _LABEL.match(label):
                # The rule every System One-style API accepts (OpenRouter's Decisions API
                # documents it); RLCD labels follow it too, so a route can change protocol.
                raise ValueError(f"label {label!r} must be 1 to 64 ASCII letters, digits, '_' or '-'")
        if len({_target(spec) for spec in value.values()}) < 2:
            raise ValueError("labels must name at least two different targets (one target needs no decision)")
        return value

    @model_validator(mode="after")
    def _decider_is_not_answering(self) -> Self:
        if self.decision_target == self.default_target:
            raise ValueError("decision_target must not be the default_target: the decision model is only asked")
        return self

    def label_targets(self) -> dict[str, str]:
        """Label → target name, in config order."""
        return {label: _target(spec) for label, spec in self.labels.items()}

    def target_refs(self) -> list[tuple[str, str]]:
        refs = [
            (f"labels.{label}" if isinstance(spec, str) else f"labels.{label}.target", _target(spec))
            for label, spec in self.labels.items()
        ]
        if self.default_target not in self.label_targets().values():
            refs.append(("default_target", self.default_target))
        return refs

    def auxiliary_refs(self) -> list[tuple[str, str]]:
        return [("decision_target", self.decision_target)]

    def options(self, ctx: BuildContext) -> dict[str, str]:
        """Label → meaning, as the decision model is told."""
        out: dict[str, str] = {}
        for label, spec in self.labels.items():
            if isinstance(spec, LabelSpec) and spec.description:
                out[label] = spec.description
            else:
                target = _target(spec)
                info = ctx.targets.get(target)
                out[label] = f"the model {info.model!r} (target {target!r})" if info else f"target {target!r}"
        return out

    def build(self, ctx: BuildContext) -> Router:
        settings = JudgeSettings(
            target=self.decision_target,
            response_format_type=self.response_format_type,
            max_output_tokens=self.max_output_tokens,
            timeout_s=self.timeout_s,
            verdict_from_reasoning=self.verdict_from_reasoning,
        )
        decider = ctx.targets.get(self.decision_target)
        kind: type[SystemOneAsker] | type[RlcdAsker] = (
            SystemOneAsker if decider is not None and decider.format == "system_one" else RlcdAsker
        )
        options = self.options(ctx)
        askers: list[Asker] = [
            kind(settings, self.question, order) for order in option_orders(options, self.option_orders)
        ]
        return DecisionModelRouter(
            askers,
            labels=self.label_targets(),
            default_target=self.default_target,
            min_probability=self.min_probability,
            sum_tolerance=self.sum_tolerance,
            affinity=self.affinity(),
            recent_turn_window=self.recent_turn_window,
            message_chars=self.message_chars,
            cheapest=cheapest(self.label_targets().values(), ctx),
        )


def cheapest(targets: Iterable[str], ctx: BuildContext) -> str | None:
    """The one target of ``targets`` with the lowest :attr:`Price.list_per_mtok
    <switchyard.protocol.targets.Price.list_per_mtok>`; ``None`` on a tie or an unknown target."""
    prices: dict[str, float] = {}
    for name in dict.fromkeys(targets):
        info = ctx.targets.get(name)
        if info is None:
            return None
        prices[name] = info.price.list_per_mtok
    low = min(prices.values())
    found = [name for name, p in prices.items() if p == low]
    return found[0] if len(found) == 1 else None


def option_orders(options: dict[str, str], count: int) -> list[dict[str, str]]:
    """Up to ``count`` distinct orders of ``options``: as given, reversed, rotated by one."""
    labels = list(options)
    candidates = [labels, labels[::-1], labels[1:] + labels[:1]]
    orders: list[list[str]] = []
    for order in candidates[:count]:
        if order not in orders:
            orders.append(order)
    return [{label: options[label] for label in order} for order in orders]


def _target(spec: str | LabelSpec) -> str:
    return spec if isinstance(spec, str) else spec.target
