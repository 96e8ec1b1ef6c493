"""The fake upstream's OpenAI Chat Completions endpoint (``/v1/chat/completions``), as vLLM serves it.

It rejects what vLLM's (and, where stricter, OpenAI's) request validation rejects — see
:func:`vllm_problem` and ``docs/fakes.md`` — and renders a brain's turn as a ``chat.completion``
body or as SSE chunks (vLLM-style ``reasoning``, function and custom tool calls, usage chunk).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson

from switchyard.testing.fake_common import FakeModel, Turn, estimate_tokens, pieces, prompt_text, usage_numbers

FAULT_BODIES: dict[str, tuple[int, dict[str, Any]]] = {
    "fail-500": (500, {"error": {"message": "internal failure", "type": "InternalServerError", "code": 500}}),
    "fail-503": (503, {"error": {"message": "overloaded", "type": "ServiceUnavailableError", "code": 503}}),
    "fail-429": (
        429,
        {"error": {"message": "rate limited", "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
    ),
    "fail-403": (
        403,
        {
            "error": {
                "message": "your organization may not use this model",
                "type": "permission_error",
                "code": "model_access_denied",
            }
        },
    ),
    "fail-401": (
        401,
        {"error": {"message": "invalid api key", "type": "authentication_error", "code": "invalid_api_key"}},
    ),
    "fail-400": (
        400,
        {
            "error": {
                "message": "temperature must be <= 2",
                "type": "BadRequestError",
                "code": 400,
                "param": "temperature",
            }
        },
    ),
    "overflow-400": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, you requested 9000 "
                "tokens. Please reduce the length of the messages.",
                "type": "BadRequestError",
                "code": 400,
            }
        },
    ),
}
"""Chat error bodies by fault name (also the fallback table of the other endpoints)."""

ERROR_FRAME = (
    b"data: "
    + orjson.dumps({"error": {"message": "engine failed mid-answer", "type": "InternalServerError", "code": 500}})
    + b"\n\ndata: [DONE]\n\n"
)


def vllm_problem(request: dict[str, Any]) -> str | None:
    """What vLLM's request validation would reject (``None`` when it accepts the request)."""
    tools = request.get("tools")
    if tools is not None:
        if not tools:
            return "`tools` must not be an empty array; omit the field instead"
        if any(t.get("type", "function") != "function" for t in tools):
            return "only function tools are supported"
    elif request.get("tool_choice") not in (None, "none"):
        return "When using `tool_choice`, `tools` must be set."
    if "stream_options" in request and not request.get("stream"):
        return "Stream options can only be defined when `stream=True`."
    for i, message in enumerate(request.get("messages") or []):
        if isinstance(message, dict) and message.get("tool_calls") == []:
            # OpenAI's rule (vLLM tolerates it): an array, when given, has at least one call.
            return (
                f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead."
            )
    return None


def tool_order_problem(request: dict[str, Any]) -> str | None:
    """OpenAI's ordering rule for tool messages (``None`` when the request keeps it).

    A ``tool`` message answers a call of the assistant message with ``tool_calls`` before it
    (only other tool messages of the same batch may stand between them), by its
    ``tool_call_id``. OpenAI answers 400 otherwise; vLLM does not check, but a conversation
    that breaks the rule is one the model never saw whole (a tool result without its call).
    """
    open_calls: set[str] | None = None
    for i, message in enumerate(request.get("messages") or []):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            if open_calls is None:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                    f"with 'tool_calls'. (param: messages.[{i}].role)"
                )
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return (
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of previous "
                    f"message. (param: messages.[{i}].tool_call_id)"
                )
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        open_calls = {str(c.get("id")) for c in calls if isinstance(c, dict)} if calls else None
    return None


def usage(request: dict[str, Any], turn: Turn, model: FakeModel) -> dict[str, Any]:
    """The ``usage`` object of a completion (prompt size estimated from the request)."""
    n = usage_numbers(estimate_tokens(prompt_text(request)), turn, model)
    usage: dict[str, Any] = {
        "prompt_tokens": n["prompt"],
        "completion_tokens": n["completion"],
        "total_tokens": n["prompt"] + n["completion"],
    }
    if n["cache_read"] or n["cache_write"]:
        usage["prompt_tokens_details"] = {"cached_tokens": n["cache_read"], "cache_write_tokens": n["cache_write"]}
    if n["reasoning"]:
        usage["completion_tokens_details"] = {"reasoning_tokens": n["reasoning"]}
    return usage


def _calls(turn: Turn, request: dict[str, Any], ids: Iterator[int]) -> list[dict[str, Any]]:
    custom = {(t.get("custom") or {}).get("name") for t in request.get("tools") or [] if t.get("type") == "custom"}
    out: list[dict[str, Any]] = []
    for name, args in turn.tool_calls:
        call_id = f"call_{next(ids)}"
        if isinstance(args, str) and name in custom:
            out.append({"id": call_id, "type": "custom", "custom": {"name": name, "input": args}})
        elif isinstance(args, str):
            # Free-form text for a tool declared as a function: the model fills its one parameter.
            fn = {"name": name, "arguments": orjson.dumps({"input": args}).decode()}
            out.append({"id": call_id, "type": "function", "function": fn})
        else:
            fn = {"name": name, "arguments": orjson.dumps(args).decode()}
            out.append({"id": call_id, "type": "function", "function": fn})
    return out


def completion(request: dict[str, Any], model: FakeModel, turn: Turn, ids: Iterator[int]) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` body for the brain's turn."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message[model.reasoning_field] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = _calls(turn, request, ids)
    finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
    return {
        "id": f"chatcmpl-fake{next(ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model.served,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage(request, turn, model),
    }


def frames(request: dict[str, Any], model: FakeModel, turn: Turn, ids: Iterator[int]) -> list[bytes]:
    """The SSE frames of a streamed answer (usage chunk when asked, then ``[DONE]``)."""
    cid = f"chatcmpl-fake{next(ids)}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model.served,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    frames: list[bytes] = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({model.reasoning_field: piece}) for piece in pieces(turn.reasoning)]
    frames += [chunk({"content": piece}) for piece in pieces(turn.text)]
    for index, call in enumerate(_calls(turn, request, ids)):
        if call["type"] == "custom":
            first = {
                "index": index,
                "id": call["id"],
                "type": "custom",
                "custom": {"name": call["custom"]["name"], "input": ""},
            }
            frames.append(chunk({"tool_calls": [first]}))
            frames += [
                chunk({"tool_calls": [{"index": index, "custom": {"input": piece}}]})
                for piece in pieces(call["custom"]["input"], 12)
            ]
            continue
        fn = call["function"]
        first = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": fn["name"], "arguments": ""},
        }
        frames.append(chunk({"tool_calls": [first]}))
        frames += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces(fn["arguments"], 12)
        ]
    frames.append(chunk({}, turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")))
    options = request.get("stream_options") or {}
    if options.get("include_usage"):
        final = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model.served,
            "choices": [],
            "usage": usage(request, turn, model),
        }
        frames.append(b"data: " + orjson.dumps(final) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames
