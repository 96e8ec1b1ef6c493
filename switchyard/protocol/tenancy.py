"""Tenants: whose state a request reads and writes.

Layer: ``protocol`` — imports nothing of ours but :mod:`switchyard.protocol.session` (where
:func:`tenant_namespace` lives, beside the session key it prefixes).

With inbound keys configured (``server.api_keys``), every request the proxy serves belongs to
one *tenant*: by default each key is its own tenant (named after the key), and
``server.tenants`` may group several keys into one. Everything stateful the engine keeps for a
request — its session's router state, the Anthropic message threads it may continue, derived
session keys, what ``/v1/decision`` reports as state changes — lives under the tenant's
namespace, so two tenants never read or write each other's entries even when they send the
same session id or open their conversations the same way. Without keys there is no tenant
(``None``) and no namespace: state keys are exactly what they were before tenants existed.

The namespace is a key prefix, :func:`tenant_namespace`, that every state-store key of a
tenant carries (a Redis key too), so replicas sharing a store agree on it:

* a session's router state: ``<route>:~t:<tenant>:<session key>:<slot>``
  (:attr:`SessionInfo.key <switchyard.protocol.session.SessionInfo.key>` carries it);
* anything else kept per tenant, such as thread records: ``<kind>~t:<tenant>:<id>``
  (:func:`tenant_scoped`, e.g. ``~threads:~t:alice:msg_01…``).

What must be found by id whoever asks — whose stored OpenAI response an id is
(:mod:`switchyard.engine.stored_responses`) — is kept under the id with its tenant as the value.

Anything that joins data by session — decision records, and ``POST /v1/feedback`` once it
exists — must scope the session by the record's tenant
(:attr:`DecisionRecord.tenant <switchyard.engine.records.DecisionRecord.tenant>`) and keep
its own entries with :func:`tenant_scoped` in the same way.
"""

from __future__ import annotations

from switchyard.protocol.session import TENANT_PREFIX, NamespacedStore, StateStore, tenant_namespace


def tenant_scoped(store: StateStore, kind: str, tenant: str | None) -> StateStore:
    """The entries of one kind (``"~threads:"``) that belong to ``tenant``: keys under ``kind``
    followed by :func:`tenant_namespace` (``kind`` alone without a tenant, as before tenants)."""
    return NamespacedStore(store, kind + tenant_namespace(tenant))


__all__ = ["TENANT_PREFIX", "tenant_namespace", "tenant_scoped"]
