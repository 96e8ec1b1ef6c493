"""OpenAI Chat Completions requests ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

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
from switchyard.wire.content import bad as _bad
from switchyard.wire.content import decode_content, put_present
from switchyard.wire.extras import extras_for
from switchyard.wire.reuse import ExactReuse, MessageReuse, loose

FORMAT = "openai_chat"

REUSE: MessageReuse[Message] = MessageReuse()
"""The last few conversations' decoded messages: an agent's next turn decodes only its new tail."""

TOOLS: ExactReuse[tuple[ToolDefinition, ...]] = ExactReuse()
"""The last few tool lists' definitions: an agent sends the same ones every turn."""

# Fields the IR models explicitly; everything else rides along in ``ChatRequest.extra``.
_KNOWN = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "stream",
        "stream_options",
        "response_format",
        "reasoning_effort",
        "user",
        "metadata",
    }
)

# The request fields Chat carries unchanged, in the order they are written: max_tokens as the
# current field (OpenAI's reasoning models reject max_tokens; vLLM reads both).
_OPTIONAL = (
    ("max_completion_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("stop", "stop"),
    ("seed", "seed"),
    ("response_format", "response_format"),
    ("user", "user"),
    ("metadata", "metadata"),
)


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (optional sub-objects)."""
    return value if isinstance(value, dict) else {}


def _image_from_url(url: str, detail: str | None) -> ImagePart:
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        media_type = header[5:].split(";")[0] or None
        return ImagePart(data=payload, media_type=media_type, detail=detail)
    return ImagePart(url=url, detail=detail)


def _string(value: Any) -> str:
    """``str(value)``, telling the message reuse when that was not a string (``1`` vs ``1.0``)."""
    if isinstance(value, str):
        return value
    loose()
    return str(value)


def _decode_part(item: dict[str, Any], path: str) -> TextPart | ImagePart | None:
    kind = item.get("type")
    if kind == "text":
        cache_control = item.get("cache_control")
        if cache_control is not None:
            loose()  # carried as it came: its numbers and booleans are not pinned by ``==``
        return TextPart(text=_string(item.get("text", "")), cache_control=cache_control)
    if kind == "refusal":
        return TextPart(text=_string(item.get("refusal", "")))
    if kind == "image_url":
        spec = item.get("image_url")
        if isinstance(spec, str):
            spec = {"url": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
            raise _bad(f"{path}.image_url.url is required", f"{path}.image_url")
        return _image_from_url(spec["url"], spec.get("detail"))
    diagnostics.report("openai_chat.unsupported_content_part", f"content part type {kind!r} dropped")
    return None


def _decode_parts(content: Any, path: str) -> list[TextPart | ImagePart]:
    return decode_content(content, path, _decode_part)


def _decode_tool_calls(calls: Any, path: str) -> list[ToolCallPart]:
    if not isinstance(calls, list):
        raise _bad(f"{path} must be a list", path)
    out: list[ToolCallPart] = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            raise _bad(f"{path}[{i}] must be an object", f"{path}[{i}]")
        if call.get("type") == "custom":
            spec = _obj(call.get("custom"))
            out.append(
                ToolCallPart(
                    id=_string(call.get("id", "")),
                    name=_string(spec.get("name", "")),
                    arguments=_string(spec.get("input", "")),
                    kind="custom",
                )
            )
            continue
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"{path}[{i}].function.name is required", f"{path}[{i}].function")
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            # Some clients send parsed arguments; keep them as the JSON document they denote.
            from switchyard.wire.json import dumps

            loose()  # ``{"n": 1}`` and ``{"n": 1.0}`` compare equal but are different documents
            args = dumps(args).decode()
        out.append(ToolCallPart(id=_string(call.get("id", "")), name=fn["name"], arguments=args or "{}"))
    return out


def _decode_message(msg: Any, i: int) -> Message:
    path = f"messages[{i}]"
    if not isinstance(msg, dict):
        raise _bad(f"{path} must be an object", path)
    role = msg.get("role")
    content = msg.get("content")
    if role in ("system", "developer", "user"):
        return Message(role=role, content=list(_decode_parts(content, f"{path}.content")), name=msg.get("name"))
    if role == "assistant":
        parts: list[ContentPart] = []
        reasoning = msg.get("reasoning") or msg.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            parts.append(ReasoningPart(text=reasoning))
        parts.extend(_decode_parts(content, f"{path}.content"))
        if isinstance(msg.get("refusal"), str) and msg["refusal"]:
            parts.append(TextPart(text=msg["refusal"]))
        if msg.get("tool_calls"):
            parts.extend(_decode_tool_calls(msg["tool_calls"], f"{path}.tool_calls"))
        return Message(role="assistant", content=parts, name=msg.get("name"))
    if role == "tool":
        call_id = msg.get("tool_call_id")
        if not isinstance(call_id, str):
            raise _bad(f"{path}.tool_call_id is required for tool messages", f"{path}.tool_call_id")
        result = ToolResultPart(call_id=call_id, content=_decode_parts(content, f"{path}.content"))
        return Message(role="tool", content=[result])
    if role == "function":
        diagnostics.report("openai_chat.function_role", "deprecated 'function' message treated as a tool result")
        name = str(msg.get("name", ""))
        return Message(role="tool", content=[ToolResultPart(call_id=name, content=_decode_parts(content, path))])
    raise _bad(f"{path}.role must be one of system, developer, user, assistant, tool (got {role!r})", f"{path}.role")


def _decode_tools(tools: Any) -> list[ToolDefinition]:
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out: list[ToolDefinition] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _bad(f"tools[{i}] must be an object", f"tools[{i}]")
        if tool.get("type") == "custom":
            spec = _obj(tool.get("custom"))
            out.append(
                ToolDefinition(
                    name=str(spec.get("name", "")),
                    description=spec.get("description"),
                    kind="custom",
                    format=spec.get("format"),
                )
            )
            continue
        fn = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(fn, dict) or "name" not in fn:
            raise _bad(f"tools[{i}] must be {{type: function, function: {{name, …}}}}", f"tools[{i}]")
        out.append(
            ToolDefinition(
                name=str(fn["name"]),
                description=fn.get("description"),
                parameters=fn.get("parameters"),
                strict=fn.get("strict"),
            )
        )
    return out


def _tool_definitions(tools: Any) -> tuple[ToolDefinition, ...]:
    return tuple(_decode_tools(tools))


def decode_tool_choice(choice: Any) -> ToolChoice | None:
    """OpenAI ``tool_choice`` (Chat or Responses shape) → IR."""
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        return ToolChoice(mode=choice)
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind in ("function", "custom"):
            inner = choice.get(kind)
            name = inner.get("name") if isinstance(inner, dict) else choice.get("name")
            if isinstance(name, str):
                return ToolChoice(mode="tool", name=name)
        if kind == "allowed_tools":
            diagnostics.report("openai_chat.allowed_tools", "tool_choice allowed_tools narrowed to 'auto'")
            mode = _obj(choice.get("allowed_tools")).get("mode", "auto")
            return ToolChoice(mode="required" if mode == "required" else "auto")
    raise _bad(f"unsupported tool_choice {choice!r}", "tool_choice")


def decode_request(body: dict[str, Any]) -> ChatRequest:
    """Decodes a Chat Completions request body.

    Raises:
        InvalidRequestError: The body is not a valid Chat Completions request.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad("'messages' is required and must be a list", "messages")
    strict.check_body(body, messages=messages, messages_key="messages", tokens=("max_tokens", "max_completion_tokens"))
    stop = body.get("stop")
    stream_options = body.get("stream_options") or {}
    try:
        reasoning = None
        if body.get("reasoning_effort") is not None:
            effort = str(body["reasoning_effort"])
            reasoning = ReasoningConfig(effort=effort, enabled=effort != "none")
        return ChatRequest(
            model=str(body.get("model") or ""),
            messages=REUSE.decode(messages, _decode_message),
            tools=list(TOOLS.decode(body["tools"], _tool_definitions)) if body.get("tools") else [],
            tool_choice=decode_tool_choice(body.get("tool_choice")),
            parallel_tool_calls=body.get("parallel_tool_calls"),
            max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stop=[stop] if isinstance(stop, str) else stop,
            seed=body.get("seed"),
            stream=bool(body.get("stream", False)),
            include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
            response_format=body.get("response_format"),
            reasoning=reasoning,
            user=body.get("user"),
            metadata=body.get("metadata"),
            extra={k: v for k, v in body.items() if k not in _KNOWN},
            origin=FORMAT,
        )
    except ValidationError as exc:
        raise guard.invalid_request(exc) from exc
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # A shape the checks above did not foresee: still the caller's fault, never a 500.
        raise InvalidRequestError(f"invalid request: {type(exc).__name__}: {exc}") from exc


def _encode_image(part: ImagePart) -> dict[str, Any]:
    url = part.as_data_uri() or part.url or ""
    spec: dict[str, Any] = {"url": url}
    if part.detail:
        spec["detail"] = part.detail
    return {"type": "image_url", "image_url": spec}


def _encode_content(parts: list[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        else:
            out.append(_encode_image(p))
    return out


def _encode_call(call: ToolCallPart) -> dict[str, Any]:
    # Free-form calls travel as calls to their function stand-in (see switchyard.wire.custom_tools).
    args = custom_tools.wrap(call.arguments) if call.kind == "custom" else call.arguments
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": args}}


def _encode_message(msg: Message, out: list[dict[str, Any]]) -> None:
    if msg.role in ("system", "developer", "user"):
        plain = [p for p in msg.content if isinstance(p, TextPart | ImagePart)]
        if len(plain) != len(msg.content):
            # A user turn that also answers tools (Anthropic style): results become tool messages first.
            for p in msg.content:
                if isinstance(p, ToolResultPart):
                    _encode_tool_result(p, out)
        if plain or not msg.tool_results:
            entry: dict[str, Any] = {"role": msg.role, "content": _encode_content(plain)}
            if msg.name:
                entry["name"] = msg.name
            out.append(entry)
        return
    if msg.role == "tool":
        for p in msg.content:
            if isinstance(p, ToolResultPart):
                _encode_tool_result(p, out)
        return
    text = "".join(p.text for p in msg.content if isinstance(p, TextPart))
    calls = [_encode_call(p) for p in msg.content if isinstance(p, ToolCallPart)]
    if any(isinstance(p, ReasoningPart) for p in msg.content):
        diagnostics.report(
            "openai_chat.reasoning_history_dropped",
            "reasoning of earlier assistant turns is not sent to Chat upstreams",
        )
    entry = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        entry["tool_calls"] = calls
    if msg.name:
        entry["name"] = msg.name
    out.append(entry)


def _encode_tool_result(part: ToolResultPart, out: list[dict[str, Any]]) -> None:
    if any(isinstance(c, ImagePart) for c in part.content):
        diagnostics.report(
            "openai_chat.image_in_tool_result", "images in tool results are not allowed in Chat tool messages"
        )
    text = part.text
    if part.is_error and not text.lower().startswith("error"):
        text = f"Error: {text}"
    out.append({"role": "tool", "tool_call_id": part.call_id, "content": text})


def encode_tool(tool: ToolDefinition) -> dict[str, Any]:
    """IR tool → Chat Completions function tool.

    Free-form (``custom``) tools become a function with one string parameter: vLLM and most
    Chat servers only accept function tools. Calls are unwrapped again on the way back.
    """
    if tool.kind == "custom":
        diagnostics.report(
            "openai_chat.custom_tool_as_function",
            "free-form tool sent as a function with one string parameter; calls are unwrapped to raw text",
        )
        tool = custom_tools.as_function(tool)
    if tool.native:
        diagnostics.report(
            "openai_chat.tool_fields_dropped", f"tool fields {sorted(tool.native)} have no Chat equivalent"
        )
    fn: dict[str, Any] = {"name": tool.name}
    if tool.description:
        fn["description"] = tool.description
    fn["parameters"] = tool.parameters if tool.parameters is not None else {"type": "object", "properties": {}}
    if tool.strict is not None:
        fn["strict"] = tool.strict
    return {"type": "function", "function": fn}


def encode_tool_choice(choice: ToolChoice, tools: list[ToolDefinition]) -> Any:
    """IR tool choice → Chat Completions ``tool_choice``."""
    if choice.mode != "tool":
        return choice.mode
    return {"type": "function", "function": {"name": choice.name}}


def _merge_system(messages: list[Message]) -> list[Message]:
    """All system/developer text in one leading ``system`` message, in order.

    vLLM chat templates (and Anthropic) accept system text only at the start; OpenAI treats a
    leading ``system`` like ``developer``.
    """
    system = [m for m in messages if m.role in ("system", "developer")]
    if not system:
        return messages
    rest = [m for m in messages if m.role not in ("system", "developer")]
    leading = 0
    while leading < len(messages) and messages[leading].role in ("system", "developer"):
        leading += 1
    if leading < len(system):
        diagnostics.report(
            "openai_chat.system_merged",
            "system/developer messages after the conversation start were merged into the leading system message",
        )
    text = "\n\n".join(p.text for m in system for p in m.content if isinstance(p, TextPart) and p.text)
    return [Message.of("system", text), *rest]


def _has_cache_markers(request: ChatRequest) -> bool:
    return any(t.cache_control for t in request.tools) or any(
        getattr(p, "cache_control", None) for m in request.messages for p in m.content
    )


def encode_request(request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
    """Encodes an IR request as a Chat Completions body for an upstream."""
    messages: list[dict[str, Any]] = []
    if _has_cache_markers(request):
        diagnostics.report("openai_chat.cache_control_dropped", "cache_control markers are not sent to Chat upstreams")
    for msg in _merge_system(request.messages):
        _encode_message(msg, messages)
    body: dict[str, Any] = extras_for(request, FORMAT)
    body["model"] = model
    body["messages"] = messages
    body.pop("tools", None)
    body.pop("tool_choice", None)
    if request.tools:
        body["tools"] = [encode_tool(t) for t in request.tools]
        # vLLM needs an explicit choice to run its tool parser; "auto" is every API's default.
        choice = request.tool_choice or ToolChoice(mode="auto")
        body["tool_choice"] = encode_tool_choice(choice, request.tools)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    # tool_choice without tools is rejected by vLLM (and "none" is the default anyway).
    put_present(body, request, _OPTIONAL)
    effort = reasoning.effort_for(request.reasoning) if request.reasoning is not None else None
    if effort is not None:
        body["reasoning_effort"] = effort
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body.pop("stream_options", None)
        body.pop("stream", None)
    return body


def normalize_replay(body: dict[str, Any]) -> dict[str, Any]:
    """The few fixes a caller's Chat body gets even when it is otherwise forwarded verbatim.

    vLLM rejects or misreads these (and OpenAI accepts the fixed form): ``tools: []`` is dropped
    (400 on vLLM), an assistant message's empty ``tool_calls`` array is dropped (400 on OpenAI),
    ``stream_options`` is dropped from a non-streaming request (400), tools without
    a ``tool_choice`` get ``"auto"`` (the tool parser runs only then on older vLLM), and
    system/developer messages are merged, in order, into one leading ``system`` message (chat
    templates accept system text only at the start). Everything else stays byte-for-byte.
    """
    fixed = body
    if "tools" in body and not body["tools"]:
        fixed = {k: v for k, v in fixed.items() if k not in ("tools", "tool_choice", "parallel_tool_calls")}
    if "stream_options" in fixed and not fixed.get("stream"):
        fixed = {k: v for k, v in fixed.items() if k != "stream_options"}
    if fixed.get("tools") and "tool_choice" not in fixed:
        fixed = {**fixed, "tool_choice": "auto"}
    messages = fixed.get("messages")
    if not isinstance(messages, list):
        return fixed
    empty, merge = _fixes(messages)
    if empty:
        # OpenAI answers 400 "Invalid 'messages[i].tool_calls': empty array" (code empty_array);
        # Hermes Agent sends them for turns without calls. No calls is said by leaving it out.
        messages = [{k: v for k, v in m.items() if k != "tool_calls"} if _empty_tool_calls(m) else m for m in messages]
        fixed = {**fixed, "messages": messages}
    if merge:
        system = [m for m in messages if isinstance(m, dict) and m.get("role") in ("system", "developer")]
        texts = [_plain_text(m.get("content")) for m in system]
        merged = {"role": "system", "content": "\n\n".join(t for t in texts if t)}
        rest = [m for m in messages if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
        fixed = {**fixed, "messages": [merged, *rest]}
        diagnostics.report(
            "openai_chat.system_merged",
            "system/developer messages after the conversation start were merged into the leading system message",
        )
    return fixed


def _empty_tool_calls(message: Any) -> bool:
    return isinstance(message, dict) and message.get("tool_calls") == []


_PLAIN = {dict}
_SHORT = 16  # fewer messages are read one by one: the C-level passes cost more to set up


def _fixes(messages: list[Any]) -> tuple[bool, bool]:
    """Whether ``messages`` hold an empty ``tool_calls`` array, and whether their system and
    developer messages need merging into one leading ``system`` message (more than one, one
    that is not first, or a leading ``developer``)."""
    if len(messages) < _SHORT or set(map(type, messages)) != _PLAIN:  # (or one is no plain object)
        return _fixes_one_by_one(messages)
    # C-level passes: a Python loop over an agent's 400 messages costs twice as much, on every
    # relayed request.
    roles = list(map(dict.get, messages, repeat("role")))
    empty = [] in map(dict.get, messages, repeat("tool_calls"))
    count = roles.count("system") + roles.count("developer")
    if count != 1:
        return empty, count > 1
    first = roles.index("system") if "system" in roles else roles.index("developer")
    return empty, first != 0 or roles[0] == "developer"


def _fixes_one_by_one(messages: list[Any]) -> tuple[bool, bool]:
    """:func:`_fixes` where some message is not a plain ``dict`` (those that are no mapping are
    skipped)."""
    empty = False
    count = 0
    first = -1
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "system" or role == "developer":
            if not count:
                first = i
            count += 1
        if not empty and m.get("tool_calls") == []:
            empty = True
    merge = count > 1 or (count == 1 and (first != 0 or messages[0].get("role") == "developer"))
    return empty, merge


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
