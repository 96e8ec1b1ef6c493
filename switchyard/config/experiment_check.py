"""Checks of a route's ``experiment:`` block that need the route's targets.

Layer: ``config``. The block's own shape (``control_share`` in [0, 1), ``mode``) is checked by
:class:`~switchyard.routers.experiment.ExperimentSpec`; here: the baseline is one of the route's
own targets, a route without a capable tier names one, and ``mirror_share`` comes with
``mode: shadow``.
"""

from __future__ import annotations

from switchyard.routers.base import RouterSpec


def experiment_baseline(spec: RouterSpec) -> str | None:
    """The target that serves a route's shadow and control requests: ``experiment.baseline``, else
    the route's capable tier; ``None`` when the route has neither (or no experiment)."""
    if spec.experiment is None:
        return None
    if spec.experiment.baseline is not None:
        return spec.experiment.baseline
    tiers = spec.tiers()
    return tiers["capable"] if tiers is not None else None


def experiment_problems(spec: RouterSpec) -> list[tuple[tuple[str, ...], str]]:
    """What is wrong with ``spec``'s ``experiment:`` block, as (path below the route, message)."""
    block = spec.experiment
    if block is None:
        return []
    problems: list[tuple[tuple[str, ...], str]] = []
    if block.mirror_share > 0 and block.mode != "shadow":
        problems.append(
            (
                ("experiment", "mirror_share"),
                "mirror_share needs mode: shadow (a mirror measures what the router's choice would have "
                "spent while the baseline serves; with mode: route the choice already serves)",
            )
        )
    own = spec.routable_targets()
    if block.baseline is None:
        if spec.tiers() is None:
            problems.append(
                (
                    ("experiment",),
                    f"set experiment.baseline: route type {spec.type!r} has no capable tier to default to "
                    f"(name one of its targets: {', '.join(own) or '(none)'})",
                )
            )
    elif block.baseline not in own:
        problems.append(
            (
                ("experiment", "baseline"),
                f"{block.baseline!r} is not a target of this route (its targets: {', '.join(own) or '(none)'})",
            )
        )
    return problems
