"""IR → Anthropic Messages request bodies (the encoder; the decoder is :mod:`.request`).

Layer: ``wire`` — imports ``protocol`` only.

See :mod:`switchyard.wire.anthropic_messages.request` for the mapping notes of both directions.
"""

from __future__ import annotations

from typing import Any

import orjson

from switchyard.protocol.messages import (
    ContentPart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import custom_tools, diagnostics, reasoning
from switchyard.wire.anthropic_messages.request import FORMAT
from switchyard.wire.anthropic_messages.thinking import apply_thinking
from switchyard.wire.extras import extras_for
from switchyard.wire.ids import anthropic_tool_id

DEFAULT_MAX_TOKENS = 16384
"""``max_tokens`` sent to Anthropic when the caller gave none (Anthropic requires the field).

16384 fits every current Claude model's output limit and leaves room for long tool calls such
as file edits; set ``extra_body: {max_tokens: N}`` on a target to choose another default.
"""

MAX_CACHE_BREAKPOINTS = 4


def encode_image(part: ImagePart) -> dict[str, Any]:
    """IR image → Anthropic ``image`` block (``data:`` URIs become base64 sources)."""
    if part.detail is not None and part.detail != "auto":
        diagnostics.report(
            "anthropic_messages.image_detail_dropped", "OpenAI's image detail hint has no Anthropic field"
        )
    if part.data is not None:
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data}
    else:
        source = {"type": "url", "url": part.url or ""}
    block: dict[str, Any] = {"type": "image", "source": source}
    if part.cache_control is not None:
        block["cache_control"] = part.cache_control
    return block


def _text(part: TextPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": part.text}
    if part.cache_control is not None:
        block["cache_control"] = part.cache_control
    return block


def _plain_blocks(parts: list[TextPart | ImagePart]) -> list[dict[str, Any]]:
    return [_text(p) if isinstance(p, TextPart) else encode_image(p) for p in parts if not _empty_text(p)]


def _empty_text(part: ContentPart) -> bool:
    return isinstance(part, TextPart) and not part.text


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": anthropic_tool_id(part.call_id)}
    if any(isinstance(c, ImagePart) or c.cache_control is not None for c in part.content):
        block["content"] = _plain_blocks(part.content)
    else:
        block["content"] = part.text
    if part.is_error:
        block["is_error"] = True
    if part.cache_control is not None:
        block["cache_control"] = part.cache_control
    return block


def _tool_input(call: ToolCallPart) -> dict[str, Any]:
    if call.kind == "custom":
        return {custom_tools.PARAM: call.arguments}
    try:
        value = orjson.loads(call.arguments) if call.arguments else {}
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    diagnostics.report(
        "anthropic_messages.tool_arguments_not_object",
        "tool call arguments in the history are not a JSON object; sent as {}",
    )
    return {}


def _reasoning_block(part: ReasoningPart) -> dict[str, Any] | None:
    if not reasoning.native_for(part, FORMAT):
        diagnostics.report(
            "anthropic_messages.foreign_reasoning_dropped",
            "reasoning not issued by Anthropic is not sent to Anthropic (its signature check would fail)",
        )
        return None
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature is None:
        diagnostics.report("anthropic_messages.unsigned_thinking_dropped", "unsigned thinking block dropped")
        return None
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _assistant_blocks(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, ReasoningPart):
            block = _reasoning_block(part)
            if block is not None:
                blocks.append(block)
        elif isinstance(part, TextPart):
            if part.text:
                blocks.append(_text(part))
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {"type": "tool_use", "id": anthropic_tool_id(part.id), "name": part.name, "input": _tool_input(part)}
            )
        elif isinstance(part, ImagePart):
            diagnostics.report("anthropic_messages.assistant_image_dropped", "images in assistant turns dropped")
    return blocks


def _user_blocks(msg: Message) -> list[dict[str, Any]]:
    results = [_tool_result(p) for p in msg.content if isinstance(p, ToolResultPart)]
    plain = [p for p in msg.content if isinstance(p, TextPart | ImagePart)]
    return results + _plain_blocks(plain)


def _system_blocks(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append(_text(part))
        else:
            diagnostics.report("anthropic_messages.system_non_text_dropped", "non-text system content dropped")
    return blocks


def encode_messages(
    messages: list[Message], *, inline_system: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """IR messages → (Anthropic ``system`` blocks, alternating ``messages``).

    Args:
        messages: The conversation.
        inline_system: Keep system messages after the conversation start at their position, as
            ``{"role": "system"}`` entries (the caller spoke Anthropic and used the
            mid-conversation system beta, whose header is forwarded). Otherwise they are merged
            into the top-level ``system``, which every Anthropic endpoint accepts.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role in ("system", "developer"):
            if turns and inline_system and msg.role == "system":
                blocks = _system_blocks(msg)
                if blocks:
                    turns.append({"role": "system", "content": blocks})
                continue
            if turns:
                diagnostics.report(
                    "anthropic_messages.system_merged",
                    "a system/developer message after the conversation start was merged into the top-level system",
                )
            system.extend(_system_blocks(msg))
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _assistant_blocks(msg) if role == "assistant" else _user_blocks(msg)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            prev = turns[-1]["content"]
            if role == "user":
                # Tool results must lead a user turn, in the order the calls were answered.
                merged = prev + blocks
                results = [b for b in merged if b["type"] == "tool_result"]
                turns[-1]["content"] = results + [b for b in merged if b["type"] != "tool_result"]
            else:
                prev.extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _limit_cache_breakpoints(body: dict[str, Any]) -> None:
    blocks: list[dict[str, Any]] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    for turn in body["messages"]:
        for block in turn["content"]:
            blocks.append(block)
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                blocks.extend(block["content"])
    marked = [b for b in blocks if "cache_control" in b]
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        diagnostics.report(
            "anthropic_messages.cache_breakpoints_trimmed",
            f"Anthropic allows {MAX_CACHE_BREAKPOINTS} cache_control markers; only the last ones were kept",
        )
        for block in marked[:-MAX_CACHE_BREAKPOINTS]:
            del block["cache_control"]


def encode_tool(tool: ToolDefinition, *, native: bool = False) -> dict[str, Any]:
    """IR tool → Anthropic custom tool (free-form tools become a one-string-parameter tool).

    Args:
        tool: The tool.
        native: The caller spoke Anthropic: its own extra tool keys go back unchanged.
    """
    if tool.kind == "custom":
        diagnostics.report(
            "anthropic_messages.custom_tool_as_function",
            "free-form tool sent as a tool with one string parameter; calls are unwrapped to raw text",
        )
        tool = custom_tools.as_function(tool)
    schema = dict(tool.parameters) if tool.parameters is not None else {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = schema
    if tool.strict:
        out["strict"] = True
    if tool.cache_control is not None:
        out["cache_control"] = tool.cache_control
    if native and tool.native:
        out.update({k: v for k, v in tool.native.items() if k not in out})
    return out


def _tool_choice(request: ChatRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    out: dict[str, Any] | None = None
    if choice is not None:
        if choice.mode == "required":
            out = {"type": "any"}
        elif choice.mode == "tool":
            out = {"type": "tool", "name": choice.name}
        else:
            out = {"type": choice.mode}
    if request.parallel_tool_calls is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _output_config(request: ChatRequest, extra: dict[str, Any]) -> dict[str, Any] | None:
    raw = extra.get("output_config")
    config: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    fmt = request.response_format
    if isinstance(fmt, dict):
        kind = fmt.get("type")
        spec = fmt.get("json_schema")
        if kind == "json_schema" and isinstance(spec, dict):
            config["format"] = {"type": "json_schema", "schema": spec.get("schema") or {}}
        elif kind == "json_object":
            diagnostics.report(
                "anthropic_messages.json_object_dropped", "response_format json_object has no Anthropic equivalent"
            )
    return config or None


def encode_request(request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
    """Encodes an IR request as a Messages body for an upstream.

    Raises:
        InvalidRequestError: The request cannot be served by Anthropic (e.g. ``n > 1``).
    """
    extra = extras_for(request, FORMAT)
    system, turns = encode_messages(request.messages, inline_system=request.origin == FORMAT)
    body: dict[str, Any] = dict(extra)
    body["model"] = model
    body["max_tokens"] = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    if system:
        plain = all(set(b) == {"type", "text"} for b in system)
        body["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    else:
        body.pop("system", None)
    body["messages"] = turns
    server_tools = extra.get("tools") if isinstance(extra.get("tools"), list) else []
    body.pop("tools", None)
    body.pop("tool_choice", None)
    if request.tools or server_tools:
        same = request.origin == FORMAT
        body["tools"] = [encode_tool(t, native=same) for t in request.tools] + list(server_tools or [])
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    if request.temperature is not None:
        body["temperature"] = min(1.0, max(0.0, request.temperature))
        if request.temperature > 1:
            diagnostics.report("anthropic_messages.temperature_clamped", "temperature above 1 clamped to 1")
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.user:
        body["metadata"] = {"user_id": request.user}
    else:
        body.pop("metadata", None)
    if request.metadata and request.origin != FORMAT:
        diagnostics.report("anthropic_messages.metadata_dropped", "OpenAI metadata has no Anthropic equivalent")
    if request.seed is not None:
        diagnostics.report("anthropic_messages.seed_dropped", "seed has no Anthropic equivalent")
    output_config = _output_config(request, extra)
    if output_config:
        body["output_config"] = output_config
    else:
        body.pop("output_config", None)
    apply_thinking(body, request, extra, default_max_tokens=DEFAULT_MAX_TOKENS)
    _limit_cache_breakpoints(body)
    if stream:
        body["stream"] = True
    else:
        body.pop("stream", None)
    return body
