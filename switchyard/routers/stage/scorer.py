"""From signals to a tier: the dimensions, the tanh scorer and the signal cascade.

Layer: ``routers`` — pure functions, no state, no I/O.

The scorer weighs two axes. Errors, stalling ("spinning": a deep turn with no reads, plans,
writes or edits among the recent calls) and circling ("exploring": a deep turn that only reads
or plans) push toward the capable tier; producing code (writes and edits among recent calls)
pushes toward the efficient tier. Each maxed signal is one unit of 0.1; the sum is squashed by
``tanh(5 · sum)`` into a signed score in (-1, 1) whose magnitude is the confidence::

    units   0.43  1      1.43   2      3
    conf    0.21  0.46   0.61   0.76   0.91

A hard error (0.7) is one unit. On the efficient side only production exists, so its confidence
never exceeds ``tanh(0.5) ≈ 0.462`` — which is why ``capable_first`` at a threshold of 0.5 could
never hand a turn to the efficient tier in NVIDIA's router (their issue #264). The fix here
measures efficient-side confidence against that ceiling when the picker starts capable.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache
from typing import Literal

from switchyard._dataclass import dataclass
from switchyard.routers.stage import tables as t
from switchyard.routers.stage.signals import Readings, Signals

Tier = Literal["capable", "efficient"]
Picker = Literal["efficient_first", "capable_first"]

ESCALATING_RULES = frozenset(("override", "persistent_errors", "turn_budget"))
"""Sources that send a turn to the capable tier on a rule, not on the scorer's confidence."""
STALL_DEPTH = 8
"""Below this many messages, not writing is normal exploration, not a stall."""
GAIN = 5.0
UNIT = 0.10
HARD_UNIT = t.HARD
"""Severity that counts as one full unit (a hard error)."""
EFFICIENT_CEILING = math.tanh(GAIN * UNIT)
"""The highest confidence the efficient side can reach: pure production, ≈ 0.462."""


def _f32(value: float) -> float:
    value32: float = struct.unpack("f", struct.pack("f", value))[0]
    return value32


_SEVERITY_F32 = {level: _f32(level) for level in (t.SOFT, t.HARD, t.CRITICAL)}
"""NVIDIA keeps severities in 32-bit floats; ``compat: nvidia`` does too, so confidences match
theirs to the last bit (a hard error alone scores 0.46211715056…, not 0.46211715726…)."""


@dataclass(slots=True, frozen=True)
class Dimensions:
    """The scorer's view of the signals.

    Attributes:
        severity: Windowed error severity, 0 to 1.
        spinning: 1 when a deep turn's recent calls neither produce nor investigate.
        exploring: 1 when a deep turn's recent calls only read or plan.
        production: Share of writes and edits among recent writes, edits, reads and plans.
    """

    severity: float
    spinning: float
    exploring: float
    production: float


@dataclass(slots=True, frozen=True)
class Verdict:
    """What the signals alone decide.

    Attributes:
        tier: The tier, or ``None`` when the signals are not conclusive (ambiguous).
        source: ``override``, ``tests_passed``, ``dimensions`` or ``ambiguous`` (or a run-level
            rule of :mod:`switchyard.routers.stage.runrules`: ``persistent_errors``, ``turn_budget``).
        score: The scorer's signed score in (-1, 1): positive favours capable.
        confidence: What was compared with the threshold (1.0 for the two hard rules).
        reason: One line for the decision record.
    """

    tier: Tier | None
    source: str
    score: float
    confidence: float
    reason: str

    @property
    def p_capable(self) -> float:
        """The verdict as a probability that the capable tier is needed: 1 for an override (or a
        run-level rule), 0 for passing tests, otherwise the scorer's ``(score + 1) / 2``."""
        if self.source in ESCALATING_RULES:
            return 1.0
        if self.source == "tests_passed":
            return 0.0
        return (self.score + 1.0) / 2.0


def dimensions(sig: Signals | Readings, *, f32: bool = False) -> Dimensions:
    """Projects signals onto the scorer's dimensions."""
    return _dimensions(
        sig.severity, sig.turn_depth >= STALL_DEPTH, sig.recent_production, sig.recent_reads + sig.recent_plans, f32
    )


def _dimensions(severity: float, deep: bool, production: int, investigating: int, f32: bool) -> Dimensions:
    stalled = deep and production == 0
    ops = production + investigating
    return Dimensions(
        severity=_SEVERITY_F32.get(severity, severity) if f32 else severity,
        spinning=1.0 if stalled and not investigating else 0.0,
        exploring=1.0 if stalled and investigating else 0.0,
        production=production / ops if ops else 0.0,
    )


def score(dims: Dimensions) -> float:
    """The signed score ``tanh(GAIN · UNIT · (severity/0.7 + spinning + exploring - production))``."""
    units = dims.severity / HARD_UNIT + dims.spinning + dims.exploring - dims.production
    return math.tanh(GAIN * (UNIT * units))


def pick(
    sig: Signals | Readings,
    *,
    picker: Picker,
    threshold: float,
    tests_shortcut: bool = True,
    ceiling_fix: bool = True,
    f32: bool = False,
) -> Verdict:
    """The signal cascade: override → tests passed → scorer above threshold → ambiguous.

    An override is a compacted context, a critical error, or the same hard failure twice in
    the recent window.

    Args:
        sig: The turn's signals (or their :class:`~switchyard.routers.stage.signals.Readings`).
        picker: Which tier an undecided turn defaults to (affects the ceiling fix only).
        threshold: Confidence the scorer must exceed to decide on its own.
        tests_shortcut: Drop to efficient when tests just passed after code changes and the
            window is clean (NVIDIA's 0.3.0 release no longer has this rule).
        ceiling_fix: Under ``capable_first``, measure efficient-side confidence as a share of
            the efficient ceiling, so the threshold is reachable from both sides.
        f32: Reproduce NVIDIA's 32-bit severities.
    """
    # Everything the cascade reads, reduced: the same key always gives the same verdict, and a
    # session sees few distinct keys, so verdicts are kept instead of formatted again each turn.
    return _pick(
        sig.severity,
        sig.errors,
        sig.repeated_failure,
        sig.tests_passed,
        sig.compacted,
        sig.turn_depth >= STALL_DEPTH,
        sig.recent_writes + sig.recent_edits,
        sig.recent_reads + sig.recent_plans,
        picker,
        threshold,
        tests_shortcut,
        ceiling_fix,
        f32,
    )


@lru_cache(maxsize=4096)
def _pick(
    severity: float,
    errors: tuple[str, ...],
    repeated: bool,
    tests_passed: bool,
    compacted: bool,
    deep: bool,
    production: int,
    investigating: int,
    picker: Picker,
    threshold: float,
    tests_shortcut: bool,
    ceiling_fix: bool,
    f32: bool,
) -> Verdict:
    dims = _dimensions(severity, deep, production, investigating, f32)
    s = score(dims)
    if compacted:
        return Verdict("capable", "override", s, 1.0, "context was compacted")
    if severity >= t.CRITICAL:
        return Verdict("capable", "override", s, 1.0, f"critical error ({', '.join(errors)})")
    if repeated:
        return Verdict("capable", "override", s, 1.0, f"the same failure again ({', '.join(errors)})")
    if tests_shortcut and tests_passed and production and severity <= 0:
        return Verdict("efficient", "tests_passed", s, 1.0, "tests passed after code changes, no recent errors")
    confidence = abs(s)
    if s < 0 and ceiling_fix and picker == "capable_first":
        confidence = min(1.0, confidence / EFFICIENT_CEILING)
    # Strictly above: a zero score (no evidence either way) never decides, even at threshold 0.
    if confidence > threshold:
        tier: Tier = "capable" if s > 0 else "efficient"
        return Verdict(tier, "dimensions", s, confidence, _explain(dims, s, threshold))
    return Verdict(None, "ambiguous", s, confidence, _explain(dims, s, threshold))


def _explain(dims: Dimensions, s: float, threshold: float) -> str:
    bits = []
    if dims.severity:
        bits.append(f"error severity {dims.severity:.1f}")
    if dims.spinning:
        bits.append("spinning")
    if dims.exploring:
        bits.append("exploring")
    if dims.production:
        bits.append(f"production {dims.production:.2f}")
    what = ", ".join(bits) or "no tool signal"
    return f"{what}: score {s:+.3f} vs threshold {threshold:g}"
