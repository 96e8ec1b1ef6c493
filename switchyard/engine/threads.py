"""Anthropic message threads (beta ``message-threads-2026-08-12``) through the engine.

Layer: ``engine``.

With ``thread: {"type": "create"}`` an Anthropic upstream keeps the conversation under the
reply's ``id``; a later request with ``thread: {"type": "continue", "previous_message_id": id}``
carries only the new messages (and no ``system`` or ``tools``: the thread holds them). Both
Anthropic SDKs' tool runners thread by default. Two consequences for a router:

* Only an Anthropic upstream can continue a thread. A ``continue`` whose chosen target speaks
  another format is answered 404 ``thread_not_found`` in Anthropic's error shape
  (:class:`~switchyard.protocol.errors.ThreadNotFoundError`), on which the SDKs replay the
  whole conversation; fallbacks of another format are left out of a ``continue``'s candidates
  (they would answer without the conversation).
* A ``continue`` repeats nothing of how the conversation began, so no session key can be
  derived from it. Every threaded reply an Anthropic target serves is recorded in the state
  store under its message id (the session id and the turn count), and a
  ``continue`` takes its session and turn index from the id it continues: one session per
  run, on every replica that shares the store. An explicit session header still wins.
* A ``continue`` carries only the new messages, yet the upstream answers with the whole
  conversation. The record of each threaded reply therefore keeps the labels its request's
  restriction required (``require``), and a ``continue`` requires them again on top of its own
  (:func:`carried`): a thread keeps the strictest restriction it ever had. A ``continue`` of a
  thread the store does not know (evicted, or created elsewhere) on a route with ``restrict:``
  rules is answered ``thread_not_found``: the SDK then sends the whole conversation, which the
  rules read.
* With inbound keys, thread records belong to the tenant of the request whose reply opened or
  continued the thread (:mod:`switchyard.protocol.tenancy`): a ``continue`` is looked up in its
  own tenant's records only, and one whose id its tenant does not hold is answered 404
  ``thread_not_found`` before anything is sent upstream — the upstream holds every tenant's
  threads under the proxy's own credential, so forwarding it would let one key continue (and
  read) another's conversation. The SDKs then replay the whole conversation. Without keys (and
  without ``restrict:`` rules) an unknown id is forwarded as before (the upstream may hold it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from switchyard.engine.restriction import Requirement, Restriction
from switchyard.engine.target import Target
from switchyard.protocol.errors import ThreadNotFoundError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo, StateStore
from switchyard.protocol.tenancy import tenant_scoped
from switchyard.routers.base import Decision

THREAD_FORMAT = "anthropic_messages"
NAMESPACE = "~threads:"
"""State-store prefix of the thread records (``~`` keeps them apart from route namespaces)."""

_WEAK_SOURCES = frozenset({None, "derived", "first_message_hash"})
"""Session sources computed from the request's own messages: a ``continue`` carries only the new
ones, so what they give is replaced by the thread's session."""


def thread_field(request: ChatRequest) -> dict[str, Any] | None:
    """The caller's ``thread`` object (Anthropic callers only), or ``None``."""
    if request.origin != THREAD_FORMAT:
        return None
    thread = request.extra.get("thread")
    return thread if isinstance(thread, dict) else None


def continued_from(request: ChatRequest) -> str | None:
    """The ``previous_message_id`` of a ``continue`` request, or ``None``."""
    thread = thread_field(request)
    if thread is None or thread.get("type") != "continue":
        return None
    previous = thread.get("previous_message_id")
    return previous if isinstance(previous, str) and previous else None


def store_of(store: StateStore, tenant: str | None = None) -> StateStore:
    """The namespace of ``tenant``'s thread records in the engine's store (``~threads:``, then
    the tenant's namespace; ``~threads:`` alone without a tenant)."""
    return tenant_scoped(store, NAMESPACE, tenant)


async def resume(store: StateStore, request: ChatRequest, session: SessionInfo) -> tuple[SessionInfo, list[str] | None]:
    """``session`` as the thread a ``continue`` request resumes knows it, and the labels the
    thread's requests required so far (``[]``: none, or not a ``continue``; ``None``: a
    ``continue`` of an id the store does not know).

    The session is unchanged for any other request and for an id the store does not know (the
    upstream may still hold it). The turn index counts the thread's assistant turns before this
    request. Only the records of ``session.tenant`` are read: another tenant's thread is an
    unknown id.
    """
    previous = continued_from(request)
    if previous is None:
        return session, []
    known = await store_of(store, session.tenant).get(previous)
    if not known:
        return session, None
    require = known.get("require")
    labels = [label for label in require if isinstance(label, str)] if isinstance(require, list) else []
    turns = known.get("turn_index")
    delta = sum(1 for m in request.messages if m.role == "assistant")
    turn_index = (turns if isinstance(turns, int) else 0) + delta
    session_id = known.get("session_id")
    if session.source in _WEAK_SOURCES and isinstance(session_id, str) and session_id:
        return replace(session, session_id=session_id, source="thread", turn_index=turn_index), labels
    return replace(session, turn_index=turn_index), labels


def carried(request: ChatRequest, labels: Iterable[str] | None) -> list[Requirement]:
    """The requirement a ``continue`` brings from its thread (``labels``: :func:`resume`'s)."""
    if not labels:
        return []
    previous = continued_from(request)
    return [Requirement("thread", previous, tuple(labels))] if previous is not None else []


async def remember(
    store: StateStore,
    request: ChatRequest,
    target: Target,
    message_id: str,
    session_id: str | None,
    turn_index: int,
    restriction: Restriction | None = None,
    tenant: str | None = None,
) -> None:
    """Records a threaded reply under its ``message_id`` for the ``continue`` that follows it.

    Only replies of an Anthropic target to a request with ``thread`` are recorded: nothing
    else can be continued. A conversation without any session identity is keyed on the
    message id that opened its thread (``thread:<id>``). The labels ``restriction`` required
    (those of the thread so far included) are kept for the next ``continue``. The record is
    ``tenant``'s: only a ``continue`` of the same tenant finds it.
    """
    if thread_field(request) is None or target.info.format != THREAD_FORMAT or not message_id:
        return
    value: dict[str, Any] = {"session_id": session_id or f"thread:{message_id}", "turn_index": turn_index + 1}
    if restriction is not None and restriction.labels:
        value["require"] = sorted(restriction.labels)
    await store_of(store, tenant).set(message_id, value)


async def remember_answer(
    store: StateStore,
    request: ChatRequest,
    decision: Decision,
    targets: Mapping[str, Target],
    session: SessionInfo,
    restriction: Restriction | None = None,
) -> None:
    """:func:`remember` for an answer a router produced itself (escalation, advisor)."""
    name = decision.answered_by or (decision.candidates[0] if decision.candidates else None)
    if decision.response is not None and name is not None and name in targets:
        turn, answer_id = session.turn_index, decision.response.id
        await remember(store, request, targets[name], answer_id, session.session_id, turn, restriction, session.tenant)


def check_route(
    request: ChatRequest, names: Sequence[str], targets: Mapping[str, Target], *, known: bool = True
) -> None:
    """Refuses a ``continue`` before routing when none of the route's targets is Anthropic's
    (the router would decide on a lone tool result, and the answer would be refused anyway),
    or when its thread is not ``known`` where it must be: on a route with ``restrict:`` rules
    (its restriction), and with inbound keys (whose thread it is).

    Raises:
        ThreadNotFoundError: As :func:`servable`; or the thread is unknown (the SDK then sends
            the whole conversation, which the rules read and which is the caller's own).
    """
    previous = continued_from(request)
    if previous is None:
        return
    if not any(n in targets and targets[n].info.format == THREAD_FORMAT for n in names):
        raise _not_found(previous, "none of this route's targets")
    if not known:
        raise ThreadNotFoundError(
            # The same answer whether another tenant holds the id or nobody does.
            f"thread {previous!r} cannot be continued on this route: the proxy holds no record of it for "
            "this caller (with API keys a thread is its key's tenant's; with restrict: rules its restriction "
            "must be known); send the whole conversation (the Anthropic SDKs do this on their own), with "
            'thread: {"type": "create"} or without thread',
            param="thread.previous_message_id",
        )


def _not_found(previous: str, which: str) -> ThreadNotFoundError:
    return ThreadNotFoundError(
        f"thread {previous!r} cannot be continued on this route: {which} keeps Anthropic message threads; "
        'send the whole conversation (the Anthropic SDKs do this on their own), with thread: {"type": "create"} '
        "or without thread",
        param="thread.previous_message_id",
    )


def servable(request: ChatRequest, candidates: Sequence[str], targets: Mapping[str, Target]) -> list[str]:
    """The candidates that can answer ``request``: for a ``continue``, its Anthropic ones.

    Raises:
        ThreadNotFoundError: A ``continue`` whose chosen target (the first candidate) is of
            another format, or that has no Anthropic candidate at all.
    """
    previous = continued_from(request)
    if previous is None:
        return list(candidates)
    same = [c for c in candidates if c in targets and targets[c].info.format == THREAD_FORMAT]
    if not same or (candidates and candidates[0] not in same):
        chosen = candidates[0] if candidates else None
        fmt = targets[chosen].info.format if chosen is not None and chosen in targets else "no"
        raise _not_found(previous, f"the chosen target {chosen!r} ({fmt} upstream) never")
    return same
