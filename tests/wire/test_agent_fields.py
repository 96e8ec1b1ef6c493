"""Fields Claude Code and Codex send, one by one: mapped, kept for their own API, or dropped
with a counted diagnostic on translated routes (issue 12)."""

from __future__ import annotations

from typing import Any

from switchyard.wire import codec, diagnostics
from switchyard.wire.base import WireFormat

ANTHROPIC = codec(WireFormat.ANTHROPIC_MESSAGES)
CHAT = codec(WireFormat.OPENAI_CHAT)
RESPONSES = codec(WireFormat.OPENAI_RESPONSES)


def _claude_code(**fields: Any) -> dict[str, Any]:
    return {
        "model": "agent",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        **fields,
    }


def test_adaptive_thinking_and_effort_map_to_openai_reasoning() -> None:
    request = ANTHROPIC.decode_request(_claude_code())
    assert request.reasoning is not None and request.reasoning.enabled and request.reasoning.effort == "high"
    assert CHAT.encode_request(request, model="m", stream=False)["reasoning_effort"] == "high"
    assert RESPONSES.encode_request(request, model="m", stream=False)["reasoning"] == {"effort": "high"}
    top = ANTHROPIC.decode_request(_claude_code(output_config={"effort": "max"}))
    assert CHAT.encode_request(top, model="m", stream=False)["reasoning_effort"] == "xhigh"


def test_claude_code_fields_pass_through_to_anthropic_and_are_counted_elsewhere() -> None:
    request = ANTHROPIC.decode_request(_claude_code())
    same = ANTHROPIC.encode_request(request, model="m", stream=True)
    assert same["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert same["context_management"] == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    assert same["output_config"] == {"effort": "high"}
    diagnostics.reset()
    chat = CHAT.encode_request(request, model="m", stream=True)
    assert "context_management" not in chat and "output_config" not in chat and "thinking" not in chat
    assert diagnostics.counts()["anthropic_messages_to_openai_chat.fields_dropped"] == 1


def test_codex_fields_pass_through_to_responses_and_are_counted_elsewhere() -> None:
    body = {
        "model": "agent",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "client_metadata": {"session_id": "s"},
        "prompt_cache_key": "k",
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "text": {"verbosity": "low"},
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "tools": [
            {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}},
            {"type": "web_search"},
            {"type": "namespace", "name": "ns", "description": "d", "tools": []},
        ],
    }
    request = RESPONSES.decode_request(body)
    same = RESPONSES.encode_request(request, model="m", stream=False)
    for key in ("client_metadata", "prompt_cache_key", "include", "store", "text", "parallel_tool_calls"):
        assert same[key] == body[key], key
    assert same["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert [t["type"] for t in same["tools"]] == ["function", "web_search", "namespace"]
    diagnostics.reset()
    chat = CHAT.encode_request(request, model="m", stream=False)
    assert chat["prompt_cache_key"] == "k" and chat["reasoning_effort"] == "medium"
    assert chat["parallel_tool_calls"] is False and [t["function"]["name"] for t in chat["tools"]] == ["f"]
    assert not {"client_metadata", "include", "store", "text"} & set(chat)
    assert diagnostics.counts()["openai_responses_to_openai_chat.fields_dropped"] == 1
    anthropic = ANTHROPIC.encode_request(request, model="m", stream=False)
    assert not {"client_metadata", "include", "store", "text", "prompt_cache_key"} & set(anthropic)
    assert anthropic["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
