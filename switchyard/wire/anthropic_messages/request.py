"""Anthropic Messages requests → IR (the decoder; the encoder is :mod:`.request_encode`).

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
  :data:`.request_encode.DEFAULT_MAX_TOKENS` (a target's ``extra_body.max_tokens`` takes its place).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

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
from switchyard.wire import diagnostics, guard, reasoning, strict
from switchyard.wire.content import bad as _bad
from switchyard.wire.content import decode_content
from switchyard.wire.reuse import ExactReuse, MessageReuse, json_text

FORMAT = "anthropic_messages"

REUSE: MessageReuse[tuple[Message, ...]] = MessageReuse(key=json_text, slack=1)
"""The last few conversations' decoded messages: an agent's next turn decodes only its new tail.

Keyed per Anthropic message (one decodes into one IR message, or two: its ``tool_result`` blocks
and the rest), from that message alone. By its JSON text: a ``tool_use`` block's ``input`` is
written out as the call's arguments, so its key order and ``1`` vs ``1.0`` matter, which ``==``
does not see. Slack of one: Claude Code moves its ``cache_control`` breakpoint to the newest
message every turn, so the previous turn's last message comes back without it."""

TOOLS: ExactReuse[tuple[tuple[ToolDefinition, ...], tuple[Any, ...]]] = ExactReuse()
"""The last few tool lists' definitions (and server tools): an agent sends the same ones every turn."""

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


def _result_block(block: dict[str, Any], path: str) -> TextPart | ImagePart | None:
    kind = block.get("type")
    if kind == "text":
        return _text_block(block, path)
    if kind == "image":
        return decode_image(block, path)
    diagnostics.report("anthropic_messages.tool_result_block_dropped", f"tool_result block {kind!r} dropped")
    return None


def _result_content(content: Any, path: str) -> list[TextPart | ImagePart]:
    return decode_content(content, path, _result_block, listing="a list of blocks")


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


def _decode_message(msg: Any, i: int) -> tuple[Message, ...]:
    path = f"messages[{i}]"
    if not isinstance(msg, dict):
        raise _bad(f"{path} must be an object", path)
    if msg.get("role") == "system":
        return tuple(_decode_inline_system(msg.get("content"), path))
    return tuple(_decode_turn(msg, path))


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


def _decode_tools(tools: Any) -> tuple[tuple[ToolDefinition, ...], tuple[Any, ...]]:
    """The custom tools' definitions, and the server tools (carried as they came)."""
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
    return tuple(out), tuple(server)


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
    if fmt is None:
        fmt = body.get("output_format")  # the structured-outputs beta's earlier top-level field
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
        for one in REUSE.decode(messages, _decode_message):
            decoded.extend(one)
        tools: list[ToolDefinition] = []
        if body.get("tools"):
            custom, server = TOOLS.decode(body["tools"], _decode_tools)
            tools = list(custom)
            if server:
                extra["tools"] = list(server)
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
