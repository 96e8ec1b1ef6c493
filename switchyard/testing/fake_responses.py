"""The fake upstream's OpenAI Responses endpoint (``/v1/responses``, ``/input_tokens``).

It rejects what OpenAI rejects where translation can go wrong: unknown top-level parameters,
function tools that ask for strict mode (``"strict": true``; without the field OpenAI normalizes
the schema instead of rejecting it) whose schema does not meet the strict rules, ``*_output`` items
without a matching call, reasoning items this server did not issue, ``max_output_tokens``
below 16. Streams use OpenAI's named events with sequence numbers; a model whose name contains
``vllm`` streams like vLLM instead (``data:`` only, ending with ``[DONE]``).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from switchyard.testing.fake_common import (
    FakeModel,
    Turn,
    encrypted_for,
    estimate_tokens,
    pieces,
    prompt_text,
    usage_numbers,
)

KNOWN = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "max_tool_calls",
        "temperature",
        "top_p",
        "stream",
        "stream_options",
        "reasoning",
        "text",
        "store",
        "include",
        "previous_response_id",
        "conversation",
        "metadata",
        "user",
        "truncation",
        "background",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
        "top_logprobs",
        "prompt",
        "context_management",
        "client_metadata",
    }
)


class Invalid(Exception):
    """A request OpenAI would answer with 400 (``status`` overrides)."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def view(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat-shaped view of a Responses request, for the brains."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role"), "content": _text(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            args = item.get("arguments") if kind == "function_call" else item.get("input")
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": args},
            }
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text(item.get("output"))})
    tools = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "custom":
            tools.append({"type": "custom", "custom": {"name": tool.get("name")}})
        elif tool.get("type") == "function":
            tools.append(
                {"type": "function", "function": {"name": tool.get("name"), "parameters": tool.get("parameters")}}
            )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    return {"model": body.get("model"), "messages": messages, "tools": tools, "tool_choice": choice}


def _strict_ok(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "object":
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False or set(schema.get("required") or []) != set(props):
            return False
        return all(_strict_ok(p) or not isinstance(p, dict) or p.get("type") != "object" for p in props.values())
    return True


def validate(body: dict[str, Any]) -> None:
    """Raises :class:`Invalid` for requests OpenAI's Responses API rejects."""
    for key in body:
        if key not in KNOWN:
            raise Invalid(f"Unknown parameter: '{key}'.", param=key)
    if "input" not in body:
        raise Invalid("Missing required parameter: 'input'.", param="input")
    limit = body.get("max_output_tokens")
    if isinstance(limit, int) and limit < 16:
        raise Invalid("Invalid 'max_output_tokens': integer below minimum value 16.", param="max_output_tokens")
    for tool in body.get("tools") or []:
        # OpenAI's function-calling guide (strict mode): "If you send strict: true and your schema
        # does not meet the requirements above, the request will be rejected"; when strict is
        # omitted, Responses normalizes the schema into strict mode instead of rejecting it.
        if tool.get("type") == "function" and tool.get("strict") is True and not _strict_ok(tool.get("parameters")):
            raise Invalid(
                f"Invalid schema for function '{tool.get('name')}': In context=(), 'additionalProperties' is "
                "required to be supplied and to be false.",
                param="tools",
            )
    calls: dict[str, str] = {}
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        kind = item.get("type", "message")
        if kind in ("function_call", "custom_tool_call"):
            calls[str(item.get("call_id"))] = kind
        elif kind in ("function_call_output", "custom_tool_call_output"):
            expected = "function_call" if kind == "function_call_output" else "custom_tool_call"
            if calls.get(str(item.get("call_id"))) != expected:
                raise Invalid(
                    f"No tool call found for {kind.replace('_', ' ')} with call_id {item.get('call_id')}.",
                    param=f"input[{i}]",
                )
        elif kind == "reasoning":
            encrypted = item.get("encrypted_content")
            if encrypted is None:
                raise Invalid(f"Item with id '{item.get('id')}' not found.", status=404, param=f"input[{i}]")
            summary = "".join(s.get("text", "") for s in item.get("summary") or [])
            if encrypted != encrypted_for(summary):
                raise Invalid("The encrypted content could not be verified.", param=f"input[{i}]")


def error_body(
    message: str, kind: str = "invalid_request_error", code: str | None = None, param: Any = None
) -> dict[str, Any]:
    """An OpenAI error envelope."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def count_tokens(body: dict[str, Any]) -> int:
    """What the fake counts for a request."""
    return estimate_tokens(prompt_text(view(body))) + 3


def reasoning_wanted(body: dict[str, Any]) -> bool:
    """Whether the request asks for reasoning."""
    return (body.get("reasoning") or {}).get("effort") not in (None, "none")


def _items(request: dict[str, Any], turn: Turn, ids: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reasoning_wanted(request):
        text = turn.reasoning or "Thinking it over."
        item: dict[str, Any] = {
            "id": f"rs_fake{next(ids)}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
        }
        if "reasoning.encrypted_content" in (request.get("include") or []):
            item["encrypted_content"] = encrypted_for(text)
        items.append(item)
    if turn.text:
        items.append(
            {
                "id": f"msg_fake{next(ids)}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for name, args in turn.tool_calls:
        n = next(ids)
        if isinstance(args, str):
            items.append(
                {
                    "id": f"ctc_fake{n}",
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": f"call_fake{n}",
                    "name": name,
                    "input": args,
                }
            )
        else:
            items.append(
                {
                    "id": f"fc_fake{n}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": f"call_fake{n}",
                    "name": name,
                    "arguments": orjson.dumps(args).decode(),
                }
            )
    return items


def usage(request: dict[str, Any], turn: Turn, model: FakeModel) -> dict[str, Any]:
    """Responses usage (``input_tokens`` includes cached tokens)."""
    n = usage_numbers(count_tokens(request), turn, model)
    return {
        "input_tokens": n["prompt"],
        "input_tokens_details": {"cached_tokens": n["cache_read"]},
        "output_tokens": n["completion"],
        "output_tokens_details": {"reasoning_tokens": n["reasoning"]},
        "total_tokens": n["prompt"] + n["completion"],
    }


def response(request: dict[str, Any], model: FakeModel, turn: Turn, ids: Any) -> dict[str, Any]:
    """A complete ``response`` object."""
    incomplete = turn.finish_reason in ("length", "content_filter")
    reason = "max_output_tokens" if turn.finish_reason == "length" else "content_filter"
    return {
        "id": f"resp_fake{next(ids)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": reason} if incomplete else None,
        "error": None,
        "model": model.served,
        "output": _items(request, turn, ids),
        "usage": usage(request, turn, model),
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
    }


class _Framer:
    def __init__(self, named: bool) -> None:
        self.seq = 0
        self.named = named
        self.out: list[bytes] = []

    def __call__(self, payload: dict[str, Any]) -> None:
        payload = {**payload, "sequence_number": self.seq}
        self.seq += 1
        data = b"data: " + orjson.dumps(payload) + b"\n\n"
        self.out.append((b"event: " + payload["type"].encode() + b"\n" + data) if self.named else data)


def _item_frames(emit: _Framer, index: int, item: dict[str, Any]) -> None:
    kind = item["type"]
    base = {"item_id": item["id"], "output_index": index}
    if kind == "reasoning":
        emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "summary": [], "encrypted_content": None},
            }
        )
        text = item["summary"][0]["text"]
        emit(
            {
                "type": "response.reasoning_summary_part.added",
                **base,
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            }
        )
        for piece in pieces(text):
            emit({"type": "response.reasoning_summary_text.delta", **base, "summary_index": 0, "delta": piece})
        emit({"type": "response.reasoning_summary_text.done", **base, "summary_index": 0, "text": text})
        emit({"type": "response.reasoning_summary_part.done", **base, "summary_index": 0, "part": item["summary"][0]})
    elif kind == "message":
        emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            }
        )
        part = item["content"][0]
        emit({"type": "response.content_part.added", **base, "content_index": 0, "part": {**part, "text": ""}})
        for piece in pieces(part["text"]):
            emit({"type": "response.output_text.delta", **base, "content_index": 0, "delta": piece, "logprobs": []})
        emit({"type": "response.output_text.done", **base, "content_index": 0, "text": part["text"], "logprobs": []})
        emit({"type": "response.content_part.done", **base, "content_index": 0, "part": part})
    elif kind == "function_call":
        emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "arguments": ""},
            }
        )
        for piece in pieces(item["arguments"], 9):
            emit({"type": "response.function_call_arguments.delta", **base, "delta": piece})
        emit(
            {
                "type": "response.function_call_arguments.done",
                **base,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    else:
        emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "input": ""},
            }
        )
        for piece in pieces(item["input"], 9):
            emit({"type": "response.custom_tool_call_input.delta", **base, "delta": piece})
        emit({"type": "response.custom_tool_call_input.done", **base, "input": item["input"]})
    emit({"type": "response.output_item.done", "output_index": index, "item": item})


def frames(request: dict[str, Any], model: FakeModel, turn: Turn, ids: Any) -> list[bytes]:
    """The answer as a Responses event stream."""
    full = response(request, model, turn, ids)
    named = "vllm" not in model.name
    emit = _Framer(named)
    start = {**full, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    emit({"type": "response.created", "response": start})
    emit({"type": "response.in_progress", "response": start})
    for index, item in enumerate(full["output"]):
        _item_frames(emit, index, item)
    emit({"type": "response.incomplete" if full["status"] == "incomplete" else "response.completed", "response": full})
    if not named:
        emit.out.append(b"data: [DONE]\n\n")
    return emit.out


def error_frame() -> bytes:
    """A ``response.failed`` event (``error-mid`` fault)."""
    failed = {
        "id": "resp_fake_failed",
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "The model failed mid-answer."},
    }
    payload = {"type": "response.failed", "sequence_number": 99, "response": failed}
    return b"event: response.failed\ndata: " + orjson.dumps(payload) + b"\n\n"


FAULT_BODIES: dict[str, tuple[int, dict[str, Any]]] = {
    "fail-500": (500, error_body("internal failure", "server_error")),
    "fail-503": (503, error_body("overloaded", "server_error", "server_is_overloaded")),
    "fail-429": (429, error_body("rate limited", "rate_limit_error", "rate_limit_exceeded")),
    "fail-401": (401, error_body("invalid api key", "authentication_error", "invalid_api_key")),
    "fail-400": (400, error_body("temperature must be <= 2", param="temperature")),
    "overflow-400": (
        400,
        error_body("Your input exceeds the context window of this model.", code="context_length_exceeded"),
    ),
}
