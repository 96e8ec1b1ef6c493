"""The scripted tool loop picks each real agent's own tools (from the recorded requests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from switchyard.testing import FakeModel, fake_anthropic, fake_responses
from switchyard.testing.agent_loop import ToolLoop

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
LOOP = ToolLoop(path="/w/proof.txt", content="the content")
MODEL = FakeModel("m", reasoning="hm")


def chat_view(name: str) -> dict[str, Any]:
    """A recorded request as the fake upstream's brains see it."""
    doc = json.loads((FIXTURES / name).read_text())
    body = doc["body"]
    if doc["path"].endswith("/messages"):
        return fake_anthropic.view(body)
    if doc["path"].endswith("/responses"):
        return fake_responses.view(body)
    return dict(body)


@pytest.mark.parametrize(
    ("fixture", "tool", "args"),
    [
        ("claude-code-messages-3.json", "Write", {"file_path": "/w/proof.txt", "content": "the content\n"}),
        ("qwen-code-chat-3.json", "write_file", {"file_path": "/w/proof.txt", "content": "the content\n"}),
        ("hermes-chat-2.json", "write_file", {"path": "/w/proof.txt", "content": "the content\n"}),
        ("codex-responses-2.json", "exec_command", {"cmd": "printf '%s\\n' 'the content' > /w/proof.txt"}),
        ("langchain-anthropic-messages-1.json", "write_file", {"path": "/w/proof.txt", "content": "the content\n"}),
    ],
)
def test_first_turn_calls_the_agents_own_write_tool(fixture: str, tool: str, args: dict[str, Any]) -> None:
    turn = LOOP.turn(chat_view(fixture), MODEL)
    assert turn.tool_calls == [(tool, args)]
    assert turn.reasoning == "hm" and not turn.text


@pytest.mark.parametrize(
    ("fixture", "tool", "args"),
    [
        ("claude-code-messages-4.json", "Bash", {"command": "cat /w/proof.txt"}),
        ("codex-responses-3.json", "exec_command", {"cmd": "cat /w/proof.txt"}),
        ("hermes-chat-3.json", "terminal", {"command": "cat /w/proof.txt"}),
        ("smolagents-chat-2.json", "shell", {"command": "cat /w/proof.txt"}),
    ],
)
def test_second_turn_reads_the_file_with_the_shell(fixture: str, tool: str, args: dict[str, Any]) -> None:
    assert LOOP.turn(chat_view(fixture), MODEL).tool_calls == [(tool, args)]


def _after_two_results(shown: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "content": "ok"},
            {"role": "tool", "content": shown},
        ],
        "tools": tools,
    }


BASH = [{"type": "function", "function": {"name": "Bash", "parameters": {"properties": {"command": {}}}}}]


def test_final_answer_reports_what_the_shell_printed() -> None:
    turn = LOOP.turn(_after_two_results("the content\n", BASH), MODEL)
    assert turn.text == "ALL DONE. m read: the content" and not turn.tool_calls


def test_final_answer_says_when_the_loop_broke() -> None:
    assert LOOP.turn(_after_two_results("No such file", BASH), MODEL).text.startswith("LOOP BROKEN.")


def test_frameworks_that_finish_with_a_tool_get_the_answer_there() -> None:
    final = {"type": "function", "function": {"name": "final_answer", "parameters": {"properties": {"answer": {}}}}}
    turn = LOOP.turn(_after_two_results("the content", [*BASH, final]), MODEL)
    assert turn.tool_calls == [("final_answer", {"answer": "ALL DONE. m read: the content"})]


def test_smolagents_observations_count_as_tool_results() -> None:
    body = chat_view("smolagents-chat-3.json")
    turn = LOOP.turn(body, MODEL)
    assert turn.tool_calls and turn.tool_calls[0][0] == "final_answer"


def test_side_calls_without_tools_get_text() -> None:
    turn = LOOP.turn({"messages": [{"role": "user", "content": "title?"}]}, MODEL)
    assert turn.text == "[m] switchyard tool loop" and not turn.tool_calls


def test_array_commands_get_an_argv() -> None:
    shell = {
        "type": "function",
        "function": {"name": "shell", "parameters": {"properties": {"command": {"type": "array"}}}},
    }
    body = {"messages": [{"role": "user", "content": "go"}], "tools": [shell]}
    name, args = LOOP.turn(body, MODEL).tool_calls[0]
    assert name == "shell" and isinstance(args, dict)
    assert args["command"][:2] == ["bash", "-lc"] and "printf" in args["command"][2]
