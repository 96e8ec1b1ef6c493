"""Checking a decision model's distribution over labels, and turning it into ranked targets.

Layer: ``routers`` — imports ``protocol`` only. Pure functions, no I/O.

A verdict is usable only when it gives every configured label exactly once, each a finite
probability in ``[0, 1]``, the probabilities sum to 1 within the route's tolerance, and the label
the model *named* (RLCD's ``target``, System One's ``choice``) is one of the most probable ones.
That is NVIDIA Switchyard 0.4's ``rlcd`` rule, with two of its gaps closed: the named label must be
the argmax for System One answers too (a contradicting ``choice`` was accepted by several Jev
clients), and labels, not upstream model ids, are the options (two targets on the same model id
were indistinguishable). Anything else raises :class:`~switchyard.routers.judge.JudgeFailure`
with a specific reason, which the router records as it fails open.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.routers.judge import judge_failed

_TIE = 1e-9  # a named label within this of the top probability counts as the top


@dataclass(frozen=True, slots=True)
class Ranking:
    """A usable verdict, by label and by target.

    Attributes:
        labels: Label → probability, normalised to sum to 1, in config order.
        targets: Target → probability (the sum of its labels'), in config order.
        ranked: Targets, most probable first (ties keep config order).
        label: The most probable label of the first target.
    """

    labels: dict[str, float]
    targets: dict[str, float]
    ranked: tuple[str, ...]
    label: str


def check(
    pairs: Iterable[tuple[Any, Any]],
    labels: Sequence[str],
    *,
    named: Any,
    tolerance: float,
    judge: str,
) -> dict[str, float]:
    """The normalised distribution of a verdict's ``(label, probability)`` pairs.

    Args:
        pairs: The verdict's pairs, as answered (a list may repeat a label).
        labels: The configured labels, in config order.
        named: The label the model named as its pick (``None`` when the protocol has none).
        tolerance: How far the sum may be from 1 (the rest is normalised away).
        judge: The decision target's name (for the log line).

    Raises:
        JudgeFailure: ``duplicate_labels``, ``unknown_labels``, ``missing_labels``,
            ``bad_probability``, ``probability_sum`` or ``inconsistent``.
    """
    known = set(labels)
    seen: dict[str, float] = {}
    duplicates: list[str] = []
    unknown: list[str] = []
    bad: list[str] = []
    for raw_label, value in pairs:
        label = str(raw_label)
        if label in seen:
            duplicates.append(label)
        if label not in known:
            unknown.append(label)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            bad.append(f"{label}={value!r}")
            continue
        seen[label] = float(value)
    if duplicates:
        raise judge_failed(judge, "duplicate_labels", f"labels given more than once: {_names(duplicates)}")
    if unknown:
        raise judge_failed(judge, "unknown_labels", f"labels not configured: {_names(unknown)}")
    if bad:
        raise judge_failed(judge, "bad_probability", f"not a probability in [0, 1]: {', '.join(bad[:5])}")
    missing = [label for label in labels if label not in seen]
    if missing:
        raise judge_failed(judge, "missing_labels", f"no probability for {_names(missing)}")
    total = math.fsum(seen.values())
    if abs(total - 1.0) > tolerance:
        raise judge_failed(
            judge, "probability_sum", f"probabilities sum to {total:.4g}, not 1 (tolerance {tolerance:g})"
        )
    dist = {label: seen[label] / total for label in labels}
    if named is not None:
        if not isinstance(named, str) or named not in dist:
            raise judge_failed(judge, "inconsistent", f"named pick {named!r} is no configured label")
        top = max(dist.values())
        if dist[named] < top - _TIE:
            raise judge_failed(
                judge, "inconsistent", f"named pick {named!r} ({dist[named]:.3f}) is not the most probable ({top:.3f})"
            )
    return dist


def rank(dist: Mapping[str, float], targets_of: Mapping[str, str]) -> Ranking:
    """Adds up each target's labels and orders the targets, most probable first."""
    by_target: dict[str, float] = {}
    for label, p in dist.items():
        target = targets_of[label]
        by_target[target] = by_target.get(target, 0.0) + p
    order = {t: i for i, t in enumerate(by_target)}
    ranked = tuple(sorted(by_target, key=lambda t: (-by_target[t], order[t])))
    first = ranked[0]
    label = max((lb for lb in dist if targets_of[lb] == first), key=lambda lb: dist[lb])
    return Ranking(labels=dict(dist), targets=by_target, ranked=ranked, label=label)


def _names(labels: Sequence[str]) -> str:
    shown = ", ".join(repr(lb) for lb in labels[:5])
    return shown + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
