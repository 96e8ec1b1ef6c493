"""Which route ``type`` names which router spec.

Layer: ``routers`` — imports ``protocol`` only.

Built-in routers are named here by import path so that heavy routers (learned probes) load only
when a config uses them. Third-party routers register through the ``switchyard.routers`` entry
point group (``name = "package.module:SpecClass"``).
"""

from __future__ import annotations

import importlib

from switchyard.routers.base import RouterSpec

_BUILTIN: dict[str, str] = {
    "passthrough": "switchyard.routers.static:PassthroughSpec",
    "random": "switchyard.routers.static:RandomSpec",
    "llm_classifier": "switchyard.routers.llm_classifier:LlmClassifierSpec",
    "decision_model": "switchyard.routers.decision.spec:DecisionModelSpec",
    "stage_router": "switchyard.routers.stage.spec:StageRouterSpec",
    "prefill_probe": "switchyard.routers.learned.probe:PrefillProbeSpec",
    "knn": "switchyard.routers.learned.knn:KnnSpec",
    "cascade": "switchyard.routers.cascade:CascadeSpec",
    "advisor": "switchyard.routers.advisor.spec:AdvisorSpec",
    "plan_execute": "switchyard.routers.plan_execute.spec:PlanExecuteSpec",
    "profiles": "switchyard.routers.profiles:ProfilesSpec",
    "trajectory": "switchyard.routers.trajectory.spec:TrajectorySpec",
}

_UNAVAILABLE: dict[str, str] = {}
"""Route types that are planned but not usable yet, with the reason shown to users."""

_extra: dict[str, type[RouterSpec]] = {}


def register(spec: type[RouterSpec]) -> type[RouterSpec]:
    """Registers a spec class under its ``kind`` (usable as a decorator)."""
    if not spec.kind:
        raise ValueError(f"{spec.__name__}.kind must name the route type")
    _extra[spec.kind] = spec
    return spec


def _entry_point_paths() -> dict[str, str]:
    # Imported here: importlib.metadata (and the email package under it) is a tenth of the
    # server's import, and only plugin look-ups need it.
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="switchyard.routers")}


def router_types() -> list[str]:
    """Every route type known, sorted."""
    return sorted({*_BUILTIN, *_extra, *_entry_point_paths()})


def spec_for(kind: str) -> type[RouterSpec]:
    """The spec class for a route type.

    Raises:
        KeyError: Unknown type (the message lists the known ones).
        LookupError: Known but not usable (the message says why).
    """
    if kind in _extra:
        return _extra[kind]
    path = _BUILTIN.get(kind) or _entry_point_paths().get(kind)
    if path is None:
        if kind in _UNAVAILABLE:
            raise LookupError(_UNAVAILABLE[kind])
        raise KeyError(f"unknown route type {kind!r}; known types: {', '.join(router_types())}")
    module, _, name = path.partition(":")
    spec = getattr(importlib.import_module(module), name)
    if not (isinstance(spec, type) and issubclass(spec, RouterSpec)):
        raise TypeError(f"{path} is not a RouterSpec subclass")
    return spec
