"""OpenAI Responses stored upstream (``previous_response_id``), kept to the tenant they served.

Layer: ``engine``.

OpenAI keeps every response whose request did not send ``store: false`` under its id, in the
account of the credential that made it — behind this proxy, the proxy's own. A later request
naming that id as ``previous_response_id`` continues the stored conversation, whoever sends
it. Anthropic message threads are the same kind of thing (:mod:`switchyard.engine.threads`).

With inbound keys (:mod:`switchyard.protocol.tenancy`), each stored response a Responses
upstream serves to a Responses caller is recorded with the tenant it served
(``~responses:<id>`` → ``{"tenant": …}``, kept as long as OpenAI keeps the response), and a
request naming a response recorded for *another* tenant is answered as OpenAI answers an id it
does not hold (400 ``previous_response_not_found``) before anything is sent upstream. An id the
proxy has no record of — served before keys were configured, or forgotten (a memory store that
restarted, or one per replica) — is forwarded as before: refusing it would break a tenant's own
chains, which, unlike the Anthropic SDKs' threads, no client replays by itself. Without keys
nothing is recorded and nothing changes.
"""

from __future__ import annotations

from switchyard.engine.target import Target
from switchyard.protocol.errors import PreviousResponseNotFoundError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore, StateStore

RESPONSES_FORMAT = "openai_responses"
NAMESPACE = "~responses:"
"""State-store prefix of the ownership records (``~`` keeps them apart from route namespaces)."""

KEEP_S = 30 * 86_400.0
"""How long an ownership record is kept: as long as OpenAI keeps a stored response (30 days)."""


def previous_of(request: ChatRequest) -> str | None:
    """The ``previous_response_id`` of a Responses caller's request, or ``None``."""
    if request.origin != RESPONSES_FORMAT:
        return None
    previous = request.extra.get("previous_response_id")
    return previous if isinstance(previous, str) and previous else None


async def check(store: StateStore, request: ChatRequest, tenant: str | None) -> None:
    """Refuses a request of ``tenant`` that continues a response served to another tenant.

    Raises:
        PreviousResponseNotFoundError: The id is recorded for another tenant (the answer is the
            one OpenAI gives for an id it does not hold, so nothing tells that it exists).
    """
    previous = previous_of(request) if tenant is not None else None
    if previous is None:
        return
    owner = await NamespacedStore(store, NAMESPACE).get(previous)
    if owner is not None and owner.get("tenant") != tenant:
        raise PreviousResponseNotFoundError(
            f"Previous response with id {previous!r} not found.", param="previous_response_id"
        )


async def remember(
    store: StateStore, request: ChatRequest, target: Target, response_id: str, tenant: str | None
) -> None:
    """Records whose a stored response is (a Responses caller's request answered by a Responses
    upstream, without ``store: false``); nothing without a tenant."""
    if tenant is None or not response_id or request.origin != RESPONSES_FORMAT:
        return
    if target.info.format != RESPONSES_FORMAT or request.extra.get("store") is False:
        return
    await NamespacedStore(store, NAMESPACE).set(response_id, {"tenant": tenant}, ttl_s=KEEP_S)
