"""OpenAI Responses response objects, usage and errors ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

import time
from typing import Any

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.messages import ContentPart, ReasoningPart, TextPart, ToolCallPart
from switchyard.protocol.response import ChatResponse, StopReason, Usage
from switchyard.wire import diagnostics, reasoning
from switchyard.wire.ids import new_id
from switchyard.wire.openai_errors import decode_error as decode_error  # Responses answers errors as Chat does
from switchyard.wire.openai_errors import encode_error as encode_error

FORMAT = "openai_responses"

INCOMPLETE_REASONS: dict[StopReason, str] = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def decode_usage(raw: Any) -> Usage:
    """Responses ``usage`` → IR (``input_tokens`` already includes cached tokens)."""
    if not isinstance(raw, dict):
        return Usage()
    inp = raw.get("input_tokens_details") or {}
    out = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_read_tokens=_int(inp.get("cached_tokens")) if isinstance(inp, dict) else 0,
        cache_creation_tokens=_int(inp.get("cache_write_tokens")) if isinstance(inp, dict) else 0,
        reasoning_tokens=_int(out.get("reasoning_tokens")) if isinstance(out, dict) else 0,
    )


def encode_usage(usage: Usage) -> dict[str, Any]:
    """IR usage → Responses ``usage``."""
    details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_creation_tokens:
        details["cache_write_tokens"] = usage.cache_creation_tokens
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": details,
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def stop_from_status(body: dict[str, Any], has_calls: bool) -> StopReason:
    """The IR stop reason of a finished response object."""
    status = body.get("status")
    if status == "incomplete":
        details = body.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        return "content_filter" if reason == "content_filter" else "max_tokens"
    if status == "failed":
        return "error"
    return "tool_use" if has_calls else "end_turn"


def decode_item(item: dict[str, Any]) -> list[ContentPart]:
    """One output item → IR parts."""
    kind = item.get("type")
    if kind == "message":
        parts: list[ContentPart] = []
        for c in item.get("content") or []:
            if isinstance(c, dict) and c.get("type") == "output_text":
                parts.append(TextPart(text=str(c.get("text") or "")))
            elif isinstance(c, dict) and c.get("type") == "refusal":
                parts.append(TextPart(text=str(c.get("refusal") or "")))
        return parts
    if kind == "function_call":
        return [
            ToolCallPart(
                id=str(item.get("call_id") or ""),
                name=str(item.get("name") or ""),
                arguments=str(item.get("arguments") or "{}"),
            )
        ]
    if kind == "custom_tool_call":
        return [
            ToolCallPart(
                id=str(item.get("call_id") or ""),
                name=str(item.get("name") or ""),
                arguments=str(item.get("input") or ""),
                kind="custom",
            )
        ]
    if kind == "reasoning":
        return [reasoning_part(item)]
    diagnostics.report("openai_responses.output_item_dropped", f"output item {kind!r} is not translated")
    return []


def reasoning_part(item: dict[str, Any]) -> ReasoningPart:
    """A ``reasoning`` output item → IR."""
    texts = [c.get("text") for c in item.get("content") or [] if isinstance(c, dict)]
    summary = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
    text = "".join(t for t in texts if isinstance(t, str)) or "\n\n".join(s for s in summary if isinstance(s, str))
    encrypted = item.get("encrypted_content")
    if isinstance(encrypted, str) and reasoning.is_token(encrypted):
        restored = reasoning.unpack(encrypted, text)
        if restored is not None:
            return restored
    item_id = item.get("id") if isinstance(item.get("id"), str) else None
    return ReasoningPart(
        text=text,
        encrypted=encrypted if isinstance(encrypted, str) and encrypted else None,
        item_id=item_id,
        provider=FORMAT,
    )


def decode_response(body: dict[str, Any]) -> ChatResponse:
    """Decodes a ``response`` object.

    Raises:
        UpstreamProtocolError: The body has no output list.
    """
    output = body.get("output")
    if not isinstance(output, list):
        raise UpstreamProtocolError("upstream Responses answer has no output list")
    parts: list[ContentPart] = []
    for item in output:
        if isinstance(item, dict):
            parts.extend(decode_item(item))
    has_calls = any(isinstance(p, ToolCallPart) for p in parts)
    created = body.get("created_at")
    return ChatResponse(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content=parts,
        stop_reason=stop_from_status(body, has_calls),
        usage=decode_usage(body.get("usage")),
        created=int(created) if isinstance(created, int | float) else 0,
    )


def reasoning_item(part: ReasoningPart, item_id: str) -> dict[str, Any]:
    """An IR reasoning part as the output item a Responses caller sees.

    OpenAI's own reasoning keeps its summary and ``encrypted_content``. Reasoning from any other
    provider (Claude's thinking, vLLM's ``reasoning``) becomes the item's ``summary`` (one
    ``summary_text`` part: what Responses clients render — Codex, the Agents SDK and the AI SDK
    show a reasoning item's summary), keeps its full text as ``reasoning_text`` content too, and
    carries a Switchyard carrier token as ``encrypted_content`` (so a stateless client like Codex
    can replay it to its issuer).
    """
    if part.provider == FORMAT:
        item: dict[str, Any] = {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
        }
        if part.encrypted is not None:
            item["encrypted_content"] = part.encrypted
        return item
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
        "content": [{"type": "reasoning_text", "text": part.text}] if part.text else [],
        "encrypted_content": reasoning.pack(part),
    }


def message_item(text: str, item_id: str, status: str = "completed") -> dict[str, Any]:
    """An assistant ``message`` output item holding ``text``."""
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def call_item(call: ToolCallPart, item_id: str, status: str = "completed") -> dict[str, Any]:
    """A ``function_call`` / ``custom_tool_call`` output item."""
    if call.kind == "custom":
        return {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.id,
            "name": call.name,
            "input": call.arguments,
        }
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }


def output_items(content: list[ContentPart]) -> list[dict[str, Any]]:
    """IR content → output items (each run of text becomes one message item)."""
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            items.append(message_item("".join(text), new_id("msg_")))
            text.clear()

    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                text.append(part.text)
        elif isinstance(part, ReasoningPart):
            flush()
            item_id = part.item_id if part.provider == FORMAT and part.item_id else new_id("rs_")
            items.append(reasoning_item(part, item_id))
        elif isinstance(part, ToolCallPart):
            flush()
            items.append(call_item(part, new_id("ctc_" if part.kind == "custom" else "fc_")))
    flush()
    return items


def response_object(
    *,
    response_id: str,
    model: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    stop: StopReason | None = None,
    error: ErrorInfo | None = None,
) -> dict[str, Any]:
    """A ``response`` object (also the payload of ``response.created`` / ``.completed`` …)."""
    incomplete = INCOMPLETE_REASONS.get(stop) if stop is not None and status == "incomplete" else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "usage": encode_usage(usage) if usage is not None else None,
        "error": {"code": error.code or error.type, "message": error.message} if error is not None else None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "top_p": None,
        "tool_choice": "auto",
        "tools": [],
    }


def status_for(stop: StopReason) -> str:
    """Responses ``status`` of a finished IR turn."""
    return "incomplete" if stop in INCOMPLETE_REASONS else "completed"


def encode_response(response: ChatResponse, *, model: str) -> dict[str, Any]:
    """Encodes an IR response as a ``response`` object."""
    response_id = response.id if response.id.startswith("resp_") else new_id("resp_")
    return response_object(
        response_id=response_id,
        model=model,
        created=response.created or int(time.time()),
        status=status_for(response.stop_reason),
        output=output_items(response.content),
        usage=response.usage,
        stop=response.stop_reason,
    )
