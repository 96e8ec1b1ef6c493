"""Who is calling: headers first, in a fixed order, then the body, then an optional hash."""

from __future__ import annotations

import orjson
import pytest

from switchyard.engine.session import derived_session_key, first_message_hash, identify
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest

REQUEST = ChatRequest(
    model="r",
    messages=[Message.of("user", "fix the bug"), Message.of("assistant", "done"), Message.of("user", "thanks")],
    user="end-user",
    metadata={"session_id": "from-metadata"},
)
CODEX = orjson.dumps({"session_id": "codex-s", "thread_id": "codex-t", "parent_thread_id": "codex-p"}).decode()

ALL = {
    "x-switchyard-session-id": "sy",
    "x-claude-code-session-id": "cc",
    "x-session-id": "generic",
    "x-codex-turn-metadata": CODEX,
    "session-id": "bare",
}
ORDER = [
    ("x-switchyard-session-id", "sy"),
    ("x-claude-code-session-id", "cc"),
    ("x-session-id", "generic"),
    ("x-codex-turn-metadata", "codex-s"),
    ("session-id", "bare"),
]


@pytest.mark.parametrize("drop", range(len(ORDER)))
def test_session_header_order(drop: int) -> None:
    headers = {name: ALL[name] for name, _ in ORDER[drop:]}
    info = identify(headers, REQUEST)
    assert (info.source, info.session_id) == ORDER[drop]


def test_body_fields_then_hash() -> None:
    assert identify({}, REQUEST).session_id == "from-metadata"
    no_meta = REQUEST.model_copy(update={"metadata": None})
    assert (identify({}, no_meta).source, identify({}, no_meta).session_id) == ("user", "end-user")
    anonymous = no_meta.model_copy(update={"user": None})
    assert identify({}, anonymous).session_id is None
    hashed = identify({}, anonymous, hash_fallback=True)
    assert hashed.source == "first_message_hash"
    assert hashed.session_id == first_message_hash(anonymous)
    # Same first message → same session, whatever followed.
    later = anonymous.model_copy(update={"messages": [*anonymous.messages, Message.of("user", "more")]})
    assert identify({}, later, hash_fallback=True).session_id == hashed.session_id


def test_blank_headers_and_bad_codex_metadata_are_skipped() -> None:
    info = identify(
        {"x-switchyard-session-id": "  ", "x-codex-turn-metadata": "{not json", "x-session-id": " s "}, REQUEST
    )
    assert (info.source, info.session_id) == ("x-session-id", "s")
    assert identify({"x-codex-turn-metadata": "[1]"}, REQUEST).source == "metadata.session_id"


def test_agent_identity_and_key() -> None:
    info = identify({"x-codex-turn-metadata": CODEX}, REQUEST)
    assert (info.agent_id, info.parent_agent_id) == ("codex-t", "codex-p")
    assert info.key == "codex-s/codex-t"  # a sub-agent gets its own state slot
    info = identify(
        {
            "x-switchyard-session-id": "s",
            "x-switchyard-agent-id": "a",
            "x-claude-code-agent-id": "ignored",
            "x-claude-code-parent-agent-id": "p",
        },
        REQUEST,
    )
    assert (info.agent_id, info.parent_agent_id, info.key) == ("a", "p", "s/a")
    top = identify({"x-switchyard-session-id": "s", "x-switchyard-agent-id": "a"}, REQUEST)
    assert top.key == "s"  # the main agent (no parent) shares the session's slot


def test_turn_index_counts_assistant_turns() -> None:
    assert identify({}, REQUEST).turn_index == 1
    assert identify({}, ChatRequest(messages=[Message.of("user", "x")])).turn_index == 0


def test_prompt_cache_key_is_a_conversation_key_after_metadata_and_before_user() -> None:
    body = ChatRequest(messages=[Message.of("user", "x")], user="u-1", extra={"prompt_cache_key": "pck"})
    info = identify({}, body)
    assert (info.session_id, info.source) == ("pck", "prompt_cache_key")
    with_meta = body.model_copy(update={"metadata": {"session_id": "m"}})
    assert identify({}, with_meta).session_id == "m"
    assert identify({"x-session-id": "h"}, body).session_id == "h"


def test_conversation_without_identity_gets_a_derived_key() -> None:
    opening = [Message.of("system", "You are Hermes Agent."), Message.of("user", "write hello.txt")]
    first = ChatRequest(model="r", messages=opening)
    later = ChatRequest(
        model="r", messages=[*opening, Message.of("assistant", "done"), Message.of("user", "now cat it")]
    )
    info = identify({}, first, derive=True)
    assert info.source == "derived" and info.session_id == derived_session_key(first)
    assert info.session_id is not None and info.session_id.startswith("d:")
    assert identify({}, later, derive=True).session_id == info.session_id
    other_agent = ChatRequest(model="r", messages=[Message.of("system", "You are Qwen Code."), opening[1]])
    assert identify({}, other_agent, derive=True).session_id != info.session_id
    # Anything the caller says wins; the older first-message hash keeps its own key and source.
    assert identify({"x-session-id": "s1"}, first, derive=True).source == "x-session-id"
    assert identify({}, first, hash_fallback=True, derive=True).source == "first_message_hash"
    assert identify({}, first).session_id is None
    assert identify({}, ChatRequest(model="r", messages=[Message.of("system", "S")]), derive=True).session_id is None


@pytest.mark.parametrize("hash_fallback", [False, True])
@pytest.mark.parametrize("derive", [False, True])
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"metadata": {"session_id": "m-1"}},
        {"metadata": {"session_id": ""}, "prompt_cache_key": "ck"},
        {"user": "u-1"},
        {"user": "x" * 500},
    ],
)
def test_a_request_without_identity_headers_is_identified_as_by_the_full_lookup(
    body: dict[str, object], hash_fallback: bool, derive: bool
) -> None:
    # identify() skips its header probes when no identity header is present; a blank one (which
    # the probes ignore) takes the full path: both must agree on every field.
    messages = [
        Message.of("system", "be brief"),
        Message.of("user", "hello"),
        Message.of("assistant", "hi"),
        Message.of("user", "again"),
    ]
    fields = dict(body)
    cache_key = fields.pop("prompt_cache_key", None)
    extra = {"prompt_cache_key": cache_key} if cache_key else {}
    request = ChatRequest(model="r", messages=messages, extra=extra, **fields)  # type: ignore[arg-type]
    plain = {"content-type": "application/json", "user-agent": "sdk"}
    fast = identify(plain, request, hash_fallback=hash_fallback, derive=derive)
    full = identify({**plain, "x-session-id": " "}, request, hash_fallback=hash_fallback, derive=derive)
    assert fast == full
    assert fast.turn_index == 1


def test_a_derived_key_stays_the_key_earlier_versions_derived() -> None:
    # Sessions persist in the state store under this key: how the opening is hashed is part of
    # the stored format (the values were computed by the release before this test was written).
    from switchyard.engine.session import opening_key

    long_text = "x" * 3000 + "é"  # past the hashed head: its length and tail count too
    opening = [("system", "You are terse."), ("developer", long_text), ("user", "Fix the bug in app.py")]
    assert opening_key([*opening, ("assistant", "")]) == "d:fa1d79cd4b2e69fa1be8e6e8"
    assert opening_key([("system", ""), ("user", "hi")]) == "d:d2c34bc65d1f2566a495d3ab"
