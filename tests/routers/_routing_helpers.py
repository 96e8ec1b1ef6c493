"""Helpers shared by the router unit tests (contexts, requests, verdicts)."""

from __future__ import annotations

import json
from typing import Any

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import RouteContext
from switchyard.state.memory import MemoryStore

TARGETS = ("weak", "strong", "judge", "mid")


def context(
    store: MemoryStore | None = None, *, session: str | None = "s1", turn: int = 0, agent: str | None = None
) -> RouteContext:
    """A route context whose ``store`` is the session's slot (as the engine hands it over)."""
    return RouteContext(
        route="r",
        session=SessionInfo(session_id=session, agent_id=agent, turn_index=turn),
        targets={name: TargetInfo(name=name, model=f"m-{name}") for name in TARGETS},
        store=store if store is not None else MemoryStore(),
    )


def user(text: str) -> Message:
    return Message.of("user", text)


def assistant_call(call_id: str, name: str = "bash", args: str = '{"cmd": "ls"}', text: str = "") -> Message:
    parts: list[Any] = [TextPart(text=text)] if text else []
    parts.append(ToolCallPart(id=call_id, name=name, arguments=args))
    return Message(role="assistant", content=parts)


def tool_result(call_id: str, text: str) -> Message:
    return Message(role="tool", content=[ToolResultPart(call_id=call_id, content=[TextPart(text=text)])])


def anthropic_tool_result(call_id: str, text: str) -> Message:
    """A tool result the Anthropic way: inside a user message."""
    return Message(role="user", content=[ToolResultPart(call_id=call_id, content=[TextPart(text=text)])])


def request(*messages: Message, system: str | None = "You are Claude Code, a harness prompt.") -> ChatRequest:
    msgs = ([Message.of("system", system)] if system else []) + list(messages)
    return ChatRequest(model="r", messages=msgs)


def capability(p: float, rule: str = "SUP-1", boundary: str = "supported") -> str:
    return json.dumps({"crux": "the crux", "primary_rule": rule, "capability_boundary": boundary, "p_solve": p})


def escalate(flag: bool, reason: str = "evidence") -> str:
    return json.dumps({"reason": reason, "escalate": flag})


def hand_back(flag: bool) -> str:
    return json.dumps({"reason": "evidence", "hand_back": flag})


def judge_view(req: ChatRequest) -> str:
    """The user-message text of a judge request."""
    return req.messages[-1].text
