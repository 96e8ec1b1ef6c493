"""Routing policy. Routers never perform I/O; they await the injected model call.

Layer: ``routers`` — imports ``protocol`` only (numpy/torch lazily in learned routers).
"""

from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec, Tiers
from switchyard.routers.registry import register, router_types, spec_for

__all__ = [
    "BuildContext",
    "Decision",
    "RouteContext",
    "Router",
    "RouterSpec",
    "Tiers",
    "register",
    "router_types",
    "spec_for",
]
