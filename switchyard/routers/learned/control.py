"""Live operating-point control: a threshold that holds a capable share or a USD budget online.

Layer: ``routers`` — pure Python (no numpy: it runs on every decision).

A learned router's score distribution moves with the mix of requests (a threshold calibrated
on one benchmark mix sends 0 % of one benchmark and 100 % of another to the capable model). A
route that writes ``threshold: {target_capable_share: 0.3}`` (or ``{budget_usd_per_hour: 5}``)
instead of a number gets a :class:`ThresholdController` that re-derives the threshold from the
stream of scores:

1. **Quantile.** The threshold is the ``1 - s`` quantile of the last ``window`` scores, so a
   share ``s`` of recent traffic would have scored above it. A short window (default 64) follows
   an abrupt shift of the score distribution within a few dozen requests.
2. **Feedback.** ``s`` is the wanted share plus ``gain`` times the error the recent decisions
   made: in share mode ``target - realised share`` over the last ``feedback_window`` decisions;
   in budget mode the share change that would have put that window's estimated spend on budget.
   The realised share of a window that straddles a shift is pulled back to the target instead
   of carrying the overshoot.
3. **Bounds.** The threshold moves at most ``max_step`` per decision and stays in
   ``[min, max]``; until ``warmup`` scores are seen it is the warm start (``start``, else the
   checkpoint's calibrated threshold for the nearest share, else 0.5).

Budget mode turns the budget into a share per decision: with the recent request rate ``r``
(requests per hour, from the decisions' timestamps) and the mean estimated cost per call of each
tier, ``s = (budget / r - cost_efficient) / (cost_capable - cost_efficient)``.

Replicas share one controller through the route-wide state store (see
:mod:`switchyard.routers.learned.sync`); this module is the maths and keeps no I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from switchyard._dataclass import dataclass
from switchyard.protocol.intervals import quantile


class ThresholdControl(BaseModel):
    """The ``threshold:`` block of a learned route (a number there is a fixed threshold).

    Exactly one of ``target_capable_share`` and ``budget_usd_per_hour``.

    Attributes:
        target_capable_share: Hold this share of requests on the capable target.
        budget_usd_per_hour: Hold the estimated USD spend of the answer calls at this rate.
        start: Warm-start threshold (default: the checkpoint's calibrated threshold for the
            nearest share, else 0.5).
        window: Recent scores the quantile reads (short: it must follow a shift quickly).
        feedback_window: Recent decisions the feedback correction reads (default 100; budget
            mode 50).
        gain: How strongly the correction pulls the realised share (or spend) back (default 3;
            budget mode 5).
        max_step: The most the threshold moves per decision.
        min: Lowest threshold the controller may set.
        max: Highest threshold the controller may set.
        warmup: Scores to see before the quantile replaces the warm start.
        sync_every: Decisions between two writes of this replica's scores to the shared store.
        sync_s: Seconds between two writes at the latest (checked on the next decision).
        cost_per_call: Budget mode: fixed estimated USD per call, per tier (``capable``,
            ``efficient``); default: the targets' prices times the request's input tokens (chars / 4)
            and ``output_tokens``.
        output_tokens: Budget mode: output tokens assumed per answer call.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    target_capable_share: float | None = Field(default=None, gt=0.0, lt=1.0)
    budget_usd_per_hour: PositiveFloat | None = None
    start: float | None = Field(default=None, ge=0.0, le=1.0)
    window: int = Field(default=64, ge=8, le=4096)
    feedback_window: int = Field(default=100, ge=8, le=4096)
    gain: float = Field(default=3.0, ge=0.0, le=10.0)
    max_step: float = Field(default=0.05, gt=0.0, le=1.0)
    min: float = Field(default=0.0, ge=0.0, le=1.0)
    max: float = Field(default=1.0, ge=0.0, le=1.0)
    warmup: int = Field(default=16, ge=1)
    sync_every: PositiveInt = 32
    sync_s: PositiveFloat = 5.0
    cost_per_call: dict[str, float] | None = None
    output_tokens: PositiveInt = 256

    @model_validator(mode="before")
    @classmethod
    def _budget_defaults(cls, data: Any) -> Any:
        # Budget mode reacts faster (benchmarks/threshold_control.py: a 50-decision window at
        # gain 5 keeps every simulated hour within 5 % where 100 at gain 3 reached 6.7 %).
        if isinstance(data, dict) and data.get("budget_usd_per_hour") is not None:
            data = {"feedback_window": 50, "gain": 5.0, **data}
        return data

    @model_validator(mode="after")
    def _one_mode(self) -> ThresholdControl:
        modes = [k for k in ("target_capable_share", "budget_usd_per_hour") if getattr(self, k) is not None]
        if len(modes) != 1:
            raise ValueError(
                "give exactly one of 'target_capable_share' (e.g. 0.3) and 'budget_usd_per_hour' (e.g. 5.0)"
                + (f"; got both {modes}" if modes else "")
            )
        if self.min > self.max:
            raise ValueError(f"'min' ({self.min}) must not exceed 'max' ({self.max})")
        if self.start is not None and not self.min <= self.start <= self.max:
            raise ValueError(f"'start' ({self.start}) must lie within [min, max] = [{self.min}, {self.max}]")
        if self.cost_per_call is not None:
            if self.budget_usd_per_hour is None:
                raise ValueError("'cost_per_call' belongs to budget mode ('budget_usd_per_hour')")
            keys = set(self.cost_per_call)
            if keys != {"capable", "efficient"}:
                raise ValueError(f"'cost_per_call' needs exactly the keys capable and efficient, got {sorted(keys)}")
            if any(v < 0 or not math.isfinite(v) for v in self.cost_per_call.values()):
                raise ValueError("'cost_per_call' values must be finite and >= 0")
            if self.cost_per_call["capable"] <= self.cost_per_call["efficient"]:
                raise ValueError("'cost_per_call': capable must cost more than efficient")
        return self

    @property
    def mode(self) -> str:
        """``share`` or ``budget``."""
        return "share" if self.target_capable_share is not None else "budget"


def threshold_shape(value: Any, handler: ValidatorFunctionWrapHandler, expected: str) -> Any:
    """A ``threshold`` field's wrap validator: a block is validated as a :class:`ThresholdControl`,
    a number (or ``None``) by the field's own rules.

    Validating each shape on its own makes an error name the key that is wrong
    (``threshold.target_capable_share``) instead of listing every branch of the union.

    Args:
        value: The raw value.
        handler: Pydantic's handler for the field's declared type.
        expected: What the field accepts, for the error (``a gain in [-1, 1] or a block ...``).

    Raises:
        ValueError: ``value`` is neither a block nor a number (``True``/``False`` included).
    """
    if isinstance(value, dict):
        return ThresholdControl.model_validate(value)
    if value is None or (isinstance(value, int | float | ThresholdControl) and not isinstance(value, bool)):
        return handler(value)
    raise ValueError(f"threshold is {expected}, got {type(value).__name__}")


@dataclass(slots=True, frozen=True)
class Observation:
    """One decision as the controller remembers it.

    Attributes:
        ts: When (seconds; wall clock live, simulated offline).
        score: The router's score.
        capable: Whether it went to the capable target.
        cost_efficient: Estimated USD of the answer on the efficient target (budget mode).
        cost_capable: Estimated USD on the capable target (budget mode).
    """

    ts: float
    score: float
    capable: bool
    cost_efficient: float = 0.0
    cost_capable: float = 0.0

    def to_list(self) -> list[float]:
        """The compact JSON form the shared store holds."""
        return [
            round(self.ts, 3),
            round(self.score, 6),
            1.0 if self.capable else 0.0,
            round(self.cost_efficient, 9),
            round(self.cost_capable, 9),
        ]

    @classmethod
    def from_list(cls, row: Sequence[Any]) -> Observation:
        """Reads :meth:`to_list` back."""
        return cls(float(row[0]), float(row[1]), bool(row[2]), float(row[3]), float(row[4]))


def warm_start(spec: ThresholdControl, operating_points: Iterable[Mapping[str, Any]] | None) -> float:
    """The threshold before any score is seen: ``start``, else the checkpoint's calibrated
    threshold for the share nearest the target (budget mode: 30 %), else 0.5; within bounds."""
    if spec.start is not None:
        return spec.start
    want = spec.target_capable_share if spec.target_capable_share is not None else 0.3
    best: tuple[float, float] | None = None
    for point in operating_points or ():
        share, threshold = point.get("target_share"), point.get("threshold")
        if isinstance(share, int | float) and isinstance(threshold, int | float):
            gap = abs(float(share) - want)
            if best is None or gap < best[0]:
                best = (gap, float(threshold))
    value = 0.5 if best is None else best[1]
    return min(spec.max, max(spec.min, value))


class ThresholdController:
    """Adjusts a two-target route's threshold from the stream of its scores.

    Call :meth:`threshold` for the threshold of the next decision, then :meth:`observe` with
    what was decided. :meth:`merge` replaces the windows with the replicas' shared ones.

    Args:
        spec: The validated ``threshold:`` block.
        start: The warm-start threshold (:func:`warm_start`).
    """

    def __init__(self, spec: ThresholdControl, start: float) -> None:
        self.spec = spec
        self.start = start
        self._threshold = start
        self._scores: deque[float] = deque(maxlen=spec.window)
        self._recent: deque[Observation] = deque(maxlen=spec.feedback_window)
        self.seen = 0
        self.wanted_share = spec.target_capable_share if spec.target_capable_share is not None else 0.0
        self.correction = 0.0

    @property
    def keep(self) -> int:
        """Observations worth sharing: enough for both windows."""
        return max(self.spec.window, self.spec.feedback_window)

    def threshold(self) -> float:
        """The threshold the next decision uses."""
        return self._threshold

    def observe(self, obs: Observation) -> float:
        """Books one decision and moves the threshold for the next; returns the new threshold."""
        self._scores.append(obs.score)
        self._recent.append(obs)
        self.seen += 1
        return self._update()

    def merge(self, shared: Sequence[Observation], seen: int | None = None) -> float:
        """Replaces both windows with the shared stream (oldest first); returns the threshold."""
        self._scores.clear()
        self._recent.clear()
        for obs in shared[-self.keep :]:
            self._scores.append(obs.score)
            self._recent.append(obs)
        if seen is not None:
            self.seen = max(self.seen, seen)
        return self._update()

    def _share_goal(self) -> tuple[float, float]:
        """(wanted share before feedback, feedback correction)."""
        recent = self._recent
        if self.spec.target_capable_share is not None:
            target = self.spec.target_capable_share
            realised = sum(o.capable for o in recent) / len(recent)
            return target, target - realised
        assert self.spec.budget_usd_per_hour is not None
        budget = self.spec.budget_usd_per_hour
        n = len(recent)
        mean_eff = sum(o.cost_efficient for o in recent) / n
        mean_cap = sum(o.cost_capable for o in recent) / n
        delta = mean_cap - mean_eff
        span = recent[-1].ts - recent[0].ts
        if n < 2 or span <= 0 or delta <= 0:
            return self.wanted_share or 0.3, 0.0
        rate_h = (n - 1) / span * 3600.0  # requests per hour
        wanted = (budget / rate_h - mean_eff) / delta
        # spend of the window vs the budget of its time span, as the share change that fixes it
        spent = sum(o.cost_capable if o.capable else o.cost_efficient for o in recent) / n
        return wanted, (budget / rate_h - spent) / delta

    def _update(self) -> float:
        spec = self.spec
        if len(self._scores) < min(spec.warmup, spec.window):
            return self._threshold
        wanted, correction = self._share_goal()
        self.wanted_share = wanted
        self.correction = correction
        share = min(1.0, max(0.0, wanted + spec.gain * correction))
        if share <= 0.0:
            goal = spec.max
        elif share >= 1.0:
            goal = spec.min
        else:
            goal = quantile(sorted(self._scores), 1.0 - share)
        step = max(-spec.max_step, min(spec.max_step, goal - self._threshold))
        self._threshold = min(spec.max, max(spec.min, self._threshold + step))
        return self._threshold

    def realised_share(self) -> float | None:
        """Capable share of the feedback window (``None`` before any decision)."""
        if not self._recent:
            return None
        return sum(o.capable for o in self._recent) / len(self._recent)

    def state(self) -> dict[str, Any]:
        """What ``/v1/stats`` and the decision record show."""
        out: dict[str, Any] = {
            "mode": self.spec.mode,
            "threshold": round(self._threshold, 6),
            "start": round(self.start, 6),
            "seen": self.seen,
            "window": len(self._scores),
            "wanted_share": round(self.wanted_share, 6),
            "correction": round(self.correction, 6),
        }
        realised = self.realised_share()
        if realised is not None:
            out["realised_share"] = round(realised, 6)
        if self.spec.target_capable_share is not None:
            out["target_capable_share"] = self.spec.target_capable_share
        else:
            out["budget_usd_per_hour"] = self.spec.budget_usd_per_hour
        return out
