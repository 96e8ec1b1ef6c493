"""A caller field whose content the decoder carried into the IR (structured output, effort,
thinking) is not reported as dropped on another format; only what really was lost is."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from switchyard.wire import codec, diagnostics

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}


def _dropped(origin: str, body: dict[str, Any], fmt: str, caplog: pytest.LogCaptureFixture) -> str:
    diagnostics.reset()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="switchyard.wire"):
        out = codec(fmt).encode_request(codec(origin).decode_request(body), model="m", stream=False)
    assert out
    return " ".join(r.getMessage() for r in caplog.records if "fields_dropped" in r.getMessage())


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic_messages"])
def test_responses_text_format_is_carried(fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    body = {
        "model": "m",
        "input": "hi",
        "text": {"format": {"type": "json_schema", "name": "r", "schema": SCHEMA, "strict": True}},
    }
    assert _dropped("openai_responses", body, fmt, caplog) == ""
    body["text"]["verbosity"] = "low"
    lost = _dropped("openai_responses", body, fmt, caplog)
    assert "text.verbosity" in lost and "'text'" not in lost


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses"])
def test_anthropic_output_config_and_thinking_are_carried(fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    body = {
        "model": "m",
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": SCHEMA}},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert _dropped("anthropic_messages", body, fmt, caplog) == ""
    body["output_config"]["task_budget"] = {"type": "tokens", "total": 10}
    lost = _dropped("anthropic_messages", body, fmt, caplog)
    assert "output_config.task_budget" in lost and "'output_config'" not in lost


def test_the_earlier_output_format_field_is_carried_too(caplog: pytest.LogCaptureFixture) -> None:
    body = {
        "model": "m",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi"}],
        "output_format": {"type": "json_schema", "schema": SCHEMA},
    }
    assert _dropped("anthropic_messages", body, "openai_chat", caplog) == ""
    out = codec("openai_chat").encode_request(codec("anthropic_messages").decode_request(body), model="m", stream=False)
    assert out["response_format"]["json_schema"]["schema"] == SCHEMA
