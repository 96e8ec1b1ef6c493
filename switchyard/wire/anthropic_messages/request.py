"""Anthropic Messages requests ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.

Mapping notes (see ``docs/translation.md`` for the full tables):

* ``system`` becomes a leading IR ``system`` message; a ``{"role": "system"}`` entry inside
  ``messages`` (the mid-conversation system beta Claude Code uses) becomes an IR ``system``
  message at its position. On the way out, system messages after the conversation start stay
  in place when the caller spoke Anthropic (its beta header is forwarded); otherwise IR
  system/developer messages are merged, in order, into the top-level ``system``.
* A user turn's ``tool_result`` blocks become one IR ``tool`` message (results in order),
  followed by a ``user`` message for any other blocks; on the way out, consecutive tool and
  user messages merge back into one ``user`` turn whose ``tool_result`` blocks come first.
* ``thinking``/``redacted_thinking`` blocks are kept only when Anthropic issued them
  (``ReasoningPart.provider``); a block carrying a Switchyard carrier token is restored to
  the part it stands for (see :mod:`switchyard.wire.reasoning`).
* ``max_tokens`` is required by Anthropic: a request without one gets
  :data:`DEFAULT_MAX_TOKENS` (a target's ``extra_body.max_tokens`` takes its place).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from switchyard.protocol.errors import InvalidRequestError
from switchyard.protocol.messages import (
    ContentPart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from switchyard.protocol.request import ChatRequest, ReasoningConfig
from switchyard.protocol.tools import ToolChoice, ToolDefinition
from switchyard.wire import custom_tools, diagnostics, guard, reasoning, strict
from switchyard.wire.anthropic_messages.thinking import apply_thinking
from switchyard.wire.extras import extras_for
from switchyard.wire.ids import anthropic_tool_id

FORMAT = "anthropic_messages"

DEFAULT_MAX_TOKENS = 16384
"""``max_tokens`` sent to Anthropic when the caller gave none (Anthropic requires the field).

16384 fits every current Claude model's output limit and leaves room for long tool calls such
as file edits; set ``extra_body: {max_tokens: N}`` on a target to choose another default.
"""

MAX_CACHE_BREAKPOINTS = 4

_KNOWN = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "metadata",
    }
)


# Keys of a custom tool the IR models; others (``defer_loading``, ``input_examples`` …) ride in
# ``ToolDefinition.native`` back to Anthropic upstreams.
_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema", "strict", "cache_control"})


def _bad(msg: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(msg, param=param)


# -- decoding -------------------------------------------------------------------------------


def decode_image(block: dict[str, Any], path: str) -> ImagePart | None:
    """An Anthropic ``image`` block → IR (``None`` with a diagnostic for unsupported sources)."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise _bad(f"{path}.source is required for image blocks", f"{path}.source")
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str):
        return ImagePart(data=source["data"], media_type=_opt_str(source.get("media_type")))
    if kind == "url" and isinstance(source.get("url"), str):
        return ImagePart(url=source["url"])
    diagnostics.report("anthropic_messages.image_source_dropped", f"image source type {kind!r} is not translated")
    return None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_block(block: dict[str, Any], path: str) -> TextPart:
    text = block.get("text")
    if not isinstance(text, str):
        raise _bad(f"{path}.text must be a string", f"{path}.text")
    return TextPart(text=text, cache_control=_cache(block))


def _cache(block: dict[str, Any]) -> dict[str, Any] | None:
    value = block.get("cache_control")
    return value if isinstance(value, dict) else None


def _result_content(content: Any, path: str) -> list[TextPart | ImagePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list):
        raise _bad(f"{path} must be a string or a list of blocks", path)
    out: list[TextPart | ImagePart] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            raise _bad(f"{path}[{j}] must be an object", f"{path}[{j}]")
        kind = block.get("type")
        if kind == "text":
            out.append(_text_block(block, f"{path}[{j}]"))
        elif kind == "image":
            image = decode_image(block, f"{path}[{j}]")
            if image is not None:
                out.append(image)
        else:
            diagnostics.report("anthropic_messages.tool_result_block_dropped", f"tool_result block {kind!r} dropped")
    return out


def _thinking(block: dict[str, Any], path: str) -> ReasoningPart:
    text = block.get("thinking", "")
    signature = block.get("signature")
    if not isinstance(text, str) or (signature is not None and not isinstance(signature, str)):
        raise _bad(f"{path} must have string thinking and signature", path)
    restored = reasoning.unpack(signature, text) if signature else None
    if restored is not None:
        return restored
    return ReasoningPart(text=text, signature=signature, provider=FORMAT if signature else None)


def _redacted(block: dict[str, Any], path: str) -> ReasoningPart:
    data = block.get("data")
    if not isinstance(data, str):
        raise _bad(f"{path}.data must be a string", f"{path}.data")
    restored = reasoning.unpack(data)
    return restored if restored is not None else ReasoningPart(redacted=data, provider=FORMAT)


def _tool_use(block: dict[str, Any], path: str) -> ToolCallPart:
    name = block.get("name")
    if not isinstance(name, str):
        raise _bad(f"{path}.name is required for tool_use blocks", f"{path}.name")
    args = block.get("input", {})
    return ToolCallPart(id=str(block.get("id") or ""), name=name, arguments=orjson.dumps(args).decode())


def _decode_message(msg: Any, i: int) -> list[Message]:
    path = f"messages[{i}]"
    if not isinstance(msg, dict):
        raise _bad(f"{path} must be an object", path)
    if msg.get("role") == "system":
        return _decode_inline_system(msg.get("content"), path)
    return _decode_turn(msg, path)


def _decode_turn(msg: dict[str, Any], path: str) -> list[Message]:
    role = msg.get("role")
    if role not in ("user", "assistant"):
        raise _bad(f"{path}.role must be 'user', 'assistant' or 'system' (got {role!r})", f"{path}.role")
    content = msg.get("content")
    if isinstance(content, str):
        return [Message.of(role, content)]
    if not isinstance(content, list):
        raise _bad(f"{path}.content must be a string or a list of blocks", f"{path}.content")
    parts: list[ContentPart] = []
    results: list[ToolResultPart] = []
    for j, block in enumerate(content):
        bpath = f"{path}.content[{j}]"
        if not isinstance(block, dict):
            raise _bad(f"{bpath} must be an object", bpath)
        kind = block.get("type")
        if kind == "text":
            parts.append(_text_block(block, bpath))
        elif kind == "image":
            image = decode_image(block, bpath)
            if image is not None:
                parts.append(image)
        elif kind == "tool_result" and role == "user":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise _bad(f"{bpath}.tool_use_id is required", f"{bpath}.tool_use_id")
            results.append(
                ToolResultPart(
                    call_id=call_id,
                    content=_result_content(block.get("content"), f"{bpath}.content"),
                    is_error=bool(block.get("is_error", False)),
                    cache_control=_cache(block),
                )
            )
        elif kind == "tool_use" and role == "assistant":
            parts.append(_tool_use(block, bpath))
        elif kind == "thinking" and role == "assistant":
            parts.append(_thinking(block, bpath))
        elif kind == "redacted_thinking" and role == "assistant":
            parts.append(_redacted(block, bpath))
        elif kind == "document" and isinstance(block.get("source"), dict) and block["source"].get("type") == "text":
            diagnostics.report("anthropic_messages.document_as_text", "plain-text document block sent as text")
            parts.append(TextPart(text=str(block["source"].get("data", ""))))
        else:
            diagnostics.report("anthropic_messages.block_dropped", f"content block {kind!r} in a {role} turn dropped")
    out: list[Message] = []
    if results:
        out.append(Message(role="tool", content=list(results)))
    if parts or not results:
        out.append(Message(role=role, content=parts))
    return out


def _decode_inline_system(content: Any, path: str) -> list[Message]:
    """A ``{"role": "system"}`` entry inside ``messages`` → an IR system message at that position.

    Claude Code sends these (a skills list, reminders) with the ``anthropic-beta`` flag
    ``mid-conversation-system-…``: system text appended later in a conversation without
    rewriting the cached prefix. Only text can be said there.
    """
    if isinstance(content, str):
        return [Message.of("system", content)]
    if not isinstance(content, list):
        raise _bad(f"{path}.content must be a string or a list of text blocks", f"{path}.content")
    parts: list[ContentPart] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _bad(f"{path}.content[{j}] must be a text block", f"{path}.content[{j}]")
        parts.append(_text_block(block, f"{path}.content[{j}]"))
    return [Message(role="system", content=parts)]


def _decode_system(system: Any) -> list[Message]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Message.of("system", system)] if system else []
    if not isinstance(system, list):
        raise _bad("system must be a string or a list of text blocks", "system")
    parts: list[ContentPart] = []
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _bad(f"system[{j}] must be a text block", f"system[{j}]")
        parts.append(_text_block(block, f"system[{j}]"))
    return [Message(role="system", content=parts)] if parts else []


def _decode_tools(tools: Any, extra: dict[str, Any]) -> list[ToolDefinition]:
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out: list[ToolDefinition] = []
    server: list[Any] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise _bad(f"tools[{i}] must be an object with a name", f"tools[{i}]")
        if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
            # Server tools (web search, bash, text editor …) only exist on Anthropic.
            server.append(tool)
            continue
        schema = tool.get("input_schema")
        native = {k: v for k, v in tool.items() if k not in _TOOL_KEYS}
        out.append(
            ToolDefinition(
                name=tool["name"],
                description=_opt_str(tool.get("description")),
                parameters=schema if isinstance(schema, dict) else None,
                strict=tool.get("strict") if isinstance(tool.get("strict"), bool) else None,
                cache_control=_cache(tool),
                native=native or None,
            )
        )
    if server:
        diagnostics.report(
            "anthropic_messages.server_tools", "Anthropic server tools are kept only for Anthropic upstreams"
        )
        extra["tools"] = server
    return out


def _decode_tool_choice(choice: Any) -> tuple[ToolChoice | None, bool | None]:
    if choice is None:
        return None, None
    if not isinstance(choice, dict):
        raise _bad("tool_choice must be an object", "tool_choice")
    kind = choice.get("type")
    parallel = None
    if isinstance(choice.get("disable_parallel_tool_use"), bool):
        parallel = not choice["disable_parallel_tool_use"]
    if kind == "auto":
        return ToolChoice(mode="auto"), parallel
    if kind == "any":
        return ToolChoice(mode="required"), parallel
    if kind == "none":
        return ToolChoice(mode="none"), parallel
    if kind == "tool" and isinstance(choice.get("name"), str):
        return ToolChoice(mode="tool", name=choice["name"]), parallel
    raise _bad(f"unsupported tool_choice {choice!r}", "tool_choice")


def _decode_reasoning(body: dict[str, Any]) -> ReasoningConfig | None:
    thinking = body.get("thinking")
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if not isinstance(thinking, dict) and not isinstance(effort, str):
        return None
    config = ReasoningConfig(effort=effort if isinstance(effort, str) else None)
    if isinstance(thinking, dict):
        kind = thinking.get("type")
        config.enabled = kind in ("enabled", "adaptive")
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            config.budget_tokens = budget
    return config


def _decode_response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    output_config = body.get("output_config")
    fmt = output_config.get("format") if isinstance(output_config, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt.get("schema") or {}}}
    return None


def decode_request(body: dict[str, Any]) -> ChatRequest:
    """Decodes a Messages request body (also a ``count_tokens`` body, which has no ``max_tokens``).

    Raises:
        InvalidRequestError: The body is not a valid Messages request.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad("messages: field required (a list of messages)", "messages")
    strict.check_body(body, messages=messages, messages_key="messages", tokens=("max_tokens",))
    extra = {k: v for k, v in body.items() if k not in _KNOWN}
    stop = body.get("stop_sequences")
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _bad("stop_sequences must be a list of strings", "stop_sequences")
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)):
        raise _bad("max_tokens must be an integer", "max_tokens")
    try:
        decoded = _decode_system(body.get("system"))
        for i, msg in enumerate(messages):
            decoded.extend(_decode_message(msg, i))
        tools = _decode_tools(body["tools"], extra) if body.get("tools") else []
        choice, parallel = _decode_tool_choice(body.get("tool_choice"))
        return ChatRequest(
            model=str(body.get("model") or ""),
            messages=decoded,
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=parallel,
            max_tokens=max_tokens,
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stop=stop,
            stream=bool(body.get("stream", False)),
            include_usage=True,
            response_format=_decode_response_format(body),
            reasoning=_decode_reasoning(body),
            user=user if isinstance(user, str) else None,
            extra=extra,
            origin=FORMAT,
        )
    except ValidationError as exc:
        raise guard.invalid_request(exc) from exc


# -- encoding -------------------------------------------------------------------------------


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
