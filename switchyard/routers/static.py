"""Routers that need no signal: ``passthrough`` and weighted ``random``.

Layer: ``routers`` — imports ``protocol`` only.
"""

from __future__ import annotations

import random
import threading
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from switchyard.protocol.call import ModelCall
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec


class PassthroughRouter:
    """Always the one configured target."""

    def __init__(self, target: str) -> None:
        self._candidates = (target,)

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        return self._decision()

    def fixed(self) -> Decision | None:
        """The decision :meth:`route` gives every request, made without the context it does not
        read (the engine then builds none); ``None`` when a subclass routes by its own rules."""
        return self._decision() if type(self).route is PassthroughRouter.route else None

    def _decision(self) -> Decision:
        return Decision(candidates=self._candidates, source="passthrough", reason="single target")


class PassthroughSpec(RouterSpec):
    """``type: passthrough`` — every request goes to ``target``.

    Example:
        ``fast: {type: passthrough, target: efficient, fallbacks: [capable]}``
    """

    kind = "passthrough"
    type: Literal["passthrough"]
    target: str

    def target_refs(self) -> list[tuple[str, str]]:
        return [("target", self.target)]

    def build(self, ctx: BuildContext) -> Router:
        return PassthroughRouter(self.target)


class RandomRouter:
    """Picks a target at random by weight; the other targets follow as fallbacks in config order.

    A target of weight 0 is never picked first but still serves as a fallback. With a seed the
    sequence of picks is reproducible for a fixed order of requests.
    """

    def __init__(self, targets: list[str], weights: list[float], seed: int | None) -> None:
        self._targets = targets
        self._weights = weights
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._fallbacks = {t: tuple(x for x in targets if x != t) for t in targets}

    def pick(self) -> str:
        """Draws one target."""
        with self._lock:
            return self._rng.choices(self._targets, weights=self._weights, k=1)[0]

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        chosen = self.pick()
        return Decision(
            candidates=(chosen, *self._fallbacks[chosen]),
            source="random",
            reason=f"weighted draw over {len(self._targets)} targets",
        )


class RandomSpec(RouterSpec):
    """``type: random`` — a weighted draw per request.

    Attributes:
        targets: Candidate targets (unique), in fallback order.
        weights: Non-negative weights, one per target (default: all equal); at least one > 0.
        seed: Seed for a reproducible sequence.
    """

    kind = "random"
    type: Literal["random"]
    targets: list[str] = Field(min_length=1)
    weights: list[float] | None = None
    seed: int | None = None

    @field_validator("targets")
    @classmethod
    def _unique(cls, targets: list[str]) -> list[str]:
        if len(set(targets)) != len(targets):
            raise ValueError("targets must be unique")
        return targets

    @field_validator("weights")
    @classmethod
    def _weights(cls, weights: list[float] | None, info: ValidationInfo) -> list[float] | None:
        if weights is None:
            return None
        targets = info.data.get("targets") or []
        if len(weights) != len(targets):
            raise ValueError(f"has {len(weights)} entries but targets has {len(targets)}")
        if any(w < 0 or w != w or w == float("inf") for w in weights):
            raise ValueError("weights must be finite and >= 0")
        if not any(w > 0 for w in weights):
            raise ValueError("at least one weight must be > 0")
        return weights

    def target_refs(self) -> list[tuple[str, str]]:
        return [(f"targets[{i}]", t) for i, t in enumerate(self.targets)]

    def build(self, ctx: BuildContext) -> Router:
        weights = self.weights if self.weights is not None else [1.0] * len(self.targets)
        return RandomRouter(list(self.targets), [float(w) for w in weights], self.seed)
