"""Which routes the caller of the current request may use (inbound API keys).

Layer: ``protocol`` — imports nothing above it.

The proxy authenticates a request before it is decoded; which route the request selects is
known only once the engine has resolved its ``model`` (aliases and the default route
included). The proxy therefore puts the key's allowlist in a context variable, and the engine
checks the resolved route here — no second reading of the body. A route the key may not use is
answered like a model that names no route (404 ``model_not_found``, :func:`no_such_model`).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

allowed_routes: ContextVar[frozenset[str] | None] = ContextVar("switchyard_allowed_routes", default=None)
"""Routes the current request's API key may use; ``None``: any (no key, or ``routes: ["*"]``)."""

required_labels: ContextVar[tuple[str, frozenset[str]] | None] = ContextVar("switchyard_required_labels", default=None)
"""The current request's API key's name and its ``require_labels`` (``None``: the key requires
none); the engine removes every target lacking one of them (``switchyard.engine.restriction``)."""


def may_use(name: str) -> bool:
    """Whether the current key may use route ``name`` (any key may, without an allowlist)."""
    allowed = allowed_routes.get()
    return allowed is None or name in allowed


def no_such_model(model: str, names: Iterable[str]) -> str:
    """The one answer for a model that names no route *and* for a route the current key may not
    use — as OpenAI words it ("does not exist or you do not have access to it"), so a key limited
    to some routes cannot tell a hidden route (or alias, or the default route) from a typo."""
    shown = model if len(model) <= 200 else model[:200] + "…"
    return (
        f"The model `{shown}` does not exist or you do not have access to it: it names no route "
        f"this caller may use (available: {known_routes(names)})"
    )


def known_routes(names: Iterable[str]) -> str:
    """The routes of ``names`` the current key may use, for a "no such model" message: a key
    limited to some routes is not told the names of the others."""
    return ", ".join(sorted(n for n in names if may_use(n))) or "(none)"
