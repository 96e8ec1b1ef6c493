"""``switchyard stats --experiment``: routed vs control, and shadow mode's predicted saving.

The numbers come from :func:`switchyard.engine.experiment_stats.experiment_stats`; this module
reads the log and prints them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from switchyard.cli._common import fail, json_objects


def run_experiment(path: str, *, route: str | None, tenant: str | None, as_json: bool) -> int:
    """Prints the experiment's numbers per route (``route``: only that one)."""
    from switchyard.engine.experiment_stats import experiment_stats

    warn: list[str] = []
    try:
        data = experiment_stats(json_objects(path, warn), tenant=tenant)
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}")
    for line in warn:
        print(f"warning: {line}", file=sys.stderr)
    if route is not None:
        data = {k: v for k, v in data.items() if k == route}
    if as_json:
        print(json.dumps({"experiment": data, "skipped_lines": len(warn)}, indent=2))
        return 0
    if not data:
        print("no decision records with an experiment arm (set experiment: on a route, docs/rollout.md)")
        return 0
    for name, view in data.items():
        _print_route(name, view)
    return 0


def _interval(found: dict[str, Any], key: str = "mean", fmt: str = "{:.6f}") -> str:
    value = found.get(key)
    if value is None:
        return "-"
    if found.get("low") is None:
        return fmt.format(value)
    return f"{fmt.format(value)} [{fmt.format(found['low'])}, {fmt.format(found['high'])}]"


def _print_route(name: str, view: dict[str, Any]) -> None:
    print(f"route {name}")
    for arm, found in view["arms"].items():
        parts = [
            f"  {arm:8} sessions {found['sessions']:>6}  requests {found['requests']:>7}",
            f"$/session {_interval(found['cost_per_session'])}",
            f"feedback {found['with_feedback']}",
        ]
        if found.get("decided_only_sessions"):
            parts.insert(2, f"(cost of {found['decided_only_sessions']} decided-only sessions not seen)")
        if "resolved" in found:
            parts.append(f"resolved {_interval(found['resolved'], fmt='{:.1%}')}")
        if "score" in found:
            parts.append(f"score {_interval(found['score'], fmt='{:.3f}')}")
        if "reward" in found:
            parts.append(f"reward {_interval(found['reward'], fmt='{:.3f}')}")
        print("  ".join(parts))
    comparison = view.get("routed_vs_control")
    if comparison:
        print(f"  routed - control: $/session {_interval(comparison['cost_per_session'], 'diff')}")
        for key, fmt in (("resolved", "{:+.1%}"), ("score", "{:+.3f}"), ("reward", "{:+.3f}")):
            if key in comparison:
                print(f"  routed - control: {key} {_interval(comparison[key], 'diff', fmt)}")
    shadow = view.get("shadow")
    if shadow:
        _print_shadow(shadow)


def _print_shadow(shadow: dict[str, Any]) -> None:
    """Shadow's predicted saving: corrected by the mirrors, or at equal verbosity (docs/rollout.md)."""
    share = shadow["predicted_saved_share"]
    shown = "-" if share is None else f"{share:.1%}"
    saving = _interval(shadow["predicted_saving_per_session"])
    if shadow.get("basis") != "mirrors":
        print(f"  shadow: predicted saving $/session {saving}  (share of the baseline's cost: {shown})")
        print(
            "  shadow: assumes the chosen targets write as much as the baseline "
            "(no mirrored session: set experiment.mirror_share to measure it)"
        )
        return
    bounds = shadow.get("predicted_saved_share_interval") or {}
    if bounds.get("low") is not None:
        shown = f"{shown} [{bounds['low']:.1%}, {bounds['high']:.1%}]"
    ratio = _interval(shadow["cost_ratio"], fmt="{:.3f}")
    print(f"  shadow: predicted saving $/session {saving}  (share of the baseline's cost: {shown})")
    print(
        f"  shadow: corrected by {shadow['mirrored_sessions']} mirrored sessions "
        f"({shadow['mirrored_requests']} requests): would-be cost / priced estimate {ratio}"
    )
    equal = shadow["equal_verbosity"]
    flat = equal["predicted_saved_share"]
    print(
        f"  shadow: at equal verbosity (uncorrected) $/session {_interval(equal['predicted_saving_per_session'])}"
        f"  share {'-' if flat is None else f'{flat:.1%}'}"
    )
    print(
        f"  shadow: mirrors cost ${shadow['mirror_cost_usd']:.6f}; "
        f"{shadow['mirror_failures']} failed, {shadow['mirror_skipped']} not sent (busy or restricted)"
    )
