"""``type: plan_execute`` over recorded Claude Code and Codex traffic (tests/fixtures/agents).

The recorded requests are decoded by the real codecs; variants (a plan-mode reminder, a
``TodoWrite``/``update_plan`` call, failing tool results, a compaction summary) are built from
them by editing the decoded conversation the way the agents lay those turns out.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.protocol.tools import ToolChoice, ToolDefinition
from switchyard.routers.base import RouteContext
from switchyard.routers.plan_execute import PlanExecuteSpec
from switchyard.routers.plan_execute.router import STATE_KEY
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec
from switchyard.wire.base import WireFormat

Rig = Any
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
FORMATS = {"/v1/messages": WireFormat.ANTHROPIC_MESSAGES, "/v1/responses": WireFormat.OPENAI_RESPONSES}


def recorded(name: str) -> tuple[dict[str, Any], WireFormat]:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    return data, FORMATS[data["path"]]


def decoded(name: str) -> ChatRequest:
    data, fmt = recorded(name)
    return codec(fmt).decode_request(data["body"])


def router(**keys: Any) -> Any:
    spec = PlanExecuteSpec.model_validate(
        {"type": "plan_execute", "capable": "capable", "efficient": "efficient", **keys}
    )
    return spec.build(None)  # type: ignore[arg-type]


def ctx(store: MemoryStore | None = None) -> RouteContext:
    return RouteContext(
        route="agent", session=SessionInfo(), targets={}, store=MemoryStore() if store is None else store
    )


async def decide(request: ChatRequest, store: MemoryStore | None = None, **keys: Any) -> Any:
    async def no_call(*_: Any) -> Any:
        raise AssertionError("plan_execute makes no model calls")

    return await router(**keys).route(request, ctx(store), no_call)


@pytest.mark.parametrize(
    ("fixture", "source", "first"),
    [
        ("claude-code-messages-1", "plan", "capable"),  # the user's request: the plan is written
        ("claude-code-messages-2", "plan", "capable"),
        ("claude-code-messages-4", "execute", "efficient"),  # Write's result is back: execute
        ("claude-code-messages-5", "execute", "efficient"),
        ("codex-responses-1", "plan", "capable"),
        ("codex-responses-3", "execute", "efficient"),
        ("codex-responses-4", "execute", "efficient"),
    ],
)
async def test_recorded_turns(fixture: str, source: str, first: str) -> None:
    decision = await decide(decoded(fixture))
    assert (decision.source, decision.candidates[0]) == (source, first), decision.reason


def with_reminder(request: ChatRequest, text: str) -> ChatRequest:
    out = request.model_copy(deep=True)
    newest = next(m for m in reversed(out.messages) if m.role == "user")
    newest.content.append(TextPart(text=text))
    return out


async def test_claude_code_plan_mode_keeps_tool_turns_on_the_planner() -> None:
    # Claude Code's plan-mode reminder rides in the user message beside the tool results.
    reminder = (
        "<system-reminder>\nPlan mode is active. The user indicated that they do not want you to execute yet.\n"
        "</system-reminder>"
    )
    decision = await decide(with_reminder(decoded("claude-code-messages-4"), reminder))
    assert decision.source == "plan" and decision.candidates[0] == "capable"
    assert decision.details["plan_execute"]["why"] == "plan_mode"


async def test_a_plan_mode_tool_in_the_tool_set() -> None:
    request = decoded("claude-code-messages-4")
    request = request.model_copy(update={"tools": [*request.tools, ToolDefinition(name="ExitPlanMode")]})
    assert (await decide(request)).source == "execute"  # off by default
    assert (await decide(request, plan_mode_tools=["ExitPlanMode"])).source == "plan"


def tool_turn(request: ChatRequest, name: str, arguments: dict[str, Any], result: str) -> ChatRequest:
    """``request`` plus one assistant tool call and its result, as the agent would send it next."""
    out = request.model_copy(deep=True)
    n = len(out.messages)
    out.messages.append(
        Message(role="assistant", content=[ToolCallPart(id=f"t{n}", name=name, arguments=json.dumps(arguments))])
    )
    out.messages.append(
        Message(role="user", content=[ToolResultPart(call_id=f"t{n}", content=[TextPart(text=result)])])
    )
    return out


TODOS = {"todos": [{"content": "write hello.txt", "status": "pending"}, {"content": "check it", "status": "pending"}]}


async def test_todowrite_that_changes_the_plan_replans_but_ticking_items_off_executes() -> None:
    base = decoded("claude-code-messages-4")
    first = tool_turn(base, "TodoWrite", TODOS, "Todos have been modified successfully")
    assert (await decide(first)).source == "plan"  # a new plan
    ticked = copy.deepcopy(TODOS)
    ticked["todos"][0]["status"] = "completed"
    second = tool_turn(first, "TodoWrite", ticked, "Todos have been modified successfully")
    assert (await decide(second)).source == "execute"  # only a status changed
    grown = copy.deepcopy(ticked)
    grown["todos"].append({"content": "also update README", "status": "pending"})
    third = tool_turn(second, "TodoWrite", grown, "Todos have been modified successfully")
    decision = await decide(third)
    assert decision.source == "plan" and decision.details["plan_execute"]["why"] == "plan_changed"


async def test_codex_update_plan() -> None:
    base = decoded("codex-responses-4")
    plan = {"explanation": "two steps", "plan": [{"step": "write proof.txt", "status": "in_progress"}]}
    planned = tool_turn(base, "update_plan", plan, "Plan updated")
    assert (await decide(planned)).source == "plan"
    forced = base.model_copy(update={"tool_choice": ToolChoice(mode="tool", name="update_plan")})
    assert (await decide(forced)).details["plan_execute"]["why"] == "plan_tool_forced"


async def test_the_planning_turns_own_plan_is_not_a_change() -> None:
    store = MemoryStore()
    request = decoded("claude-code-messages-1")
    assert (await decide(request, store)).source == "plan"
    planned_at = (await ctx(store).store.get(STATE_KEY))["planned_at"]
    assert planned_at == len(request.messages)
    # The capable model answered the planning turn with TodoWrite: its result comes back next.
    following = tool_turn(request, "TodoWrite", TODOS, "Todos have been modified successfully")
    assert (await decide(following, store)).source == "execute"


TRACEBACK = "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'yaml'"


async def test_sustained_trouble_replans_once_then_counts_afresh() -> None:
    store = MemoryStore()
    request = decoded("codex-responses-4")
    for i in range(2):
        request = tool_turn(request, "exec_command", {"cmd": f"python x.py #{i}"}, TRACEBACK)
        assert (await decide(request, store)).source == "execute"  # one or two failures: keep executing
    request = tool_turn(request, "exec_command", {"cmd": "python x.py #3"}, TRACEBACK)
    decision = await decide(request, store)
    assert decision.source == "replan" and decision.candidates[0] == "capable"
    assert decision.details["plan_execute"]["detail"] == "3 failed tool results in a row"
    request = tool_turn(request, "exec_command", {"cmd": "python x.py #4"}, TRACEBACK)
    assert (await decide(request, store)).source == "execute"  # the new plan gets its own three tries
    request = tool_turn(request, "exec_command", {"cmd": "ls"}, "x.py")
    assert (await decide(request, store)).source == "execute"


async def test_soft_failures_count_only_when_configured() -> None:
    request = decoded("claude-code-messages-5")
    for i in range(3):
        request = tool_turn(request, "Bash", {"command": f"make {i}"}, "Process exited with code 1")
    assert (await decide(request)).source == "execute"
    assert (await decide(request, replan={"after_failures": 3, "severity": 0.3})).source == "replan"


async def test_a_compaction_summary_replans() -> None:
    request = decoded("claude-code-messages-1").model_copy(deep=True)
    request.messages.append(
        Message.of("user", "This session is being continued from a previous conversation that ran out of context.")
    )
    decision = await decide(request)
    assert (decision.source, decision.details["plan_execute"]["why"]) == ("replan", "compacted")


async def test_tool_less_side_calls_can_be_left_to_the_executor() -> None:
    request = ChatRequest(model="agent", messages=[Message.of("user", "Write a 5-word title for this chat")])
    assert (await decide(request)).source == "plan"
    assert (await decide(request, new_request="with_tools")).source == "execute"
    assert (await decide(decoded("codex-responses-1"), new_request="with_tools")).source == "plan"
    assert (await decide(decoded("codex-responses-1"), new_request="never")).source == "execute"


def test_bad_patterns_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="plan_patterns"):
        router(plan_patterns=["(unclosed"])


ROUTES = {"agent": {"type": "plan_execute", "capable": "capable", "efficient": "efficient"}}
TARGETS = {
    "efficient": {"client": "up", "model": "m-efficient"},
    "capable": {"client": "up", "model": "m-capable"},
}


async def test_a_recorded_claude_code_session_through_the_engine(rig: Callable[..., Rig]) -> None:
    """The recorded bodies in their own wire format, with Claude Code's session header: the plan
    goes to the capable target, the tool loop to the efficient one, which sees the plan."""
    from switchyard.protocol.response import ChatResponse

    plan_text = "Plan: 1. write hello.txt 2. verify it"
    r = rig(
        {
            "capable": [ChatResponse(id="p", content=[TextPart(text=plan_text)])],
            "efficient": [ChatResponse(id="e", content=[TextPart(text="done")])],
        },
        targets=TARGETS,
        routes=ROUTES,
    )
    sources = []
    for name in ("claude-code-messages-1", "claude-code-messages-4", "claude-code-messages-5"):
        data, fmt = recorded(name)
        body = {**data["body"], "model": "agent", "stream": False}
        if name != "claude-code-messages-1":  # the plan the capable model wrote is in the history
            body["messages"] = [body["messages"][0], {"role": "assistant", "content": plan_text}, *body["messages"][1:]]
        reply = await r.engine.handle(fmt, json.dumps(body).encode(), data["headers"], path=data["path"])
        assert reply.status == 200, reply.body
        sources.append((reply.headers["x-switchyard-decision-source"], reply.headers["x-switchyard-selected-model"]))
    assert sources == [("plan", "capable"), ("execute", "efficient"), ("execute", "efficient")]
    _, target, sent, _ = r.backend.calls[-1]
    assert target == "efficient" and any(plan_text in m.text for m in sent.messages)
