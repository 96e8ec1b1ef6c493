"""OpenAI Responses requests ⇄ IR.

Layer: ``wire`` — imports ``protocol`` only.

Mapping notes (full tables in ``docs/translation.md``):

* ``instructions`` becomes a leading IR ``system`` message; on the way out the leading
  system/developer text becomes ``instructions`` and later ones stay ``developer`` items.
* Consecutive assistant-side items (``reasoning``, assistant ``message``, ``function_call``,
  ``custom_tool_call``) form one IR assistant turn; consecutive ``*_output`` items form one IR
  ``tool`` message.
* ``custom`` (free-form) tools and their calls keep their raw text end to end.
* Reasoning items go back to OpenAI only when OpenAI issued them (``encrypted_content``); a
  Switchyard carrier token in ``encrypted_content`` is restored to the reasoning it stands for.
* ``previous_response_id`` needs the server-side store of the upstream that issued it, so it is
  only accepted when the request goes to an OpenAI Responses upstream (see
  :func:`switchyard.wire.extras.extras_for`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

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
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import diagnostics, guard, reasoning, strict
from switchyard.wire.content import bad as _bad
from switchyard.wire.content import decode_content, put_present
from switchyard.wire.extras import extras_for
from switchyard.wire.ids import new_id
from switchyard.wire.openai_chat.request import decode_tool_choice

FORMAT = "openai_responses"

_KNOWN = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "stream",
        "stream_options",
        "reasoning",
        "user",
        "metadata",
    }
)

# The request fields Responses carries unchanged, in the order they are written.
_OPTIONAL = (
    ("max_output_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("user", "user"),
    ("metadata", "metadata"),
)

_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


# -- decoding -------------------------------------------------------------------------------


def _image(part: dict[str, Any], path: str) -> ImagePart | None:
    url = part.get("image_url")
    if isinstance(url, dict):  # tolerate the Chat shape
        url = url.get("url")
    detail = part.get("detail") if isinstance(part.get("detail"), str) else None
    if isinstance(url, str):
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            return ImagePart(data=payload, media_type=header[5:].split(";")[0] or None, detail=detail)
        return ImagePart(url=url, detail=detail)
    diagnostics.report("openai_responses.image_file_id_dropped", "input_image by file_id is not translated")
    return None


def _part(part: dict[str, Any], path: str) -> TextPart | ImagePart | None:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise _bad(f"{path}.text must be a string", f"{path}.text")
        return TextPart(text=text)
    if kind == "refusal":
        return TextPart(text=str(part.get("refusal") or ""))
    if kind == "input_image":
        return _image(part, path)
    diagnostics.report("openai_responses.content_part_dropped", f"content part {kind!r} is not translated")
    return None


def _parts(content: Any, path: str) -> list[TextPart | ImagePart]:
    return decode_content(content, path, _part)


def _reasoning_item(item: dict[str, Any]) -> ReasoningPart:
    texts = [c.get("text") for c in item.get("content") or [] if isinstance(c, dict)]
    summary = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
    text = "".join(t for t in texts if isinstance(t, str)) or "\n\n".join(s for s in summary if isinstance(s, str))
    encrypted = item.get("encrypted_content")
    if isinstance(encrypted, str):
        restored = reasoning.unpack(encrypted, text)
        if restored is not None:
            return restored
    item_id = item.get("id") if isinstance(item.get("id"), str) else None
    has_payload = isinstance(encrypted, str) and bool(encrypted)
    return ReasoningPart(
        text=text,
        encrypted=encrypted if has_payload else None,
        item_id=item_id,
        provider=FORMAT if has_payload else None,
    )


def _call(item: dict[str, Any], path: str) -> ToolCallPart:
    call_id = item.get("call_id")
    name = item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise _bad(f"{path} needs string call_id and name", path)
    if item["type"] == "custom_tool_call":
        return ToolCallPart(id=call_id, name=name, arguments=str(item.get("input") or ""), kind="custom")
    args = item.get("arguments")
    return ToolCallPart(id=call_id, name=name, arguments=args if isinstance(args, str) and args else "{}")


def _output(item: dict[str, Any], path: str) -> ToolResultPart:
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        raise _bad(f"{path}.call_id is required", f"{path}.call_id")
    kind = "custom" if item["type"] == "custom_tool_call_output" else "function"
    return ToolResultPart(call_id=call_id, content=_parts(item.get("output"), f"{path}.output"), kind=kind)


def _decode_input(items: Any) -> list[Message]:
    if isinstance(items, str):
        return [Message.of("user", items)]
    if not isinstance(items, list):
        raise _bad("input must be a string or a list of items", "input")
    out: list[Message] = []

    def turn(role: Literal["assistant", "tool"]) -> Message:
        if out and out[-1].role == role and role in ("assistant", "tool"):
            return out[-1]
        msg = Message(role=role)
        out.append(msg)
        return msg

    for i, item in enumerate(items):
        path = f"input[{i}]"
        if not isinstance(item, dict):
            raise _bad(f"{path} must be an object", path)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise _bad(f"{path}.role must be user, assistant, system or developer", f"{path}.role")
            parts: list[ContentPart] = list(_parts(item.get("content"), f"{path}.content"))
            if role == "assistant":
                turn("assistant").content.extend(parts)
            else:
                out.append(Message(role=role, content=parts))
        elif kind in _ASSISTANT_ITEMS:
            if kind == "reasoning":
                turn("assistant").content.append(_reasoning_item(item))
            else:
                turn("assistant").content.append(_call(item, path))
        elif kind in _OUTPUT_ITEMS:
            turn("tool").content.append(_output(item, path))
        else:
            diagnostics.report("openai_responses.input_item_dropped", f"input item {kind!r} is not translated")
    return out


def _decode_tools(tools: Any, extra: dict[str, Any]) -> list[ToolDefinition]:
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out: list[ToolDefinition] = []
    hosted: list[Any] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _bad(f"tools[{i}] must be an object", f"tools[{i}]")
        kind = tool.get("type")
        if kind in ("function", "custom"):
            if not isinstance(tool.get("name"), str):
                raise _bad(f"tools[{i}].name is required", f"tools[{i}].name")
            params = tool.get("parameters")
            fmt = tool.get("format")
            out.append(
                ToolDefinition(
                    name=tool["name"],
                    description=tool.get("description") if isinstance(tool.get("description"), str) else None,
                    parameters=params if kind == "function" and isinstance(params, dict) else None,
                    strict=tool.get("strict") if isinstance(tool.get("strict"), bool) else None,
                    kind=kind,
                    format=fmt if kind == "custom" and isinstance(fmt, dict) else None,
                )
            )
        else:
            hosted.append(tool)
    if hosted:
        diagnostics.report(
            "openai_responses.hosted_tools", "OpenAI hosted tools are kept only for OpenAI Responses upstreams"
        )
        extra["tools"] = hosted
    return out


def _decode_reasoning(raw: Any) -> ReasoningConfig | None:
    if not isinstance(raw, dict):
        return None
    effort = raw.get("effort") if isinstance(raw.get("effort"), str) else None
    summary = raw.get("summary") if isinstance(raw.get("summary"), str) else None
    if effort is None and summary is None:
        return None
    return ReasoningConfig(effort=effort, summary=summary, enabled=None if effort is None else effort != "none")


def _decode_text_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": spec}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def decode_request(body: dict[str, Any]) -> ChatRequest:
    """Decodes a Responses request body.

    Raises:
        InvalidRequestError: The body is not a valid Responses request.
    """
    if "input" not in body:
        raise _bad("'input' is required", "input")
    items = body["input"]
    strict.check_body(
        body,
        messages=items if isinstance(items, list) else None,
        messages_key="input",
        tokens=("max_output_tokens",),
        # A turn continuing a stored response or conversation may add no new item.
        empty_ok=bool(body.get("previous_response_id") or body.get("conversation")),
    )
    extra = {k: v for k, v in body.items() if k not in _KNOWN}
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions must be a string", "instructions")
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)):
        raise _bad("max_output_tokens must be an integer", "max_output_tokens")
    try:
        messages = [Message.of("system", instructions)] if instructions else []
        messages.extend(_decode_input(body.get("input")))
        parallel = body.get("parallel_tool_calls")
        return ChatRequest(
            model=str(body.get("model") or ""),
            messages=messages,
            tools=_decode_tools(body["tools"], extra) if body.get("tools") else [],
            tool_choice=decode_tool_choice(body.get("tool_choice")),
            parallel_tool_calls=parallel,
            max_tokens=max_tokens,
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stream=bool(body.get("stream", False)),
            include_usage=True,
            response_format=_decode_text_format(body.get("text")),
            reasoning=_decode_reasoning(body.get("reasoning")),
            user=body.get("user") if isinstance(body.get("user"), str) else None,
            metadata=body.get("metadata") if isinstance(body.get("metadata"), dict) else None,
            extra=extra,
            origin=FORMAT,
        )
    except ValidationError as exc:
        raise guard.invalid_request(exc) from exc


# -- encoding -------------------------------------------------------------------------------


def encode_image(part: ImagePart) -> dict[str, Any]:
    """IR image → ``input_image``."""
    return {"type": "input_image", "image_url": part.as_data_uri() or part.url or "", "detail": part.detail or "auto"}


def _input_content(parts: list[TextPart | ImagePart]) -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": p.text} if isinstance(p, TextPart) else encode_image(p) for p in parts]


def _reasoning_out(part: ReasoningPart) -> dict[str, Any] | None:
    if not reasoning.native_for(part, FORMAT) or part.encrypted is None:
        diagnostics.report(
            "openai_responses.foreign_reasoning_dropped",
            "reasoning not issued by OpenAI (no encrypted_content) is not sent to OpenAI Responses",
        )
        return None
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
        "encrypted_content": part.encrypted,
    }
    if part.item_id:
        item["id"] = part.item_id
    return item


def _tool_output(part: ToolResultPart, call_kinds: Mapping[str, str]) -> dict[str, Any]:
    # The output item's type must match its call's (Chat and Anthropic results do not say).
    custom = call_kinds.get(part.call_id, part.kind) == "custom"
    kind = "custom_tool_call_output" if custom else "function_call_output"
    text = part.text
    if part.is_error and not text.lower().startswith("error"):
        text = f"Error: {text}"
    output: str | list[dict[str, Any]] = text
    if any(isinstance(c, ImagePart) for c in part.content):
        output = _input_content(part.content)
    return {"type": kind, "call_id": part.call_id, "output": output}


def _assistant_items(msg: Message, out: list[dict[str, Any]]) -> None:
    text: list[str] = []

    def flush() -> None:
        if text:
            out.append({"type": "message", "role": "assistant", "content": "".join(text)})
            text.clear()

    for part in msg.content:
        if isinstance(part, TextPart):
            text.append(part.text)
            continue
        if isinstance(part, ReasoningPart):
            item = _reasoning_out(part)
            if item is not None:
                flush()
                out.append(item)
        elif isinstance(part, ToolCallPart):
            flush()
            if part.kind == "custom":
                out.append({"type": "custom_tool_call", "call_id": part.id, "name": part.name, "input": part.arguments})
            else:
                out.append(
                    {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": part.arguments}
                )
    flush()


def encode_input(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """IR messages → (``instructions``, ``input`` items)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    call_kinds = {p.id: p.kind for m in messages for p in m.content if isinstance(p, ToolCallPart)}
    for msg in messages:
        if msg.role in ("system", "developer"):
            text = "\n\n".join(p.text for p in msg.content if isinstance(p, TextPart) and p.text)
            if not items:
                instructions.append(text)
            else:
                items.append({"type": "message", "role": "developer", "content": text})
        elif msg.role == "assistant":
            _assistant_items(msg, items)
        else:
            for part in msg.content:
                if isinstance(part, ToolResultPart):
                    items.append(_tool_output(part, call_kinds))
            plain = [p for p in msg.content if isinstance(p, TextPart | ImagePart)]
            if plain or (msg.role == "user" and not msg.tool_results):
                items.append({"type": "message", "role": "user", "content": _input_content(plain)})
    text = "\n\n".join(t for t in instructions if t)
    return (text or None), items


def encode_tool(tool: ToolDefinition) -> dict[str, Any]:
    """IR tool → Responses tool (flat function tools; ``strict`` defaults to false here because
    OpenAI's default of true rejects schemas that were not written for strict mode)."""
    if tool.native:
        diagnostics.report(
            "openai_responses.tool_fields_dropped", f"tool fields {sorted(tool.native)} have no Responses equivalent"
        )
    if tool.kind == "custom":
        spec: dict[str, Any] = {"type": "custom", "name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        if tool.format:
            spec["format"] = tool.format
        return spec
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = tool.parameters if tool.parameters is not None else {"type": "object", "properties": {}}
    out["strict"] = bool(tool.strict)
    return out


def _reasoning_and_format(request: ChatRequest, body: dict[str, Any]) -> None:
    if request.reasoning is not None:
        effort = reasoning.effort_for(request.reasoning)
        spec: dict[str, Any] = {}
        if effort is not None:
            spec["effort"] = effort
        if request.reasoning.summary is not None:
            spec["summary"] = request.reasoning.summary
        if spec:
            body["reasoning"] = spec
    fmt = request.response_format
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        text = dict(body.get("text") or {}) if isinstance(body.get("text"), dict) else {}
        if fmt["type"] == "json_schema":
            schema = dict(fmt.get("json_schema") or {})
            schema.setdefault("name", "response")
            text["format"] = {"type": "json_schema", **schema}
        else:
            text["format"] = {"type": "json_object"}
        body["text"] = text


def encode_request(request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
    """Encodes an IR request as a Responses body for an upstream.

    Raises:
        InvalidRequestError: The request needs something a Responses upstream cannot do.
    """
    extra = extras_for(request, FORMAT)
    if any(t.cache_control for t in request.tools) or any(
        getattr(p, "cache_control", None) for m in request.messages for p in m.content
    ):
        diagnostics.report("openai_responses.cache_control_dropped", "cache_control markers have no Responses field")
    instructions, items = encode_input(request.messages)
    body: dict[str, Any] = dict(extra)
    body["model"] = model
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = items
    hosted = extra.get("tools") if isinstance(extra.get("tools"), list) else []
    body.pop("tools", None)
    if request.tools or hosted:
        body["tools"] = [encode_tool(t) for t in request.tools] + list(hosted or [])
        if request.tool_choice is not None:
            choice = request.tool_choice
            if choice.mode == "tool":
                kind = next((t.kind for t in request.tools if t.name == choice.name), "function")
                body["tool_choice"] = {"type": kind, "name": choice.name}
            else:
                body["tool_choice"] = choice.mode
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    put_present(body, request, _OPTIONAL)
    if request.stop:
        diagnostics.report("openai_responses.stop_dropped", "stop sequences have no Responses equivalent")
    if request.seed is not None:
        diagnostics.report("openai_responses.seed_dropped", "seed has no Responses equivalent")
    _reasoning_and_format(request, body)
    if request.origin != FORMAT:
        # Translated conversations are not stored at OpenAI; reasoning comes back encrypted so it
        # can be replayed statelessly on the next turn.
        body["store"] = False
        if "reasoning" in body and body["reasoning"].get("effort") not in (None, "none"):
            body["include"] = ["reasoning.encrypted_content"]
    if stream:
        body["stream"] = True
    else:
        body.pop("stream", None)
        body.pop("stream_options", None)
    return body


def new_item_id(prefix: str) -> str:
    """An output item id (``msg_…``, ``fc_…``, ``rs_…``, ``ctc_…``)."""
    return new_id(prefix)
