"""Anthropic Messages responses, usage and errors ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from typing import Any

import orjson

from switchyard.protocol.errors import ErrorInfo, UpstreamProtocolError
from switchyard.protocol.messages import ContentPart, ReasoningPart, TextPart, ToolCallPart
from switchyard.protocol.response import ChatResponse, StopReason, Usage
from switchyard.wire import custom_tools, diagnostics, reasoning
from switchyard.wire.ids import anthropic_tool_id, new_id

FORMAT = "anthropic_messages"

STOP_FROM_ANTHROPIC: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "pause_turn": "pause_turn",
    "refusal": "content_filter",
    "model_context_window_exceeded": "max_tokens",
}

STOP_TO_ANTHROPIC: dict[StopReason, str] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "pause_turn": "pause_turn",
    "content_filter": "refusal",
    "error": "end_turn",
}

# Anthropic error ``type`` by HTTP status (https://docs.anthropic.com/en/api/errors).
_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_STATUS_FOR_TYPE = {v: k for k, v in _ERROR_TYPES.items()}


def stop_reason(raw: Any) -> StopReason:
    """Anthropic ``stop_reason`` → IR."""
    return STOP_FROM_ANTHROPIC.get(str(raw), "end_turn") if raw is not None else "end_turn"


def decode_usage(raw: Any) -> Usage:
    """Anthropic ``usage`` → IR (whose ``input_tokens`` counts the whole prompt)."""
    if not isinstance(raw, dict):
        return Usage()
    uncached = _int(raw.get("input_tokens"))
    read = _int(raw.get("cache_read_input_tokens"))
    created = _int(raw.get("cache_creation_input_tokens"))
    details = raw.get("output_tokens_details")
    thinking = _int(details.get("thinking_tokens")) if isinstance(details, dict) else 0
    return Usage(
        input_tokens=uncached + read + created,
        output_tokens=_int(raw.get("output_tokens")),
        cache_read_tokens=read,
        cache_creation_tokens=created,
        reasoning_tokens=thinking,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def encode_usage(usage: Usage) -> dict[str, Any]:
    """IR usage → Anthropic ``usage`` (``input_tokens`` is the uncached part only)."""
    out: dict[str, Any] = {
        "input_tokens": usage.uncached_input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }
    if usage.reasoning_tokens:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out


def decode_block(block: dict[str, Any]) -> ContentPart | None:
    """One output content block → IR part (``None`` for blocks that are not translated)."""
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=str(block.get("text") or ""))
    if kind == "thinking":
        signature = block.get("signature")
        return ReasoningPart(
            text=str(block.get("thinking") or ""),
            signature=signature if isinstance(signature, str) and signature else None,
            provider=FORMAT,
        )
    if kind == "redacted_thinking":
        return ReasoningPart(redacted=str(block.get("data") or ""), provider=FORMAT)
    if kind == "tool_use":
        args = block.get("input")
        return ToolCallPart(
            id=str(block.get("id") or ""),
            name=str(block.get("name") or ""),
            arguments=orjson.dumps(args if args is not None else {}).decode(),
        )
    diagnostics.report("anthropic_messages.output_block_dropped", f"output block {kind!r} is not translated")
    return None


def decode_response(body: dict[str, Any]) -> ChatResponse:
    """Decodes a ``message`` object.

    Raises:
        UpstreamProtocolError: The body is not a message.
    """
    content = body.get("content")
    if body.get("type") == "error" or not isinstance(content, list):
        raise UpstreamProtocolError("upstream Anthropic answer has no content list")
    parts = [p for b in content if isinstance(b, dict) and (p := decode_block(b)) is not None]
    stop = stop_reason(body.get("stop_reason"))
    sequence = body.get("stop_sequence")
    return ChatResponse(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content=parts,
        stop_reason=stop,
        stop_sequence=sequence if isinstance(sequence, str) else None,
        usage=decode_usage(body.get("usage")),
    )


def reasoning_block(part: ReasoningPart) -> dict[str, Any]:
    """An IR reasoning part as the block an Anthropic caller sees.

    Anthropic's own blocks are returned as issued; reasoning from any other provider becomes a
    ``thinking`` block whose ``signature`` is a Switchyard carrier token (so the caller can send
    it back and it reaches its issuer again, but never Anthropic).
    """
    if part.provider == FORMAT:
        if part.redacted is not None:
            return {"type": "redacted_thinking", "data": part.redacted}
        return {"type": "thinking", "thinking": part.text, "signature": part.signature or ""}
    return {"type": "thinking", "thinking": part.text, "signature": reasoning.pack(part)}


def tool_input(call: ToolCallPart) -> Any:
    """The ``input`` object of a ``tool_use`` block for an IR call."""
    if call.kind == "custom":
        return {custom_tools.PARAM: call.arguments}
    try:
        return orjson.loads(call.arguments) if call.arguments else {}
    except orjson.JSONDecodeError:
        diagnostics.report(
            "anthropic_messages.invalid_tool_arguments",
            "the model produced tool arguments that are not JSON; sent as {}",
        )
        return {}


def encode_response(response: ChatResponse, *, model: str) -> dict[str, Any]:
    """Encodes an IR response as a ``message`` object."""
    blocks: list[dict[str, Any]] = []
    for part in response.content:
        if isinstance(part, ReasoningPart):
            blocks.append(reasoning_block(part))
        elif isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {"type": "tool_use", "id": anthropic_tool_id(part.id), "name": part.name, "input": tool_input(part)}
            )
    msg_id = response.id if response.id.startswith("msg_") else new_id("msg_")
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": STOP_TO_ANTHROPIC[response.stop_reason],
        "stop_sequence": response.stop_sequence if response.stop_reason == "stop_sequence" else None,
        "usage": encode_usage(response.usage),
    }


def error_type(status: int) -> str:
    """Anthropic error ``type`` for an HTTP status."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


DETAIL_CODES = frozenset({"thread_not_found"})
"""Error codes Anthropic documents under ``error.details.error_code`` that the proxy itself
answers; the SDKs branch on them (``thread_not_found`` makes a thread replay the conversation)."""


def encode_error(error: ErrorInfo, *, details: bool = True) -> dict[str, Any]:
    """An Anthropic error envelope; ``type`` follows the status (400 → invalid_request_error …).

    A code in :data:`DETAIL_CODES` goes into ``error.details.error_code``, where the Anthropic
    SDKs read it — in an answer's body; a stream's ``error`` event (``details=False``) has none.
    """
    body: dict[str, Any] = {"type": error_type(error.status), "message": error.message}
    if details and error.code in DETAIL_CODES:
        body["details"] = {"error_code": error.code}
    return {"type": "error", "error": body}


def decode_error(body: Any, status: int) -> ErrorInfo:
    """Reads an Anthropic error envelope."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        kind = str(err.get("type") or error_type(status))
        return ErrorInfo(status=status, type=kind, code=kind, message=str(err.get("message") or ""))
    return ErrorInfo(status=status, message=str(body)[:500])


def status_for_type(kind: str, default: int = 500) -> int:
    """HTTP status of an Anthropic error ``type`` (for in-stream ``error`` events)."""
    return _STATUS_FOR_TYPE.get(kind, default)
