"""The fakes accept what the providers accept and reject what they reject (docs/fakes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.testing import fake_anthropic, fake_responses
from switchyard.testing.fake_common import FakeModel, output_limit_problem, signature_for
from switchyard.testing.fake_upstream import vllm_problem

LOOSE = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}


def _messages(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}], **fields}


def test_anthropic_mid_conversation_system_needs_the_beta_flag() -> None:
    body = _messages(messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": "skills"}])
    with pytest.raises(fake_anthropic.Invalid, match=r"messages\.1\.role"):
        fake_anthropic.validate(body)
    fake_anthropic.validate(body, {"anthropic-beta": "claude-code-20250219,mid-conversation-tool-changes-2026-07-01"})
    fake_anthropic.validate(body, {"anthropic-beta": "mid-conversation-system-2026-04-07"})
    empty = _messages(messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": ""}])
    with pytest.raises(fake_anthropic.Invalid, match="non-empty"):
        fake_anthropic.validate(empty, {"anthropic-beta": "mid-conversation-system-2026-04-07"})


def test_anthropic_accepts_claude_code_fields_and_rejects_unknown_ones() -> None:
    fake_anthropic.validate(
        _messages(
            thinking={"type": "adaptive"},
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            output_config={"effort": "high"},
        )
    )
    with pytest.raises(fake_anthropic.Invalid, match="Extra inputs are not permitted"):
        fake_anthropic.validate(_messages(stream_options={"include_usage": True}))


def _tool_loop(first_block: dict[str, Any], then: list[dict[str, Any]]) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    return _messages(
        thinking={"type": "adaptive"},
        messages=[
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [first_block, use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
            *then,
        ],
    )


def test_anthropic_thinking_first_only_while_the_tool_loop_is_open() -> None:
    text = {"type": "text", "text": "calling"}
    with pytest.raises(fake_anthropic.Invalid, match="must start with a thinking block"):
        fake_anthropic.validate(_tool_loop(text, []))
    fake_anthropic.validate(_tool_loop({"type": "thinking", "thinking": "t", "signature": signature_for("t")}, []))
    # Once the loop closed with a plain answer, earlier turns' thinking may be left out.
    closed = [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next task"}]
    fake_anthropic.validate(_tool_loop(text, closed))


def test_responses_strict_is_opt_in() -> None:
    base = {"model": "m", "input": "hi", "client_metadata": {"session_id": "s"}}
    fake_responses.validate({**base, "tools": [{"type": "function", "name": "f", "parameters": LOOSE}]})
    fake_responses.validate(
        {**base, "tools": [{"type": "function", "name": "f", "parameters": LOOSE, "strict": False}]}
    )
    with pytest.raises(fake_responses.Invalid, match="additionalProperties"):
        fake_responses.validate(
            {**base, "tools": [{"type": "function", "name": "f", "parameters": LOOSE, "strict": True}]}
        )
    with pytest.raises(fake_responses.Invalid, match="Unknown parameter"):
        fake_responses.validate({**base, "messages": []})


def test_chat_rejects_an_empty_tool_calls_array() -> None:
    body = {"model": "m", "messages": [{"role": "assistant", "content": "x", "tool_calls": []}]}
    assert "empty array" in (vllm_problem(body) or "")
    assert vllm_problem({"model": "m", "messages": [{"role": "assistant", "content": "x"}]}) is None


def test_output_limits() -> None:
    limited = FakeModel("m", max_output_tokens=4096)
    assert output_limit_problem({"max_tokens": 8192}, limited, 10) is not None
    assert output_limit_problem({"max_tokens": 4096}, limited, 10) is None
    windowed = FakeModel("m", context_window=8192, enforce_window=True)
    assert "maximum context length is 8192" in (output_limit_problem({"max_tokens": 8000}, windowed, 500) or "")
    assert output_limit_problem({"max_tokens": 8000}, FakeModel("m", context_window=8192), 500) is None
