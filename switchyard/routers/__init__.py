"""Routing policy. Routers never perform I/O; they await the injected model call.

Layer: ``routers`` — imports ``protocol`` only (numpy/torch lazily in learned routers).

The names below load on first use: importing one router module (``routers.restrict``) does not
import the router contract and what it imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.routers.base import BuildContext, Decision, RouteContext, Router, RouterSpec, Tiers
    from switchyard.routers.registry import register, router_types, spec_for

_LAZY = {
    "BuildContext": "switchyard.routers.base",
    "Decision": "switchyard.routers.base",
    "RouteContext": "switchyard.routers.base",
    "Router": "switchyard.routers.base",
    "RouterSpec": "switchyard.routers.base",
    "Tiers": "switchyard.routers.base",
    "register": "switchyard.routers.registry",
    "router_types": "switchyard.routers.registry",
    "spec_for": "switchyard.routers.registry",
}

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


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
