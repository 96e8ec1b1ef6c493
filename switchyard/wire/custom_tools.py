"""Free-form (``custom``) tools on upstreams that only know JSON-argument tools.

Layer: ``wire`` — imports ``protocol`` only.

Codex declares ``apply_patch`` as a free-form tool: the model writes raw text (a patch), not a
JSON object. OpenAI Responses has such tools natively; Anthropic Messages and vLLM's Chat
Completions do not. For those upstreams a free-form tool is sent as a function tool with a
single string parameter ``input`` (the tool's grammar is appended to its description so the
model still knows the format), and every call the upstream makes to it is unwrapped again —
``{"input": "<patch>"}`` becomes the raw ``<patch>`` text — before the caller sees it. A caller
that declared a free-form tool therefore always gets ``custom_tool_call.input`` as raw text,
never a JSON wrapper.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson

from switchyard.protocol.messages import ToolCallPart
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import MessageStop, StreamError, StreamEvent, ToolCallDelta
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import diagnostics

PARAM = "input"
"""Name of the one string parameter a free-form tool gets as a function tool."""

_MAX_GRAMMAR = 8000


def as_function(tool: ToolDefinition) -> ToolDefinition:
    """The function-tool stand-in for a free-form tool."""
    description = tool.description or ""
    fmt = tool.format or {}
    definition = fmt.get("definition")
    if isinstance(definition, str) and definition:
        syntax = fmt.get("syntax") or "grammar"
        description += f"\n\nThe `{PARAM}` argument must follow this {syntax} grammar:\n{definition[:_MAX_GRAMMAR]}"
    description += f"\n\nPass the raw text as the string argument `{PARAM}`."
    return ToolDefinition(
        name=tool.name,
        description=description.strip(),
        parameters={
            "type": "object",
            "properties": {PARAM: {"type": "string", "description": "The raw free-form input."}},
            "required": [PARAM],
        },
        cache_control=tool.cache_control,
    )


def wrap(raw: str) -> str:
    """Raw free-form input as the JSON arguments of its function stand-in."""
    return orjson.dumps({PARAM: raw}).decode()


def unwrap(arguments: str) -> str:
    """The raw input inside the JSON arguments of a function stand-in.

    A model that ignored the schema (arguments not ``{"input": "…"}``) gets its arguments
    passed on as the raw text, reported as a diagnostic.
    """
    try:
        value: Any = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        inner = value.get(PARAM)
        if isinstance(inner, str):
            return inner
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and strings:
            return strings[0]
    diagnostics.report(
        "custom_tools.unexpected_arguments",
        "a free-form tool call did not carry {'input': str}; its arguments are passed on as raw text",
    )
    return arguments


def custom_names(tools: Iterable[ToolDefinition]) -> frozenset[str]:
    """Names of the free-form tools among ``tools``."""
    return frozenset(t.name for t in tools if t.kind == "custom")


def restore_response(response: ChatResponse, names: frozenset[str]) -> ChatResponse:
    """Turns calls to the function stand-ins of free-form tools back into free-form calls."""
    if not names:
        return response
    content = [
        ToolCallPart(id=p.id, name=p.name, arguments=unwrap(p.arguments), kind="custom")
        if isinstance(p, ToolCallPart) and p.kind == "function" and p.name in names
        else p
        for p in response.content
    ]
    return response.model_copy(update={"content": content})


async def restore_stream(events: AsyncIterator[StreamEvent], names: frozenset[str]) -> AsyncIterator[StreamEvent]:
    """Stream version of :func:`restore_response`.

    A free-form call's JSON fragments are held back until the call is complete (the next
    call starts or the turn ends) and then released as one raw-text fragment; every other
    event passes straight through.
    """
    held: dict[int, ToolCallDelta] = {}

    def release() -> list[StreamEvent]:
        out: list[StreamEvent] = [
            ToolCallDelta(index=i, id=d.id, name=d.name, arguments=unwrap(d.arguments), kind="custom")
            for i, d in sorted(held.items())
        ]
        held.clear()
        return out

    try:
        async for event in events:
            if isinstance(event, ToolCallDelta) and event.kind == "function":
                pending = held.get(event.index)
                if pending is not None:
                    pending.arguments += event.arguments
                    continue
                if event.name in names:
                    for done in release():
                        yield done
                    held[event.index] = event.model_copy()
                    continue
            if isinstance(event, ToolCallDelta | MessageStop | StreamError):
                for done in release():
                    yield done
            yield event
        for done in release():
            yield done
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
