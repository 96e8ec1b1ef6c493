"""OpenAI Chat response and error codec: golden fixtures, finish reasons, usage, envelopes."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.messages import TextPart, ToolCallPart
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.wire.openai_chat import CODEC
from switchyard.wire.openai_chat.response import decode_usage, encode_usage

ROUTE = "agent"


@pytest.mark.golden("openai_chat/responses")
def test_response_golden(golden: Any) -> None:
    response = CODEC.decode_response(golden["body"])
    golden.check("ir", golden.dump(response))
    encoded = CODEC.encode_response(response, model=ROUTE)
    golden.check("encoded", encoded)
    # The real SDK accepts what we send back to callers.
    from openai.types.chat import ChatCompletion

    ChatCompletion.model_validate(encoded)
    expected = response.model_copy(update={"model": ROUTE})
    if expected.stop_reason == "stop_sequence":
        # Chat's own response has no slot for the matched stop string (only vLLM adds one).
        expected = expected.model_copy(update={"stop_reason": "end_turn", "stop_sequence": None})
    assert CODEC.decode_response(encoded) == expected


@pytest.mark.parametrize(
    ("finish", "stop_reason", "expected", "back"),
    [
        ("stop", None, "end_turn", "stop"),
        ("length", None, "max_tokens", "length"),
        ("tool_calls", None, "tool_use", "tool_calls"),
        ("function_call", None, "tool_use", "tool_calls"),
        ("content_filter", None, "content_filter", "content_filter"),
        ("stop", "###", "stop_sequence", "stop"),
        ("stop", 128009, "end_turn", "stop"),  # vLLM reports a stop *token id* as an int
        (None, None, "end_turn", "stop"),
        ("something_new", None, "end_turn", "stop"),
    ],
)
def test_finish_reasons(finish: Any, stop_reason: Any, expected: str, back: str) -> None:
    body = {
        "id": "x",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "t"},
                "finish_reason": finish,
                "stop_reason": stop_reason,
            }
        ],
    }
    response = CODEC.decode_response(body)
    assert response.stop_reason == expected
    assert response.stop_sequence == (stop_reason if expected == "stop_sequence" else None)
    assert CODEC.encode_response(response, model="m")["choices"][0]["finish_reason"] == back


def test_usage_details_round_trip() -> None:
    raw = {
        "prompt_tokens": 1000,
        "completion_tokens": 300,
        "total_tokens": 1300,
        "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 150, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 200, "accepted_prediction_tokens": 0},
    }
    usage = decode_usage(raw)
    assert usage == Usage(
        input_tokens=1000, output_tokens=300, cache_read_tokens=800, cache_creation_tokens=150, reasoning_tokens=200
    )
    assert usage.uncached_input_tokens == 50
    assert encode_usage(usage) == {
        "prompt_tokens": 1000,
        "completion_tokens": 300,
        "total_tokens": 1300,
        "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 150},
        "completion_tokens_details": {"reasoning_tokens": 200},
    }
    # Null details (some servers) and no usage at all.
    assert decode_usage({"prompt_tokens": 3, "prompt_tokens_details": None}) == Usage(input_tokens=3)
    assert decode_usage(None) == Usage()


def test_encode_tool_only_answer_has_null_content() -> None:
    response = ChatResponse(
        id="r",
        content=[ToolCallPart(id="c", name="f", arguments="{}")],
        stop_reason="tool_use",
        created=1,
    )
    message = CODEC.encode_response(response, model="m")["choices"][0]["message"]
    assert message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }


def test_encode_fills_id_and_created_when_missing() -> None:
    body = CODEC.encode_response(ChatResponse(id="", content=[TextPart(text="x")]), model="m")
    assert body["id"] and body["created"] > 1_600_000_000 and body["object"] == "chat.completion"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"choices": []},
        {"choices": ["x"]},
        {"choices": [{"message": "not an object"}]},
        {"choices": [{"message": {"tool_calls": ["x"]}}]},
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}},
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens_details": [1]}},
    ],
)
def test_malformed_responses_are_protocol_errors(body: dict[str, Any]) -> None:
    with pytest.raises(UpstreamProtocolError):
        CODEC.decode_response(body)


# -- error envelopes ------------------------------------------------------------------------------


def test_error_envelope_encode() -> None:
    info = ErrorInfo(status=404, type="not_found_error", code="model_not_found", message="no route", param="model")
    assert CODEC.encode_error(info) == {
        "error": {"message": "no route", "type": "not_found_error", "param": "model", "code": "model_not_found"}
    }


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        (
            {
                "error": {
                    "message": "bad key",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            401,
            ErrorInfo(status=401, type="invalid_request_error", code="invalid_api_key", message="bad key"),
        ),
        # vLLM: class-like type and the HTTP status as an integer code.
        (
            {"error": {"message": "too long", "type": "BadRequestError", "param": "messages", "code": 400}},
            400,
            ErrorInfo(status=400, type="BadRequestError", code="400", message="too long", param="messages"),
        ),
        ({"error": "plain words"}, 500, ErrorInfo(status=500, message="plain words")),
        ({"detail": "Not Found"}, 404, ErrorInfo(status=404, message="{'detail': 'Not Found'}")),
        ("<html>oops</html>", 502, ErrorInfo(status=502, message="<html>oops</html>")),
        ({"error": {}}, 503, ErrorInfo(status=503, message="")),
    ],
)
def test_error_envelope_decode(body: Any, status: int, expected: ErrorInfo) -> None:
    assert CODEC.decode_error(body, status) == expected


def test_error_envelope_round_trip() -> None:
    info = ErrorInfo(status=429, type="rate_limit_error", code="rate_limit_exceeded", message="slow down")
    assert CODEC.decode_error(CODEC.encode_error(info), 429) == info
