"""Routed vs control, and what shadow mode predicts: per route, with 95 % intervals.

Layer: ``engine`` — pure Python over decision-log lines (no numpy); the CLI and the dashboard
both read it.

Reads what ``switchyard serve --decision-log`` writes: decision records (their ``details.arm``
from a route's ``experiment:`` block, their cost, a shadow request's ``would_cost_usd`` and
``details.mirror``) and the feedback lines of ``POST /v1/feedback``. The unit is the
**session** (a request without a session id counts as its own session): arms are assigned per
session, so costs and outcomes are compared per session, never per request. The sessions and
their outcomes come from :func:`switchyard.engine.joined_log.join_log` — the join replay and
tune read too: keyed by tenant and session id, a report joining only its own tenant's sessions,
the latest (by ``ts``) counting.

Intervals are normal-approximation (Welch) 95 % intervals of a mean, or of a difference of two
independent means (:mod:`switchyard.protocol.intervals`); ``benchmarks/control_group.py`` checks
their coverage on simulated sessions. Shadow mode's prediction, once mirrored requests measured
what the chosen targets really spend, is corrected by them with a session-bootstrap interval
(:mod:`switchyard.engine.mirror_stats`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.joined_log import OUTCOMES as _OUTCOMES
from switchyard.engine.joined_log import join_log
from switchyard.engine.mirror_stats import corrected
from switchyard.protocol.intervals import Z95, difference_interval, mean_interval


@dataclass(slots=True)
class _Session:
    cost: float = 0.0
    requests: int = 0
    # Requests decided without their answer (``POST /v1/decision``, ``Switchyard.decide``): the
    # answer was bought elsewhere, so a session made only of them has no cost this log can see.
    decided_only: int = 0
    outcome: dict[str, float] = field(default_factory=dict)
    # Shadow sessions (engine/mirror_stats.py): the would-be cost, exact and priced parts; mirrors.
    would_same: float = 0.0
    would_other: float = 0.0
    mirror: float = 0.0
    pair_measured: float = 0.0
    pair_estimate: float = 0.0
    mirrored: int = 0
    mirror_failed: int = 0
    mirror_skipped: int = 0

    def add_shadow(self, obj: Mapping[str, Any], details: Mapping[str, Any]) -> None:
        """Adds one shadow record's would-be cost and mirror."""
        routing = _cost({"router_cost": obj.get("router_cost"), "feature_cost_usd": obj.get("feature_cost_usd")})
        experiment = _number(obj.get("experiment_cost_usd"))
        self.mirror += experiment
        would, chose = details.get("would_cost_usd"), details.get("would_select")
        if not _is_number(would):
            self.would_same += _cost(obj) - experiment  # unpriced (a failed request): what it cost
            return
        if not isinstance(chose, str) or chose == obj.get("selected"):
            self.would_same += _number(would) + routing
            return
        self.would_same += routing
        self.would_other += _number(would)
        mirror = details.get("mirror")
        if not isinstance(mirror, Mapping):
            return
        if _is_number(mirror.get("cost_usd")) and mirror.get("error") is None:
            self.mirrored += 1
            self.pair_measured += _number(mirror["cost_usd"])
            self.pair_estimate += _number(would)
        elif mirror.get("error") is not None:
            self.mirror_failed += 1
        elif mirror.get("skipped") is not None:
            self.mirror_skipped += 1


def _clipped(found: dict[str, Any], low: float, high: float) -> dict[str, Any]:
    """``found`` with its interval cut to [low, high]: a rate's interval never leaves [0, 1]
    (nor a difference of rates [-1, 1]), which the normal approximation does on few sessions."""
    if found.get("low") is not None:
        found["low"], found["high"] = max(found["low"], low), min(found["high"], high)
    return found


_BOUNDED = frozenset({"resolved", "score"})  # rates and scores in [0, 1]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any) -> float:
    return float(value) if _is_number(value) else 0.0


def _cost(obj: Mapping[str, Any]) -> float:
    """Everything a record spent: answer, routing (judges, features) and experiment (mirrors)."""
    router = obj.get("router_cost")
    routing = router.get("cost_usd", 0.0) if isinstance(router, Mapping) else 0.0
    parts = (obj.get("cost_usd"), routing, obj.get("feature_cost_usd"), obj.get("experiment_cost_usd"))
    return sum(_number(p) for p in parts)


def experiment_stats(lines: Iterable[Mapping[str, Any]], *, tenant: str | None = None) -> dict[str, Any]:
    """Per route and arm, from decision-log lines: sessions, cost per session, outcomes, and
    the comparisons (see the module docstring).

    Args:
        lines: The log's JSON objects in file order (decision records and feedback lines).
        tenant: Only this tenant's sessions (and reports).

    Returns:
        ``{route: {"arms": {arm: {...}}, "routed_vs_control": {...}, "shadow": {...}}}`` for the
        routes whose records carry an arm.
    """
    sessions: dict[tuple[str, str], dict[tuple[str | None, str], _Session]] = {}
    for joined in join_log(lines, tenant=tenant).sessions.values():
        for obj in joined.records:
            details = obj.get("details")
            arm = details.get("arm") if isinstance(details, Mapping) else None
            route = obj.get("route")
            if not isinstance(arm, str) or not isinstance(route, str):
                continue
            entry = sessions.setdefault((route, arm), {}).setdefault(joined.key, _Session())
            entry.cost += _cost(obj)
            if isinstance(details, Mapping) and details.get("decision_only"):
                entry.decided_only += 1
            if arm == "shadow" and isinstance(details, Mapping):
                entry.add_shadow(obj, details)
            entry.requests += 1
            entry.outcome = joined.outcome
    return {route: _route_view(sessions, route) for route in sorted({r for r, _ in sessions})}


def _route_view(
    sessions: Mapping[tuple[str, str], dict[tuple[str | None, str], _Session]], route: str
) -> dict[str, Any]:
    arms = {arm: list(found.values()) for (r, arm), found in sessions.items() if r == route}
    view: dict[str, Any] = {"arms": {arm: _arm_view(entries) for arm, entries in sorted(arms.items())}}
    routed, control = arms.get("routed", []), arms.get("control", [])
    if routed and control:
        comparison: dict[str, Any] = {
            "cost_per_session": difference_interval(_costs_seen(routed), _costs_seen(control))
        }
        for name in _OUTCOMES:
            a = [s.outcome[name] for s in routed if name in s.outcome]
            b = [s.outcome[name] for s in control if name in s.outcome]
            if a or b:
                found = difference_interval(a, b)
                comparison[name] = _clipped(found, -1.0, 1.0) if name in _BOUNDED else found
        view["routed_vs_control"] = comparison
    shadow = arms.get("shadow", [])
    if shadow:
        view["shadow"] = _shadow_view(shadow)
    return view


def _shadow_view(shadow: list[_Session]) -> dict[str, Any]:
    """Shadow's predicted saving: corrected by the mirrors when any answered (``basis:
    mirrors``), else priced at equal verbosity (``basis: equal_verbosity``), which is also
    always given on its own."""
    saved = [s.cost - s.mirror - s.would_same - s.would_other for s in shadow]
    served = sum(s.cost - s.mirror for s in shadow)
    equal = {
        "predicted_saving_per_session": mean_interval(saved),
        "predicted_saved_share": (sum(saved) / served) if served > 0 else None,
    }
    mirrors = {
        "mirror_cost_usd": sum(s.mirror for s in shadow),
        "mirrored_requests": sum(s.mirrored for s in shadow),
        "mirror_failures": sum(s.mirror_failed for s in shadow),
        "mirror_skipped": sum(s.mirror_skipped for s in shadow),
    }
    fixed = corrected(shadow)
    if fixed is None:
        return {**equal, "basis": "equal_verbosity", "mirrored_sessions": 0, **mirrors, "equal_verbosity": equal}
    return {**fixed, "basis": "mirrors", **mirrors, "equal_verbosity": equal}


def _costs_seen(entries: list[_Session]) -> list[float]:
    """The cost of each session that had an answer served here: a session only decided (its
    answers bought by the caller elsewhere) would count as free and pull the mean down."""
    return [s.cost for s in entries if s.decided_only < s.requests]


def _arm_view(entries: list[_Session]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "sessions": len(entries),
        "requests": sum(s.requests for s in entries),
        "cost_per_session": mean_interval(_costs_seen(entries)),
        "with_feedback": sum(1 for s in entries if s.outcome),
        "decided_only_sessions": sum(1 for s in entries if s.decided_only == s.requests),
    }
    for name in _OUTCOMES:
        values = [s.outcome[name] for s in entries if name in s.outcome]
        if values:
            view[name] = _clipped(mean_interval(values), 0.0, 1.0) if name in _BOUNDED else mean_interval(values)
    return view


__all__ = ["Z95", "difference_interval", "experiment_stats", "mean_interval"]
