"""The real SDKs as callers, behind one small interface, for the translation integration tests.

``ask`` sends one turn through the proxy with the caller's own SDK (streamed or not) and
returns what the caller saw in a format-neutral shape; ``follow_up`` answers the tool calls of
a previous turn and asks again, exercising tool-result translation in every direction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

CALLERS = ("openai_chat", "anthropic_messages", "openai_responses")

LOOKUP_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "Look up.", "parameters": LOOKUP_SCHEMA}}
]
ANTHROPIC_TOOLS = [{"name": "lookup", "description": "Look up.", "input_schema": LOOKUP_SCHEMA}]
RESPONSES_TOOLS = [
    {"type": "function", "name": "lookup", "description": "Look up.", "parameters": LOOKUP_SCHEMA, "strict": False}
]


@dataclass
class Seen:
    """What a caller got back."""

    text: str = ""
    calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, parsed args)
    input_tokens: int = 0
    output_tokens: int = 0
    stop: str = ""
    reasoning: str = ""
    raw: Any = None  # the SDK object, for follow-ups


def _chat_seen(c: Any) -> Seen:
    msg = c.choices[0].message
    calls = [(t.id, t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls or []]
    usage = c.usage
    reasoning = (msg.model_extra or {}).get("reasoning") or ""
    return Seen(
        text=msg.content or "",
        calls=calls,
        input_tokens=usage.prompt_tokens if usage else 0,
        output_tokens=usage.completion_tokens if usage else 0,
        stop=c.choices[0].finish_reason,
        reasoning=reasoning,
        raw=c,
    )


def _anthropic_seen(m: Any) -> Seen:
    text = "".join(b.text for b in m.content if b.type == "text")
    thinking = "".join(b.thinking for b in m.content if b.type == "thinking")
    calls = [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"]
    u = m.usage
    total_in = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    return Seen(text, calls, total_in, u.output_tokens, m.stop_reason, thinking, m)


def _responses_seen(r: Any) -> Seen:
    calls = [(o.call_id, o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"]
    calls += [(o.call_id, o.name, o.input) for o in r.output if o.type == "custom_tool_call"]
    reasoning = "".join(
        "".join(s.text for s in o.summary) + "".join(c.text for c in o.content or [])
        for o in r.output
        if o.type == "reasoning"
    )
    usage = r.usage
    return Seen(
        r.output_text,
        calls,
        usage.input_tokens if usage else 0,
        usage.output_tokens if usage else 0,
        r.status,
        reasoning,
        r,
    )


def ask(
    caller: str,
    clients: dict[str, Any],
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: bool = False,
    stream: bool = False,
    **extra: Any,
) -> Seen:
    """One turn through the proxy; ``messages`` are in the caller's own format."""
    if caller == "openai_chat":
        client: openai.OpenAI = clients["openai"]
        kwargs: dict[str, Any] = {"model": model, "messages": messages, **extra}
        if tools:
            kwargs["tools"] = CHAT_TOOLS
        if stream:
            with client.chat.completions.stream(stream_options={"include_usage": True}, **kwargs) as s:
                for _ in s:
                    pass
                return _chat_seen(s.get_final_completion())
        return _chat_seen(client.chat.completions.create(**kwargs))
    if caller == "anthropic_messages":
        aclient: anthropic.Anthropic = clients["anthropic"]
        kwargs = {"model": model, "max_tokens": 2000, "messages": messages, **extra}
        if tools:
            kwargs["tools"] = ANTHROPIC_TOOLS
        if stream:
            with aclient.messages.stream(**kwargs) as s:
                for _ in s:
                    pass
                return _anthropic_seen(s.get_final_message())
        return _anthropic_seen(aclient.messages.create(**kwargs))
    rclient: openai.OpenAI = clients["openai"]
    kwargs = {"model": model, "input": messages, **extra}
    if tools:
        kwargs["tools"] = RESPONSES_TOOLS
    if stream:
        with rclient.responses.stream(**kwargs) as s:
            for _ in s:
                pass
            return _responses_seen(s.get_final_response())
    return _responses_seen(rclient.responses.create(**kwargs))


def user(caller: str, text: str) -> dict[str, Any]:
    """A user message in the caller's format."""
    return {"role": "user", "content": text}


def follow_up(caller: str, history: list[dict[str, Any]], seen: Seen, results: list[str]) -> list[dict[str, Any]]:
    """``history`` plus the assistant turn ``seen`` and one result per call, in the caller's format."""
    out = list(history)
    if caller == "openai_chat":
        msg = seen.raw.choices[0].message
        out.append(msg.model_dump(exclude_none=True, exclude_unset=True))
        for (call_id, _, _), result in zip(seen.calls, results, strict=True):
            out.append({"role": "tool", "tool_call_id": call_id, "content": result})
    elif caller == "anthropic_messages":
        out.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in seen.raw.content]})
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": result}
                    for (call_id, _, _), result in zip(seen.calls, results, strict=True)
                ],
            }
        )
    else:
        out.extend(item.model_dump(exclude_none=True) for item in seen.raw.output)
        for (call_id, _, _), result in zip(seen.calls, results, strict=True):
            out.append({"type": "function_call_output", "call_id": call_id, "output": result})
    return out
