"""OpenAI Chat Completions responses and errors ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import time
from typing import Any

from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.messages import ContentPart, ReasoningPart, TextPart, ToolCallPart
from switchyard.protocol.response import ChatResponse, StopReason, Usage
from switchyard.wire import diagnostics
from switchyard.wire.openai_errors import decode_error as decode_error  # the codec's, shared with Responses
from switchyard.wire.openai_errors import encode_error as encode_error

FINISH_TO_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
    "error": "error",
}

STOP_TO_FINISH: dict[StopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
}


def stop_reason(finish: Any, matched: Any = None) -> StopReason:
    """Maps ``finish_reason`` (plus vLLM's matched ``stop_reason`` string) to the IR."""
    if finish == "stop" and isinstance(matched, str) and matched:
        return "stop_sequence"
    return FINISH_TO_STOP.get(str(finish), "end_turn") if finish is not None else "end_turn"


def decode_usage(raw: Any) -> Usage:
    """Chat ``usage`` → IR usage."""
    if not isinstance(raw, dict):
        return Usage()
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=int(prompt_details.get("cached_tokens") or 0),
        cache_creation_tokens=int(prompt_details.get("cache_write_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def encode_usage(usage: Usage) -> dict[str, Any]:
    """IR usage → Chat ``usage``."""
    out: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cache_read_tokens or usage.cache_creation_tokens:
        details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
        if usage.cache_creation_tokens:
            details["cache_write_tokens"] = usage.cache_creation_tokens
        out["prompt_tokens_details"] = details
    if usage.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def decode_response(body: dict[str, Any]) -> ChatResponse:
    """Decodes a ``chat.completion`` object.

    Raises:
        UpstreamProtocolError: The body has no usable choice or is malformed.
    """
    try:
        return _decode_response(body)
    except UpstreamProtocolError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise UpstreamProtocolError(f"malformed upstream chat completion: {type(exc).__name__}: {exc}") from exc


def _decode_response(body: dict[str, Any]) -> ChatResponse:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise UpstreamProtocolError("upstream chat completion has no choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    parts: list[ContentPart] = []
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(text=reasoning))
    content = msg.get("content")
    if isinstance(content, str) and content:
        parts.append(TextPart(text=content))
    elif isinstance(content, list):
        parts.extend(TextPart(text=str(p.get("text", ""))) for p in content if isinstance(p, dict))
    if isinstance(msg.get("refusal"), str) and msg["refusal"]:
        parts.append(TextPart(text=msg["refusal"]))
    for call in msg.get("tool_calls") or []:
        if call.get("type") == "custom":
            spec = call.get("custom") or {}
            parts.append(
                ToolCallPart(
                    id=str(call.get("id", "")),
                    name=str(spec.get("name", "")),
                    arguments=str(spec.get("input", "")),
                    kind="custom",
                )
            )
        else:
            fn = call.get("function") or {}
            parts.append(
                ToolCallPart(
                    id=str(call.get("id", "")), name=str(fn.get("name", "")), arguments=str(fn.get("arguments") or "{}")
                )
            )
    stop = stop_reason(choice.get("finish_reason"), choice.get("stop_reason"))
    return ChatResponse(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content=parts,
        stop_reason=stop,
        stop_sequence=choice.get("stop_reason") if stop == "stop_sequence" else None,
        usage=decode_usage(body.get("usage")),
        created=int(body.get("created") or 0),
    )


def encode_tool_calls(calls: list[ToolCallPart]) -> list[dict[str, Any]]:
    """IR tool calls → Chat ``tool_calls``."""
    out: list[dict[str, Any]] = []
    for call in calls:
        if call.kind == "custom":
            out.append({"id": call.id, "type": "custom", "custom": {"name": call.name, "input": call.arguments}})
        else:
            out.append(
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            )
    return out


def encode_response(response: ChatResponse, *, model: str) -> dict[str, Any]:
    """Encodes an IR response as a ``chat.completion`` object."""
    calls = response.tool_calls
    if any(isinstance(p, ReasoningPart) and (p.signature or p.encrypted or p.redacted) for p in response.content):
        diagnostics.report(
            "openai_chat.reasoning_signature_dropped",
            "Chat has no field for reasoning signatures/encrypted reasoning; only the text is returned",
        )
    message = assistant_message(response.text, encode_tool_calls(calls) if calls else [], response.reasoning)
    finish = STOP_TO_FINISH[response.stop_reason]
    return completion(response.id, response.created, model, message, finish, encode_usage(response.usage))


def assistant_message(text: str, tool_calls: list[dict[str, Any]], reasoning: str = "") -> dict[str, Any]:
    """A reply's ``message``: ``content`` is null only beside tool calls with no text."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not tool_calls else None}
    if reasoning:
        message["reasoning"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def completion(
    id: str, created: int, model: str, message: dict[str, Any], finish_reason: str, usage: dict[str, Any]
) -> dict[str, Any]:
    """The ``chat.completion`` envelope (an id and a creation time of our own when the answer had none)."""
    return {
        "id": id or "chatcmpl-switchyard",
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": usage,
    }
