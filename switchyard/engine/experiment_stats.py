"""Routed vs control, and what shadow mode predicts: per route, with 95 % intervals.

Layer: ``engine`` — pure Python over decision-log lines (no numpy); the CLI and the dashboard
both read it.

Reads what ``switchyard serve --decision-log`` writes: decision records (their ``details.arm``
from a route's ``experiment:`` block, their cost, a shadow request's ``would_cost_usd``) and the
feedback lines of ``POST /v1/feedback``. The unit is the **session** (a request without a
session id counts as its own session): arms are assigned per session, so costs and outcomes
are compared per session, never per request. The sessions and their outcomes come from
:func:`switchyard.engine.joined_log.join_log` — the join replay and tune read too: keyed by
tenant and session id, a report joining only its own tenant's sessions, the latest (by ``ts``)
counting.

Intervals are normal-approximation (Welch) 95 % intervals of a mean, or of a difference of two
independent means (:mod:`switchyard.protocol.intervals`); ``benchmarks/control_group.py`` checks
their coverage on simulated sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.engine.joined_log import OUTCOMES as _OUTCOMES
from switchyard.engine.joined_log import join_log
from switchyard.protocol.intervals import Z95, difference_interval, mean_interval


@dataclass(slots=True)
class _Session:
    cost: float = 0.0
    would: float = 0.0
    requests: int = 0
    outcome: dict[str, float] = field(default_factory=dict)


def _clipped(found: dict[str, Any], low: float, high: float) -> dict[str, Any]:
    """``found`` with its interval cut to [low, high]: a rate's interval never leaves [0, 1]
    (nor a difference of rates [-1, 1]), which the normal approximation does on few sessions."""
    if found.get("low") is not None:
        found["low"], found["high"] = max(found["low"], low), min(found["high"], high)
    return found


_BOUNDED = frozenset({"resolved", "score"})  # rates and scores in [0, 1]


def _cost(obj: Mapping[str, Any]) -> float:
    router = obj.get("router_cost")
    routing = router.get("cost_usd", 0.0) if isinstance(router, Mapping) else 0.0
    parts = (obj.get("cost_usd"), routing, obj.get("feature_cost_usd"))
    return sum(float(p) for p in parts if isinstance(p, int | float) and not isinstance(p, bool))


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
            would = details.get("would_cost_usd") if isinstance(details, Mapping) else None
            router = _cost({"router_cost": obj.get("router_cost"), "feature_cost_usd": obj.get("feature_cost_usd")})
            entry.would += (float(would) + router) if isinstance(would, int | float) else _cost(obj)
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
            "cost_per_session": difference_interval([s.cost for s in routed], [s.cost for s in control])
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
        saved = [s.cost - s.would for s in shadow]
        served = sum(s.cost for s in shadow)
        view["shadow"] = {
            "predicted_saving_per_session": mean_interval(saved),
            "predicted_saved_share": (sum(saved) / served) if served > 0 else None,
        }
    return view


def _arm_view(entries: list[_Session]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "sessions": len(entries),
        "requests": sum(s.requests for s in entries),
        "cost_per_session": mean_interval([s.cost for s in entries]),
        "with_feedback": sum(1 for s in entries if s.outcome),
    }
    for name in _OUTCOMES:
        values = [s.outcome[name] for s in entries if name in s.outcome]
        if values:
            view[name] = _clipped(mean_interval(values), 0.0, 1.0) if name in _BOUNDED else mean_interval(values)
    return view


__all__ = ["Z95", "difference_interval", "experiment_stats", "mean_interval"]
