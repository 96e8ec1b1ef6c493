"""Session identity and the session-state store interface routers see.

Layer: ``protocol`` — imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote

from switchyard._dataclass import dataclass


@dataclass(slots=True, frozen=True)
class SessionInfo:
    """Who is calling, as far as headers and body tell.

    Attributes:
        session_id: Stable id of the agent session, or ``None`` when unknown.
        agent_id: Id of the (sub-)agent within the session.
        parent_agent_id: Id of the agent that spawned this one.
        source: Where ``session_id`` came from (a header name, ``user``, ``metadata``, ``hash``).
        turn_index: Number of assistant turns already in the conversation.
        agent_kind: The harness's name for the kind of (sub-)agent (Codex ``collab_spawn``,
            ``review``, ``compact`` …), when it sends one.
        delegated: Whether this call is delegated work of a sub-agent (routes with a
            ``subagents`` policy send it there).
        delegation: What told us it is (or is not) delegated: a header name or metadata field.
        tenant: Whose state the session is (:mod:`switchyard.protocol.tenancy`): the tenant of
            the request's inbound key, ``None`` without keys.
    """

    session_id: str | None = None
    agent_id: str | None = None
    parent_agent_id: str | None = None
    source: str | None = None
    turn_index: int = 0
    agent_kind: str | None = None
    delegated: bool = False
    delegation: str | None = None
    tenant: str | None = None

    @property
    def key(self) -> str | None:
        """State key: the session, narrowed to the agent for sub-agents, in its tenant's namespace.

        A delegated call without an agent id of its own shares one ``subagent`` slot per
        session rather than the parent's state. With a tenant, the key starts with
        :func:`tenant_namespace`: two tenants sending the same session id (or deriving the same
        one from the same opening) get two keys.
        """
        if self.session_id is None:
            return None
        if self.delegated:
            key = f"{self.session_id}/{self.agent_id or 'subagent'}"
        elif self.agent_id and self.parent_agent_id:
            key = f"{self.session_id}/{self.agent_id}"
        else:
            key = self.session_id
        return key if self.tenant is None else tenant_namespace(self.tenant) + key


TENANT_PREFIX = "~t:"
"""What every tenant's namespace starts with (``~`` keeps it apart from route names)."""


def tenant_namespace(tenant: str | None) -> str:
    """The state-key prefix of ``tenant``: ``""`` without a tenant, else ``~t:<name>:``.

    The name is percent-encoded (``quote`` with no safe characters), so it never contains the
    closing ``:`` and no tenant's namespace is a prefix of another's, whatever the names: what
    one tenant sends after its prefix (a session id, a message id) cannot spell a key of
    another. ``alice`` gives ``~t:alice:``; ``a:b`` gives ``~t:a%3Ab:``.
    """
    if tenant is None:
        return ""
    return f"{TENANT_PREFIX}{quote(tenant, safe='')}:"


Updater = Callable[[dict[str, Any] | None], dict[str, Any] | None]
"""A pure function from a stored value (or ``None``) to its replacement (``None`` deletes)."""


class StateStore(Protocol):
    """Per-session JSON state, shared by every request of a session.

    Values must be JSON-serialisable dicts so the Redis backend can hold them too.
    """

    async def get(self, key: str) -> dict[str, Any] | None:
        """The stored value, or ``None``."""
        ...

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        """Stores ``value``; it expires ``ttl_s`` seconds after the last write."""
        ...

    async def delete(self, key: str) -> None:
        """Forgets ``key``."""
        ...

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        """Replaces the value with ``fn(current)`` so that no concurrent write is lost.

        Use it wherever a router reads state and writes back something computed from it (a
        streak, a hold countdown): two requests of one session, on one replica or on two, then
        apply their changes one after the other instead of the last write winning.

        Args:
            key: The state key.
            fn: Gets the current value (``None`` when absent) and returns the new one (``None``
                deletes the key). It may be called more than once (a store with optimistic
                concurrency retries on conflict), so it must not have side effects.
            ttl_s: Idle lifetime of the new value (``None``: the store's default).

        Returns:
            The value now stored (what the last call of ``fn`` returned).
        """
        ...

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        """Restarts ``key``'s idle expiry, leaving its value alone.

        For a request that only needs its session's state to stay alive: unlike ``update`` it
        neither reads nor writes the value, so a shared store spends one round trip (Redis:
        ``PEXPIRE``) instead of a locked transaction, and a value another request wrote in the
        meantime is kept as it is.

        Args:
            key: The state key.
            ttl_s: The new idle lifetime, counted from now (``None``: the store's default).

        Returns:
            Whether the key existed; a missing or expired key stays missing.
        """
        ...


class NamespacedStore:
    """A view of a store with every key prefixed: one namespace per route, or per cascade stage.

    It lives in ``protocol`` so the engine (one namespace per route) and routers (one slot per
    cascade stage) share one wrapper; routers may not import ``state``.

    Args:
        inner: The store the keys land in.
        prefix: Put before every key (``"route:"``, ``"stage1."``).
    """

    def __init__(self, inner: StateStore, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self._inner.get(self._prefix + key)

    async def set(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        await self._inner.set(self._prefix + key, value, ttl_s=ttl_s)

    async def delete(self, key: str) -> None:
        await self._inner.delete(self._prefix + key)

    async def update(self, key: str, fn: Updater, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        return await self._inner.update(self._prefix + key, fn, ttl_s=ttl_s)

    async def touch(self, key: str, *, ttl_s: float | None = None) -> bool:
        return await self._inner.touch(self._prefix + key, ttl_s=ttl_s)
