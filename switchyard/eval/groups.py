"""Mixed datasets: outcome types kept apart, and metrics per benchmark.

Layer: ``eval``.

A dataset may mix outcome types: RouteLLM's file holds MMLU/GSM8K rows graded 0/1 next to
MT-Bench rows graded 1-10 by a GPT-4 judge. Averaging those raw numbers is meaningless (an
"always capable" quality of 0.854 where the capable model's accuracy is 0.810). The rule here:

* An item's **outcome type** is its ``outcome_type`` field when it has one, else the kind of its
  outcome (``binary`` for ``correct``/``resolved``, ``score`` for ``score``).
* When the evaluated items hold **one** outcome type, qualities stay in their own units.
* When they hold **several**, every score-typed group is rescaled to 0-1 by min-max over the
  values recorded for the mapped models in that group (MT-Bench's 1-10 become (s - lo)/(hi - lo));
  binary groups already are 0/1. A group whose values are all equal maps to 1.0. Within a group
  this is a positive linear map, so each group's APGR/CPT are unchanged; only the pooled
  numbers change, and the report says that it normalised.
* Whatever the types, metrics are also reported **per group** (``benchmark`` by default), each
  in the group's own units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.eval.dataset import EvalItem, Outcome, walk
from switchyard.eval.metrics import TwoTierReport, evaluate_decisions, evaluate_scores

GROUP_KEY = "benchmark"
"""The item field that names an item's group when ``--by`` is not given."""


def outcome_type(item: EvalItem, outcomes: Mapping[str, Outcome]) -> str:
    """The item's declared ``outcome_type``, else the kind of its first outcome."""
    declared = item.fields.get("outcome_type")
    if isinstance(declared, str) and declared:
        return declared
    for out in outcomes.values():
        return out.kind
    return "binary"


def group_of(item: EvalItem, key: str) -> str:
    """The item's group under field ``key`` (dotted for nested fields); ``-`` when absent."""
    found, value = walk(item.fields, key.split("."))
    return "-" if not found or value is None else str(value)


def normalise(types: Sequence[str], outcomes: Sequence[Mapping[str, Outcome]]) -> tuple[list[dict[str, Outcome]], bool]:
    """Outcomes rescaled per outcome type when more than one type is present.

    Args:
        types: Per-item outcome type.
        outcomes: Per-item outcome per target.

    Returns:
        ``(outcomes, normalised)``: new per-item dicts (the input when nothing changed) and
        whether a rescale happened.
    """
    kinds = set(types)
    if len(kinds) <= 1:
        return [dict(o) for o in outcomes], False
    ranges: dict[str, tuple[float, float]] = {}
    for kind, outs in zip(types, outcomes, strict=True):
        for out in outs.values():
            if out.kind != "score":
                continue
            lo, hi = ranges.get(kind, (out.quality, out.quality))
            ranges[kind] = (min(lo, out.quality), max(hi, out.quality))
    result: list[dict[str, Outcome]] = []
    for kind, outs in zip(types, outcomes, strict=True):
        fixed: dict[str, Outcome] = {}
        for target, out in outs.items():
            if out.kind == "score" and kind in ranges:
                lo, hi = ranges[kind]
                q = (out.quality - lo) / (hi - lo) if hi > lo else 1.0
                out = replace(out, quality=q)
            fixed[target] = out
        result.append(fixed)
    return result, bool(ranges)


@dataclass(slots=True)
class GroupReport:
    """Two-tier metrics of one group, in the group's own units.

    Attributes:
        name: The group's value (e.g. ``mmlu``).
        outcome_types: The outcome types in the group.
        report: The group's two-tier report.
    """

    name: str
    outcome_types: list[str]
    report: TwoTierReport

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"group": self.name, "outcome_types": self.outcome_types, **self.report.to_dict()}


def per_group(
    groups: Sequence[str],
    types: Sequence[str],
    scores: Sequence[float | None],
    picks: Sequence[bool],
    strong: Sequence[float],
    weak: Sequence[float],
    strong_cost: Sequence[float] | None,
    weak_cost: Sequence[float] | None,
) -> list[GroupReport]:
    """Two-tier metrics per group (only when there are at least two groups).

    All sequences are per decided item, in the same order; qualities in raw units.
    """
    names = list(dict.fromkeys(groups))
    if len(names) < 2:
        return []
    has_scores = any(s is not None for s in scores)
    out: list[GroupReport] = []
    for name in names:
        idx = [i for i, g in enumerate(groups) if g == name]
        sc = None if strong_cost is None else [strong_cost[i] for i in idx]
        wc = None if weak_cost is None else [weak_cost[i] for i in idx]
        s = [strong[i] for i in idx]
        w = [weak[i] for i in idx]
        p = [picks[i] for i in idx]
        if has_scores:
            report = evaluate_scores([scores[i] for i in idx], s, w, choose_strong=p, strong_cost=sc, weak_cost=wc)
        else:
            report = evaluate_decisions(p, s, w, strong_cost=sc, weak_cost=wc)
        out.append(GroupReport(name, sorted({types[i] for i in idx}), report))
    return out
