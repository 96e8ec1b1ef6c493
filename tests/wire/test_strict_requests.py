"""Every decoder refuses wrongly typed or out-of-range common fields (issue 16, item 4)."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.protocol.errors import InvalidRequestError
from switchyard.wire import codec, strict
from switchyard.wire.base import WireFormat

_USER = {"role": "user", "content": "hi"}


def _body(fmt: WireFormat, **extra: Any) -> dict[str, Any]:
    if fmt is WireFormat.OPENAI_RESPONSES:
        return {"model": "m", "input": [_USER], **extra}
    base: dict[str, Any] = {"model": "m", "messages": [_USER]}
    if fmt is WireFormat.ANTHROPIC_MESSAGES:
        base["max_tokens"] = 64
    return {**base, **extra}


_TOKENS = {
    WireFormat.OPENAI_CHAT: "max_tokens",
    WireFormat.ANTHROPIC_MESSAGES: "max_tokens",
    WireFormat.OPENAI_RESPONSES: "max_output_tokens",
}
_MESSAGES = {
    WireFormat.OPENAI_CHAT: "messages",
    WireFormat.ANTHROPIC_MESSAGES: "messages",
    WireFormat.OPENAI_RESPONSES: "input",
}
FORMATS = list(_TOKENS)


def _refused(fmt: WireFormat, body: dict[str, Any]) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        codec(fmt).decode_request(body)
    return info.value


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", ["false", "true", 0, 1, [], {}])
def test_stream_must_be_a_boolean(fmt: WireFormat, value: Any) -> None:
    err = _refused(fmt, _body(fmt, stream=value))
    assert err.status == 400 and err.param == "stream"


@pytest.mark.parametrize("fmt", FORMATS)
def test_real_booleans_and_null_still_decode(fmt: WireFormat) -> None:
    assert codec(fmt).decode_request(_body(fmt, stream=True)).stream is True
    assert codec(fmt).decode_request(_body(fmt, stream=False)).stream is False
    assert codec(fmt).decode_request(_body(fmt, stream=None)).stream is False


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", [-1, 0, strict.MAX_TOKENS_CEILING + 1, 10**18, 1.5, "100", True])
def test_token_limits_in_range(fmt: WireFormat, value: Any) -> None:
    key = _TOKENS[fmt]
    err = _refused(fmt, _body(fmt, **{key: value}))
    assert err.param == key


def test_chat_max_completion_tokens_checked_too() -> None:
    err = _refused(WireFormat.OPENAI_CHAT, _body(WireFormat.OPENAI_CHAT, max_completion_tokens=-5))
    assert err.param == "max_completion_tokens"


@pytest.mark.parametrize("fmt", FORMATS)
def test_sane_limits_pass(fmt: WireFormat) -> None:
    req = codec(fmt).decode_request(_body(fmt, **{_TOKENS[fmt]: 128_000}, temperature=1.7, top_p=1))
    assert req.max_tokens == 128_000


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("key", "value"), [("temperature", -0.1), ("temperature", "hot"), ("top_p", 1.5)])
def test_sampling_ranges(fmt: WireFormat, key: str, value: Any) -> None:
    assert _refused(fmt, _body(fmt, **{key: value})).param == key


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_messages_refused(fmt: WireFormat) -> None:
    key = _MESSAGES[fmt]
    assert _refused(fmt, _body(fmt, **{key: []})).param == key


def test_responses_continuation_may_add_nothing() -> None:
    body = {"model": "m", "input": [], "previous_response_id": "resp_1"}
    assert codec(WireFormat.OPENAI_RESPONSES).decode_request(body).messages == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_operator_cap_on_message_count(fmt: WireFormat) -> None:
    key = _MESSAGES[fmt]
    many = [_USER, {"role": "assistant", "content": "ok"}] * 3
    token = strict.max_messages.set(5)
    try:
        err = _refused(fmt, _body(fmt, **{key: many}))
        assert err.param == key and "at most 5" in err.message
        assert codec(fmt).decode_request(_body(fmt, **{key: many[:5]}))
    finally:
        strict.max_messages.reset(token)
