"""Graded outcomes → "good enough" labels, one documented rule per outcome type.

Layer: ``eval`` — pure Python.

Learned routers predict, per target, the probability that its answer is *good enough*. Datasets
record that in incompatible ways: 0/1 correctness (MMLU, GSM8K), the share of sampled answers
that were right (RouterDC, 0 to 1), a GPT-4 judge's 1-10 grade (MT-Bench), the probability that a
judge prefers the answer to a frontier reference's (AlpacaEval). Averaging those numbers means
nothing, so each is turned into a 0/1 label by a bar on its own scale — a score at or above the
bar is good enough — and only labels are mixed. The bar is chosen per outcome type (the row's
``outcome_type`` field; the dataset's PROVENANCE names it), never per row:

=================================== ===== ============================================================
outcome type                        bar   why
=================================== ===== ============================================================
``binary_correct`` / ``correct``    1     already a label
``score_0_1``                       0.5   RouterDC's share of correct samples: right more often than not
``gpt4_judge_score_1_to_10``        8     MT-Bench: "good" on the judge's scale (GPT-4 reaches it on
                                          90 % of the questions, Mixtral on 75 %)
``gpt4_turbo_judge_preference_0_1`` 0.5   AlpacaEval: the judge prefers the answer to GPT-4 Turbo's, or
                                          ties (the reference itself is 0.5: good enough by definition)
=================================== ===== ============================================================

A graded outcome of another type has no default: name its bar (``--good-enough TYPE=BAR``; the
type ``*`` sets the bar of every graded type without one, rows without ``outcome_type`` included).
Binary outcomes (``correct`` / ``resolved``) keep their value whatever the type says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

DEFAULT_BARS: dict[str, float] = {
    "score_0_1": 0.5,
    "gpt4_judge_score_1_to_10": 8.0,
    "gpt4_turbo_judge_preference_0_1": 0.5,
}
"""The bar per ``outcome_type`` (a score at or above it is good enough); see the module docstring."""


class GoodEnoughError(ValueError):
    """A graded outcome whose type has no bar (the message says how to give one)."""


class GoodEnough:
    """Turns an outcome into a good-enough label by its type's bar.

    Args:
        bars: Bars that replace or extend :data:`DEFAULT_BARS` (outcome type → bar).
    """

    def __init__(self, bars: Mapping[str, float] | None = None) -> None:
        self.bars = {**DEFAULT_BARS, **(bars or {})}
        for kind, bar in self.bars.items():
            if not math.isfinite(bar):
                raise GoodEnoughError(f"good-enough bar of {kind!r} must be a finite number, got {bar!r}")

    def label(self, quality: float, *, binary: bool, outcome_type: str | None) -> float:
        """1.0 when good enough, else 0.0; ``NaN`` stays ``NaN`` (unknown outcome).

        Args:
            quality: The recorded outcome (1.0/0.0 or a score).
            binary: Whether it came from ``correct``/``resolved`` (kept as it is).
            outcome_type: The row's ``outcome_type`` (``None`` when the row has none).

        Raises:
            GoodEnoughError: A score whose type has no bar.
        """
        if quality != quality or binary:
            return quality
        bar = self.bars.get(outcome_type or "", self.bars.get("*"))
        if bar is None:
            known = ", ".join(sorted(self.bars))
            raise GoodEnoughError(
                f"graded outcome of type {outcome_type!r} has no good-enough bar; give one with "
                f"--good-enough {outcome_type or '*'}=BAR (known types: {known}; '*' covers every other)"
            )
        return 1.0 if quality >= bar else 0.0

    def describe(self) -> dict[str, Any]:
        """The bars in use (stored with a checkpoint's training facts)."""
        return dict(self.bars)


def parse_bars(specs: list[str]) -> dict[str, float]:
    """``["mt_bench_type=7", …]`` → ``{type: bar}``.

    Raises:
        GoodEnoughError: A spec is not ``TYPE=NUMBER``.
    """
    out: dict[str, float] = {}
    for spec in specs:
        kind, sep, value = spec.partition("=")
        try:
            bar = float(value)
        except ValueError:
            bar = float("nan")
        if not sep or not kind.strip() or not math.isfinite(bar):
            raise GoodEnoughError(f"--good-enough takes OUTCOME_TYPE=NUMBER, got {spec!r}")
        out[kind.strip()] = bar
    return out


__all__ = ["DEFAULT_BARS", "GoodEnough", "GoodEnoughError", "parse_bars"]
