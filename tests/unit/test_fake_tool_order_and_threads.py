"""The fakes' ordering rules for tool messages and the Anthropic fake's message threads
(docs/fakes.md cites the provider behaviour behind each)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from switchyard.testing import fake_anthropic, fake_responses
from switchyard.testing.fake_chat import tool_order_problem
from switchyard.testing.fake_common import FakeModel, Turn
from switchyard.testing.fake_threads import BETA, ThreadError, Threads
from switchyard.testing.fake_upstream import FakeUpstream

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_chat_tool_message_must_answer_the_preceding_tool_calls() -> None:
    lone = {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}
    assert "must be a response to a preceeding message with 'tool_calls'" in (tool_order_problem(lone) or "")
    after_text = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "no calls"},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ]
    }
    assert "messages.[2].role" in (tool_order_problem(after_text) or "")
    wrong_id = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_9", "content": "ok"},
        ]
    }
    assert "'call_9' not found in 'tool_calls'" in (tool_order_problem(wrong_id) or "")
    two_results = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
            {"role": "user", "content": "next"},
        ]
    }
    assert tool_order_problem(two_results) is None


def test_responses_function_call_output_needs_its_call() -> None:
    body = {"model": "m", "input": [{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]}
    with pytest.raises(fake_responses.Invalid, match="No tool call found for function call output"):
        fake_responses.validate(body)


def test_anthropic_tool_result_must_follow_a_tool_use() -> None:
    body = {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}],
    }
    with pytest.raises(fake_anthropic.Invalid, match="corresponding `tool_use`"):
        fake_anthropic.validate(body)


def _body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "messages": messages, **fields}


def test_threads_continue_from_a_kept_reply_once() -> None:
    threads = Threads()
    beta = {"anthropic-beta": f"other-beta,{BETA}"}
    first, created = threads.expand(
        _body([{"role": "user", "content": "hi"}], system="be brief", thread={"type": "create"}), beta
    )
    assert created == "" and "thread" not in first
    threads.keep(first, {"id": "msg_1", "content": [{"type": "text", "text": "hello"}]}, created)
    more, previous = threads.expand(
        _body([{"role": "user", "content": "again"}], thread={"type": "continue", "previous_message_id": "msg_1"}),
        beta,
    )
    assert previous == "msg_1" and more["system"] == "be brief"
    assert [m["role"] for m in more["messages"]] == ["user", "assistant", "user"]
    threads.keep(more, {"id": "msg_2", "content": [{"type": "text", "text": "again"}]}, previous)
    with pytest.raises(ThreadError) as again:
        threads.expand(_body([], thread={"type": "continue", "previous_message_id": "msg_1"}), beta)
    assert again.value.status == 400 and again.value.code == "thread_already_continued"
    with pytest.raises(ThreadError) as unknown:
        threads.expand(_body([], thread={"type": "continue", "previous_message_id": "msg_x"}), beta)
    assert unknown.value.status == 404 and unknown.value.body()["error"] == {
        "type": "not_found_error",
        "message": unknown.value.body()["error"]["message"],
        "details": {"error_code": "thread_not_found"},
    }
    with pytest.raises(ThreadError, match="system"):
        threads.expand(
            _body([], system="x", thread={"type": "continue", "previous_message_id": "msg_2"}),
            beta,
        )
    with pytest.raises(ThreadError, match="Extra inputs"):
        threads.expand(_body([], thread={"type": "create"}), {})


async def test_the_fake_server_answers_a_thread_continue_with_the_whole_history() -> None:
    seen: list[list[str]] = []

    def brain(body: dict[str, Any], model: FakeModel) -> Turn:
        seen.append([str(m.get("content")) for m in body["messages"]])
        return Turn(text=f"turn {len(seen)}")

    app = FakeUpstream([FakeModel("m", brain=brain)])
    headers = {"anthropic-beta": BETA}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fake") as client:
        first = await client.post(
            "/v1/messages",
            json=_body([{"role": "user", "content": "question"}], thread={"type": "create"}),
            headers=headers,
        )
        assert first.status_code == 200, first.text
        msg_id = first.json()["id"]
        cont = _body(
            [{"role": "user", "content": "follow-up"}],
            thread={"type": "continue", "previous_message_id": msg_id},
            stream=True,
        )
        second = await client.post("/v1/messages", json=cont, headers=headers)
        assert second.status_code == 200 and "event: message_start" in second.text
        lost = await client.post(
            "/v1/messages",
            json=_body(
                [{"role": "user", "content": "x"}], thread={"type": "continue", "previous_message_id": "msg_gone"}
            ),
            headers=headers,
        )
    assert seen[1] == ["question", "turn 1", "follow-up"]
    assert lost.status_code == 404
    assert lost.json()["error"]["details"] == {"error_code": "thread_not_found"}
