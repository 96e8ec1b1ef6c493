"""Anthropic message threads in the codecs: ``thread`` never reaches another format, a
``continue`` there is ``thread_not_found``, and that error has Anthropic's shape."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from switchyard.protocol.errors import ThreadNotFoundError
from switchyard.wire import codec, diagnostics


def _decoded(thread: dict[str, Any]) -> Any:
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "thread": thread}
    return codec("anthropic_messages").decode_request(body)


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses"])
def test_a_create_is_left_out_without_a_lossy_diagnostic(fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    diagnostics.reset()
    with caplog.at_level(logging.WARNING, logger="switchyard.wire"):
        body = codec(fmt).encode_request(_decoded({"type": "create"}), model="m", stream=False)
    assert "thread" not in body
    assert not [k for k in diagnostics.counts() if k.endswith("fields_dropped")], caplog.text


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses"])
def test_a_continue_cannot_reach_another_format(fmt: str) -> None:
    request = _decoded({"type": "continue", "previous_message_id": "msg_1"})
    with pytest.raises(ThreadNotFoundError) as caught:
        codec(fmt).encode_request(request, model="m", stream=False)
    assert caught.value.status == 404 and caught.value.code == "thread_not_found"


def test_the_same_format_keeps_the_thread() -> None:
    thread = {"type": "continue", "previous_message_id": "msg_1"}
    body = codec("anthropic_messages").encode_request(_decoded(thread), model="m", stream=False)
    assert body["thread"] == thread


def test_thread_not_found_is_encoded_as_anthropic_documents_it() -> None:
    error = ThreadNotFoundError("gone").info()
    assert codec("anthropic_messages").encode_error(error) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "gone", "details": {"error_code": "thread_not_found"}},
    }
    # Other codes stay out of `details` (the SDKs treat an unknown code as the bare type).
    plain = ThreadNotFoundError("x", code="model_not_found").info()
    assert "details" not in codec("anthropic_messages").encode_error(plain)["error"]
