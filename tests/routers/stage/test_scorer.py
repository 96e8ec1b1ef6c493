"""The tanh scorer, the signal cascade and the capable_first ceiling fix."""

from __future__ import annotations

import math

import pytest

from switchyard.routers.stage import Signals, dimensions, pick, score
from switchyard.routers.stage.scorer import EFFICIENT_CEILING, STALL_DEPTH

HARD_ERROR = Signals(severity=0.7, errors=("traceback",), turn_depth=3, recent_edits=1, recent_reads=1)
PRODUCING = Signals(turn_depth=5, recent_writes=2, recent_edits=1)
STALLED = Signals(turn_depth=STALL_DEPTH, recent_reads=0)


def units(**kw: float) -> float:
    """The confidence of ``units`` maxed signals."""
    return math.tanh(0.5 * sum(kw.values()))


@pytest.mark.parametrize(
    ("sig", "expected"),
    [
        (Signals(severity=0.3, turn_depth=2), 0.211),  # a soft error
        (Signals(severity=0.7, turn_depth=2), 0.462),  # a hard error
        (Signals(severity=0.3, turn_depth=9, recent_reads=2), 0.613),  # soft error while exploring
        (Signals(severity=0.7, turn_depth=9), 0.762),  # hard error while spinning
        (Signals(turn_depth=9, recent_plans=1), 0.462),  # exploring alone
        (PRODUCING, -0.462),  # pure production
        (Signals(turn_depth=4, recent_writes=1, recent_reads=2), -0.165),
    ],
)
def test_confidence_ladder(sig: Signals, expected: float) -> None:
    assert score(dimensions(sig)) == pytest.approx(expected, abs=5e-4)


def test_spinning_and_exploring_need_depth_and_exclude_each_other() -> None:
    shallow = dimensions(Signals(turn_depth=STALL_DEPTH - 1))
    assert shallow.spinning == shallow.exploring == 0
    spinning = dimensions(Signals(turn_depth=STALL_DEPTH))
    assert (spinning.spinning, spinning.exploring) == (1, 0)
    exploring = dimensions(Signals(turn_depth=STALL_DEPTH, recent_reads=1))
    assert (exploring.spinning, exploring.exploring) == (0, 1)
    producing = dimensions(Signals(turn_depth=20, recent_reads=1, recent_edits=1))
    assert (producing.spinning, producing.exploring, producing.production) == (0, 0, 0.5)


def test_overrides_win_over_everything() -> None:
    oom = Signals(severity=1.0, errors=("oom",), tests_passed=True, recent_edits=1)
    for threshold in (0.0, 0.5, 1.0):
        v = pick(oom, picker="efficient_first", threshold=threshold)
        assert (v.tier, v.source, v.confidence, v.p_capable) == ("capable", "override", 1.0, 1.0)
    assert pick(Signals(compacted=True), picker="efficient_first", threshold=0.9).source == "override"
    repeated = Signals(severity=0.7, repeated_failure=True, recent_edits=3)
    assert pick(repeated, picker="efficient_first", threshold=0.9).tier == "capable"


def test_tests_passed_after_changes_drops_to_efficient() -> None:
    settled = Signals(tests_passed=True, recent_edits=1, turn_depth=12)
    v = pick(settled, picker="capable_first", threshold=0.9)
    assert (v.tier, v.source, v.p_capable) == ("efficient", "tests_passed", 0.0)
    # Not without code changes, not with an error in the window, not under compat: nvidia.
    assert pick(Signals(tests_passed=True), picker="capable_first", threshold=0.9).tier is None
    dirty = Signals(tests_passed=True, recent_edits=1, severity=0.3)
    assert pick(dirty, picker="capable_first", threshold=0.9).source != "tests_passed"
    without = pick(settled, picker="capable_first", threshold=0.9, tests_shortcut=False, ceiling_fix=False)
    assert without.source == "ambiguous"


def test_threshold_must_be_exceeded() -> None:
    conf = score(dimensions(HARD_ERROR))
    assert conf == pytest.approx(0.245, abs=1e-3)  # a hard error, half the recent calls producing
    assert pick(HARD_ERROR, picker="efficient_first", threshold=conf).tier is None
    assert pick(HARD_ERROR, picker="efficient_first", threshold=math.nextafter(conf, 0)).tier == "capable"


def test_a_zero_score_never_decides_even_at_threshold_zero() -> None:
    v = pick(Signals(turn_depth=2), picker="efficient_first", threshold=0.0)
    assert (v.tier, v.source, v.score, v.p_capable) == (None, "ambiguous", 0.0, 0.5)
    # A hard error cancelled by full production: exactly zero in exact arithmetic...
    balanced = Signals(severity=0.7, turn_depth=4, recent_edits=2)
    assert pick(balanced, picker="capable_first", threshold=0.0).tier is None
    # ...but NVIDIA's 32-bit severity leaves -1.7e-9, which at threshold 0 decides "efficient".
    noisy = pick(balanced, picker="capable_first", threshold=0.0, f32=True, ceiling_fix=False)
    assert noisy.tier == "efficient" and -1e-8 < noisy.score < 0


def test_nvidia_confidences_are_reproduced_bit_for_bit() -> None:
    hard = Signals(severity=0.7, turn_depth=2)
    assert pick(hard, picker="efficient_first", threshold=0.0, f32=True).confidence == 0.46211715056344727
    assert pick(hard, picker="efficient_first", threshold=0.0).confidence == math.tanh(0.5)


@pytest.mark.parametrize("threshold", [0.5, 0.7])
def test_capable_first_ceiling_bug_and_fix(threshold: float) -> None:
    """NVIDIA issue #264: under capable_first the efficient side tops out at ~0.462, so at a
    threshold of 0.5 no turn is ever handed to the efficient model by the scorer."""
    assert score(dimensions(PRODUCING)) == pytest.approx(-EFFICIENT_CEILING)
    buggy = pick(PRODUCING, picker="capable_first", threshold=threshold, ceiling_fix=False)
    assert buggy.tier is None, "reproduces the bug: pure production cannot clear the threshold"
    fixed = pick(PRODUCING, picker="capable_first", threshold=threshold)
    assert (fixed.tier, fixed.source) == ("efficient", "dimensions")
    assert fixed.confidence == pytest.approx(1.0)


def test_ceiling_fix_scales_partial_production_and_keeps_capable_side() -> None:
    two_of_three = Signals(turn_depth=5, recent_edits=2, recent_reads=1)  # production 0.67
    v = pick(two_of_three, picker="capable_first", threshold=0.5)
    assert v.tier == "efficient" and v.confidence == pytest.approx(math.tanh(1 / 3) / EFFICIENT_CEILING)
    assert pick(two_of_three, picker="capable_first", threshold=0.7).tier is None
    # Errors still hold the turn on the capable side; efficient_first is untouched.
    mixed = Signals(severity=0.3, turn_depth=5, recent_edits=1)
    assert pick(mixed, picker="capable_first", threshold=0.7).tier is None
    assert pick(PRODUCING, picker="efficient_first", threshold=0.5).tier is None
    assert pick(HARD_ERROR, picker="capable_first", threshold=0.5).tier is None


def test_efficient_first_escalation_needs_corroboration_at_half() -> None:
    assert pick(Signals(severity=0.7, turn_depth=3), picker="efficient_first", threshold=0.5).tier is None
    stuck = Signals(severity=0.7, turn_depth=9, recent_reads=1)
    v = pick(stuck, picker="efficient_first", threshold=0.5)
    assert (v.tier, v.source) == ("capable", "dimensions")
    assert v.p_capable == pytest.approx((units(a=2) + 1) / 2)
    assert "exploring" in v.reason and "0.5" in v.reason
