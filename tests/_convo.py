"""Wire-neutral agent conversations for stage-router tests, rendered into each wire format.

A conversation is a list of steps; :func:`render` turns it into a request body of one wire
format and :func:`decode` runs that body through the format's codec into the IR, so every test
reads signals the way the router does in production. A format whose codec is not in this
build is skipped; when it lands, its tests run with no other change.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from switchyard.protocol.request import ChatRequest
from switchyard.wire import available_formats, codec


@dataclass
class Call:
    """One tool call and its result."""

    name: str
    args: dict[str, Any]
    result: str
    is_error: bool = False


@dataclass
class Turn:
    """An assistant turn: optional text, then tool calls (run in parallel) and their results."""

    calls: list[Call] = field(default_factory=list)
    text: str | None = None


Step = tuple[str, str] | Turn
"""``("system" | "user" | "assistant", text)`` or a :class:`Turn`."""


def bash(command: str, result: str, *, name: str = "Bash", key: str = "command") -> Turn:
    return Turn([Call(name, {key: command}, result)])


def tool(name: str, result: str = "ok", **args: Any) -> Turn:
    return Turn([Call(name, args, result)])


def _chat(steps: list[Step]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    n = 0
    for step in steps:
        if isinstance(step, tuple):
            messages.append({"role": step[0], "content": step[1]})
            continue
        ids = []
        for _ in step.calls:
            n += 1
            ids.append(f"call_{n}")
        msg: dict[str, Any] = {"role": "assistant", "content": step.text}
        if step.calls:
            msg["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                for i, c in zip(ids, step.calls, strict=True)
            ]
        messages.append(msg)
        for i, c in zip(ids, step.calls, strict=True):
            messages.append({"role": "tool", "tool_call_id": i, "content": c.result})
    return {"model": "agent", "messages": messages}


def _anthropic(steps: list[Step]) -> dict[str, Any]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    n = 0
    for step in steps:
        if isinstance(step, tuple):
            role, text = step
            if role == "system":
                system.append(text)
            else:
                messages.append({"role": role, "content": [{"type": "text", "text": text}]})
            continue
        blocks: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        results = []
        for c in step.calls:
            n += 1
            blocks.append({"type": "tool_use", "id": f"toolu_{n}", "name": c.name, "input": c.args})
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": c.result}
            if c.is_error:
                result["is_error"] = True
            results.append(result)
        messages.append({"role": "assistant", "content": blocks})
        if results:
            messages.append({"role": "user", "content": results})
    body: dict[str, Any] = {"model": "agent", "max_tokens": 1024, "messages": messages}
    if system:
        body["system"] = "\n".join(system)
    return body


def _responses(steps: list[Step]) -> dict[str, Any]:
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    n = 0
    for step in steps:
        if isinstance(step, tuple):
            role, text = step
            if role == "system":
                instructions.append(text)
            else:
                kind = "output_text" if role == "assistant" else "input_text"
                items.append({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})
            continue
        if step.text:
            items.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": step.text}]}
            )
        for c in step.calls:
            n += 1
            items.append(
                {"type": "function_call", "call_id": f"fc_{n}", "name": c.name, "arguments": json.dumps(c.args)}
            )
        for k, c in enumerate(step.calls, start=n - len(step.calls) + 1):
            items.append({"type": "function_call_output", "call_id": f"fc_{k}", "output": c.result})
    body: dict[str, Any] = {"model": "agent", "input": items}
    if instructions:
        body["instructions"] = "\n".join(instructions)
    return body


RENDERERS: dict[str, Callable[[list[Step]], dict[str, Any]]] = {
    "openai_chat": _chat,
    "anthropic_messages": _anthropic,
    "openai_responses": _responses,
}

WIRE_FORMATS = [
    pytest.param(
        fmt,
        marks=pytest.mark.skipif(fmt not in available_formats(), reason=f"no {fmt} codec in this build yet"),
        id=fmt,
    )
    for fmt in RENDERERS
]
"""Parametrize over this: every wire format, skipped until its codec exists."""


def render(steps: list[Step], fmt: str = "openai_chat") -> dict[str, Any]:
    return RENDERERS[fmt](steps)


def decode(steps: list[Step], fmt: str = "openai_chat") -> ChatRequest:
    return codec(fmt).decode_request(render(steps, fmt))
