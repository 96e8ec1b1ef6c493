"""Who the caller of the current request is, and which routes it may use (inbound API keys).

Layer: ``protocol`` — imports nothing above it.

The proxy authenticates a request before it is decoded; which route the request selects is
known only once the engine has resolved its ``model`` (aliases and the default route
included). The proxy therefore puts the key's allowlist in a context variable, and the engine
checks the resolved route here — no second reading of the body. A route the key may not use is
answered like a model that names no route (404 ``model_not_found``, :func:`no_such_model`).

These context variables are read only by the request's own task, while it runs. What outlives
the request — its decision record — carries its :class:`Caller` itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

from switchyard._dataclass import dataclass


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: the inbound API key that authenticated it, and its tenant.

    The proxy's gate puts it in :data:`current_caller` as it admits the request; the engine
    reads it once, when it opens the request's decision record, and binds it to that record
    (:attr:`DecisionRecord.caller <switchyard.engine.records.DecisionRecord.caller>`,
    ``details.api_key``). Everything that acts on the record later — booking its cost against the
    key's daily budget, naming the key in the logs, metrics and dashboard — reads it from the
    record, never from whatever request happens to be running when the record is handed out
    (after the reply, in a stream's last chunk, at shutdown).

    Attributes:
        key: The key's name (``server.api_keys[].name``).
        tenant: The tenant whose state the request belongs to: the key's own name unless the
            operator declares several keys one tenant.
    """

    key: str
    tenant: str


current_caller: ContextVar[Caller | None] = ContextVar("switchyard_caller", default=None)
"""The current request's caller (``None``: no inbound keys, a library call, an open path)."""

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
