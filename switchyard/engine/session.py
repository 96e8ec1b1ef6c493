"""Session and agent identity from caller headers and body.

Layer: ``engine``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo

SESSION_HEADERS = (
    "x-switchyard-session-id",
    "x-claude-code-session-id",
    "x-nemo-relay-session-id",
    "x-session-id",
)
AGENT_HEADERS = (
    "x-switchyard-agent-id",
    "x-claude-code-agent-id",
    "x-nemo-relay-subagent-id",
    "x-dynamo-session-id",
)
PARENT_HEADERS = (
    "x-switchyard-parent-agent-id",
    "x-claude-code-parent-agent-id",
    "x-dynamo-parent-session-id",
    "x-codex-parent-thread-id",
)
KIND_HEADERS = ("x-switchyard-agent-kind",)
SUBAGENT_HEADER = "x-switchyard-is-subagent"
_CODEX_META = "x-codex-turn-metadata"
_OPENAI_SUBAGENT = "x-openai-subagent"
_SUBAGENT_ID_HEADERS = ("x-claude-code-agent-id", "x-nemo-relay-subagent-id")
"""Agent ids these harnesses send only from a sub-agent (Claude Code's main thread sends none)."""

_IDENTITY_HEADERS = frozenset(
    (
        *SESSION_HEADERS,
        "session-id",
        *AGENT_HEADERS,
        "thread-id",
        *PARENT_HEADERS,
        *KIND_HEADERS,
        SUBAGENT_HEADER,
        _CODEX_META,
        _OPENAI_SUBAGENT,
        *_SUBAGENT_ID_HEADERS,
    )
)
"""Every header :func:`identify` reads (lower-case): a request with none of them is identified
by its body alone."""

MAINTENANCE_KINDS = frozenset(("compact", "memory_consolidation", "memgen", "title", "summary"))
"""Agent kinds that are harness housekeeping run as a child thread, not delegated work: they keep
the parent's policy (Codex's ``compact`` and ``memory_consolidation``)."""

MAX_ID_CHARS = 128
"""Longest session, agent or parent-agent id kept as sent; a longer one is kept as its hash."""

_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("0", "false", "no", "off"))


def _codex_meta(headers: Mapping[str, str]) -> dict[str, Any]:
    raw = headers.get(_CODEX_META)
    if not raw:
        return {}
    try:
        meta = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _first(headers: Mapping[str, str], names: tuple[str, ...]) -> tuple[str | None, str | None]:
    for name in names:
        value = headers.get(name)
        if value and value.strip():
            return value.strip(), name
    return None, None


def bounded_id(value: str | None) -> str | None:
    """An id as it may be retained: as sent up to :data:`MAX_ID_CHARS` characters, else
    ``long:`` and a 32-hex-digit BLAKE2b hash of it — stable, so every turn of one session still
    maps to one key, but a caller cannot make the ledger, ``/v1/stats``, decision records or the
    state store keep 32 KiB per id (ids come from headers and from body fields such as
    ``metadata.session_id``, ``prompt_cache_key`` and ``user``)."""
    if value is None or len(value) <= MAX_ID_CHARS:
        return value
    return "long:" + hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def first_message_hash(request: ChatRequest) -> str | None:
    """A short stable hash of the first user message (a session key of last resort)."""
    text = request.first_user_text()
    if not text:
        return None
    return "h:" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def derived_session_key(request: ChatRequest) -> str | None:
    """A session key derived from how the conversation began (``None`` when it has no text).

    Hermes Agent, Qwen Code and plain SDK callers send no session identity. Every request of
    one agent conversation repeats its opening: the leading system/developer text and the first
    user message. Their hash is stable across the turns of that conversation and differs
    between conversations that start differently; two conversations that open with exactly the
    same system prompt and first message share a key (send ``x-switchyard-session-id`` to tell
    them apart).
    """
    return opening_key((m.role, m.text if m.role in _OPENING_ROLES else "") for m in request.messages)


_OPENING_ROLES = frozenset(("system", "developer", "user"))


def opening_key(messages: Iterable[tuple[str, str]]) -> str | None:
    """:func:`derived_session_key` of a conversation given as ``(role, text)`` in order (the
    text of system, developer and user messages; others may carry ``""``). Reads no further
    than the first user message with text."""
    digest = hashlib.blake2b(digest_size=12)
    leading = True
    for role, text in messages:
        if leading and role in ("system", "developer"):
            _digest_text(digest, text)
            continue
        leading = False
        if role == "user" and text:
            digest.update(b"\0")
            _digest_text(digest, text)
            return "d:" + digest.hexdigest()
    return None


_HEAD_CHARS = 2048
"""Characters of each opening text that are hashed (with its full length): agent system prompts
run to tens of kilobytes, and hashing them whole costs tens of microseconds per request."""


def _digest_text(digest: Any, text: str) -> None:
    # One update of the same bytes: blake2b's digest does not depend on how they are fed.
    if len(text) > _HEAD_CHARS:  # the tail too: where date/cwd lines often sit
        digest.update(f"{len(text)}:{text[:_HEAD_CHARS]}{text[-256:]}".encode())
    else:
        digest.update(f"{len(text)}:{text}".encode())


def identify(
    headers: Mapping[str, str], request: ChatRequest, *, hash_fallback: bool = False, derive: bool = False
) -> SessionInfo:
    """Resolves who is calling.

    Order: ``x-switchyard-session-id``, ``x-claude-code-session-id``, ``x-session-id``, Codex turn
    metadata (``session_id``), ``session-id``; then the body's ``metadata.session_id``,
    ``prompt_cache_key`` (OpenAI's per-conversation cache key, which Codex sends) and ``user``;
    then, when ``hash_fallback`` is on, a hash of the first user message (source
    ``first_message_hash``); else, when ``derive`` is on, :func:`derived_session_key` (source
    ``derived``). Ids longer than :data:`MAX_ID_CHARS` are replaced by their hash
    (:func:`bounded_id`) before anything keeps them.

    Args:
        headers: Caller headers with lower-case names.
        request: The decoded request.
        hash_fallback: Whether to derive a session from the first user message.
        derive: Whether to derive a session from the conversation's opening when nothing
            else identifies it.
    """
    if not _IDENTITY_HEADERS.intersection(headers):
        # The usual plain SDK call: no header names a session, an agent or a sub-agent, so only
        # the body can (what the lookups below conclude, without their ~20 header probes).
        session, source = _from_body(request, hash_fallback, derive)
        return headerless(session, source, sum(1 for m in request.messages if m.role == "assistant"))
    codex = _codex_meta(headers)
    session, source = _first(headers, SESSION_HEADERS)
    if session is None and isinstance(codex.get("session_id"), str):
        session, source = codex["session_id"], _CODEX_META
    if session is None:
        session, source = _first(headers, ("session-id",))
    if session is None:
        session, source = _from_body(request, hash_fallback, derive)
    agent, _ = _first(headers, AGENT_HEADERS)
    if agent is None and isinstance(codex.get("thread_id"), str):
        agent = codex["thread_id"]
    if agent is None:
        agent, _ = _first(headers, ("thread-id",))
    parent, _ = _first(headers, PARENT_HEADERS)
    if parent is None and isinstance(codex.get("parent_thread_id"), str):
        parent = codex["parent_thread_id"]
    kind = _agent_kind(headers, codex)
    delegated, delegation = _delegation(headers, codex, parent, kind)
    turns = sum(1 for m in request.messages if m.role == "assistant")
    kind = bounded_id(kind)
    return SessionInfo(
        session_id=bounded_id(session),
        agent_id=bounded_id(agent),
        parent_agent_id=bounded_id(parent),
        source=source,
        turn_index=turns,
        agent_kind=kind,
        delegated=delegated,
        delegation=delegation,
    )


def _from_body(request: ChatRequest, hash_fallback: bool, derive: bool) -> tuple[str | None, str | None]:
    """The session the body names, in :func:`identify`'s order, and where it came from."""
    return body_session(
        request.metadata,
        request.extra.get("prompt_cache_key"),
        request.user,
        first_hash=(lambda: first_message_hash(request)) if hash_fallback else None,
        derived=(lambda: derived_session_key(request)) if derive else None,
    )


def body_session(
    metadata: Mapping[str, Any] | None,
    cache_key: Any,
    user: str | None,
    *,
    first_hash: Callable[[], str | None] | None = None,
    derived: Callable[[], str | None] | None = None,
) -> tuple[str | None, str | None]:
    """The session a request body names and its source: ``metadata.session_id``, then
    ``prompt_cache_key``, then ``user``, then ``first_hash()`` and ``derived()`` (each only
    when given). Shared by the decoded request and the plain Chat body (engine/plain_chat.py).
    """
    meta = metadata or {}
    if isinstance(meta.get("session_id"), str) and meta["session_id"]:
        return meta["session_id"], "metadata.session_id"
    if isinstance(cache_key, str) and cache_key:
        return cache_key, "prompt_cache_key"
    if user:
        return user, "user"
    session, source = None, None
    if first_hash is not None:
        session, source = first_hash(), "first_message_hash"
    if session is None and derived is not None:
        session = derived()
        source = "derived" if session is not None else None
    return session, source


def names_no_one(headers: Mapping[str, str]) -> bool:
    """Whether no header names a session, an agent or a sub-agent (only the body can)."""
    return not _IDENTITY_HEADERS.intersection(headers)


def headerless(session: str | None, source: str | None, turn_index: int) -> SessionInfo:
    """The identity of a request whose headers name no one (:func:`names_no_one`)."""
    return SessionInfo(session_id=bounded_id(session), source=source, turn_index=turn_index)


def _agent_kind(headers: Mapping[str, str], codex: Mapping[str, Any]) -> str | None:
    kind, _ = _first(headers, KIND_HEADERS)
    if kind is None:
        kind, _ = _first(headers, (_OPENAI_SUBAGENT,))
    if kind is None and isinstance(codex.get("subagent_kind"), str) and codex["subagent_kind"]:
        kind = codex["subagent_kind"]
    return kind.lower() if kind else None


def _delegation(
    headers: Mapping[str, str], codex: Mapping[str, Any], parent: str | None, kind: str | None
) -> tuple[bool, str | None]:
    """Whether the call is a sub-agent's delegated work, and which signal said so.

    In order: an explicit ``x-switchyard-is-subagent`` (true or false wins over everything);
    housekeeping kinds (``MAINTENANCE_KINDS``) are never delegated; Claude Code's or NeMo
    Relay's sub-agent id; Codex's ``x-openai-subagent`` header; Codex turn metadata with
    ``thread_source: subagent`` and a parent thread; any other agent kind or parent-agent id.
    """
    explicit = (headers.get(SUBAGENT_HEADER) or "").strip().lower()
    if explicit in _TRUE:
        return True, SUBAGENT_HEADER
    if explicit in _FALSE:
        return False, SUBAGENT_HEADER
    codex_kind = codex.get("subagent_kind")
    kinds = {k for k in (kind, codex_kind.lower() if isinstance(codex_kind, str) else None) if k}
    if kinds & MAINTENANCE_KINDS:
        return False, "maintenance:" + sorted(kinds & MAINTENANCE_KINDS)[0]
    for name in _SUBAGENT_ID_HEADERS:
        if (headers.get(name) or "").strip():
            return True, name
    if (headers.get(_OPENAI_SUBAGENT) or "").strip():
        return True, _OPENAI_SUBAGENT
    if codex.get("thread_source") == "subagent" and parent:
        return True, _CODEX_META + ".thread_source"
    if kind is not None:
        return True, KIND_HEADERS[0] if headers.get(KIND_HEADERS[0]) else _CODEX_META + ".subagent_kind"
    if parent:
        return True, "parent-agent-id"
    return False, None
