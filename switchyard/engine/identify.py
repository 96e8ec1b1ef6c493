"""Stage 2, identify: whose request this is, the session and thread it belongs to, and its record.

Layer: ``engine``. Reads the request's headers and body, the caller of the request's task
(:data:`~switchyard.protocol.access.current_caller`) and the thread records of the caller's
tenant; changes nothing but the decision record it opens.

The session comes from the headers or the body (``engine/session.py``), or, for a plain Chat
stand-in, from the intake stage as it read it off the body. With inbound keys it belongs to the
caller's tenant (:mod:`switchyard.protocol.tenancy`). An Anthropic thread's ``continue`` keeps the
session and the turn count of the thread it resumes, and the labels the thread required so far
(the restrict stage carries them on). The record is bound to the caller here, in the request's
task, so whoever hands it out later books it to the right key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from switchyard.engine import threads
from switchyard.engine.record_open import open_record
from switchyard.engine.records import DecisionRecord
from switchyard.engine.session import identify
from switchyard.engine.target import Route
from switchyard.protocol.access import current_caller
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo, StateStore


async def identified(
    store: StateStore,
    route: Route,
    request: ChatRequest,
    headers: Mapping[str, str],
    fmt: str | None,
    read: SessionInfo | None,
    *,
    hash_fallback: bool,
    derive: bool,
) -> tuple[SessionInfo, list[str] | None, DecisionRecord]:
    """The request's session, the labels its thread required, and its open decision record.

    Args:
        store: The engine's state store (thread records).
        route: The request's route.
        request: The request (a plain stand-in continues no thread).
        headers: The request's headers, lower-cased.
        fmt: The inbound wire format's name (``None`` for library calls).
        read: The session a plain Chat stand-in named (the intake stage's); ``None`` otherwise.
        hash_fallback: Derive a session id from the first user message when the caller sent none
            (the engine's setting; the route's is read here).
        derive: Whether a session id may be derived from the conversation's opening.

    Returns:
        The session; the labels a continued thread required (``[]``: none, or no ``continue``;
        ``None``: a ``continue`` of a thread the store does not know); the record.
    """
    inherited: list[str] | None = []
    if read is None:
        fallback = hash_fallback or route.hash_session_fallback
        session = identify(headers, request, hash_fallback=fallback, derive=derive)
    else:
        session = read
    if (caller := current_caller.get()) is not None:  # its state is its tenant's (protocol/tenancy.py)
        session = replace(session, tenant=caller.tenant)
    if read is None:  # a thread's `continue` keeps its session and its restriction
        session, inherited = await threads.resume(store, request, session)
    record = open_record(headers, route.name, route.kind, fmt, request, session)
    return session, inherited, record
