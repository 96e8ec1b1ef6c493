"""The fake upstream's Anthropic Messages endpoint (``/v1/messages``, ``/count_tokens``).

It accepts and rejects what the real API does where translation can go wrong: ``max_tokens``
is required, ``temperature`` is at most 1, tool ids must match ``^[a-zA-Z0-9_-]+$``, every
``tool_result`` must answer a ``tool_use`` of the previous assistant turn and come first in
its user turn, text blocks must not be empty, at most four ``cache_control`` markers, and —
with thinking on — no forced tool choice, a final tool-using assistant turn must start with a
thinking block while its tool loop is open, and every ``thinking`` block must carry a signature
this server issued. ``system`` entries inside ``messages`` are accepted only with the
``mid-conversation-system`` beta flag; unknown top-level fields are rejected. Each rule and its
source in Anthropic's documentation is listed in ``docs/fakes.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from switchyard.testing.fake_common import (
    FakeModel,
    Turn,
    estimate_tokens,
    pieces,
    prompt_text,
    signature_for,
    usage_numbers,
)

_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


class Invalid(Exception):
    """A request the real API would answer with 400."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def view(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat-shaped view of a Messages request, for the brains."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text(system)})
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if msg.get("role") == "system":
            messages.append({"role": "system", "content": _text(content)})
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for r in results:
            messages.append({"role": "tool", "tool_call_id": r.get("tool_use_id"), "content": _text(r.get("content"))})
        calls = [
            {
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name"), "arguments": orjson.dumps(b.get("input")).decode()},
            }
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        text = _text([b for b in blocks if isinstance(b, dict)])
        if text or calls or not results:
            entry: dict[str, Any] = {"role": msg.get("role"), "content": text}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
    tools = [
        {"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}
        for t in body.get("tools") or []
    ]
    choice = body.get("tool_choice") or {}
    mapped: Any = {"any": "required", "auto": "auto", "none": "none"}.get(str(choice.get("type")))
    if choice.get("type") == "tool":
        mapped = {"type": "function", "function": {"name": choice.get("name")}}
    return {"model": body.get("model"), "messages": messages, "tools": tools, "tool_choice": mapped}


def thinking_on(body: dict[str, Any]) -> bool:
    """Whether the request enables extended thinking."""
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")


def _check_blocks(i: int, msg: dict[str, Any], previous_uses: set[str]) -> set[str]:
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            raise Invalid(f"messages.{i}: content must be non-empty")
        return set()
    if not isinstance(content, list) or not content:
        raise Invalid(f"messages.{i}.content: must be a non-empty list")
    uses: set[str] = set()
    seen_other = False
    for j, block in enumerate(content):
        kind = block.get("type")
        where = f"messages.{i}.content.{j}"
        if kind == "text" and not block.get("text"):
            raise Invalid(f"{where}: text content blocks must be non-empty")
        if kind == "tool_use":
            if not _ID.match(str(block.get("id", ""))):
                raise Invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
            if not isinstance(block.get("input"), dict):
                raise Invalid(f"{where}.input: Input should be a valid dictionary")
            uses.add(block["id"])
        elif kind == "tool_result":
            if seen_other:
                raise Invalid(f"{where}: tool_result blocks must come before any other content in a user turn")
            if block.get("tool_use_id") not in previous_uses:
                raise Invalid(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {block.get('tool_use_id')}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
        elif kind == "thinking":
            if block.get("signature") != signature_for(str(block.get("thinking", ""))):
                raise Invalid(f"{where}: Invalid `signature` in `thinking` block")
        elif kind == "redacted_thinking":
            if not str(block.get("data", "")).startswith("EmR"):
                raise Invalid(f"{where}: Invalid `data` in `redacted_thinking` block")
        else:
            seen_other = True
    return uses


KNOWN = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
        "inference_geo",
    }
)
"""Top-level fields of the Messages API (its reference and the beta features Claude Code uses);
anything else is answered ``Extra inputs are not permitted``."""

MID_CONVERSATION = "mid-conversation-"
"""Prefix of the ``anthropic-beta`` flags that allow ``system`` entries inside ``messages``
(Claude Code 2.1 sends ``mid-conversation-tool-changes-2026-07-01``; issue 12 saw
``mid-conversation-system-2026-04-07``)."""


def _beta(headers: Mapping[str, str] | None) -> set[str]:
    raw = (headers or {}).get("anthropic-beta", "")
    return {flag.strip() for flag in raw.split(",") if flag.strip()}


def _check_system_entry(i: int, msg: dict[str, Any], beta: set[str]) -> None:
    if not any(flag.startswith(MID_CONVERSATION) for flag in beta):
        raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            raise Invalid(f"messages.{i}: content must be non-empty")
        return
    if not isinstance(content, list) or not content:
        raise Invalid(f"messages.{i}.content: must be a non-empty list")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text" or not block.get("text"):
            raise Invalid(f"messages.{i}.content.{j}: system messages take non-empty text blocks only")


def validate(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
    """Raises :class:`Invalid` for requests the real Messages API rejects.

    Args:
        body: The request body.
        headers: The request headers (lower-case names); ``anthropic-beta`` flags unlock beta
            shapes such as ``system`` entries inside ``messages``.
    """
    for key in body:
        if key not in KNOWN:
            raise Invalid(f"{key}: Extra inputs are not permitted")
    beta = _beta(headers)
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise Invalid("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: Field required")
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        raise Invalid("temperature: Input should be less than or equal to 1")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise Invalid("system: Input should be a valid string or list of text blocks")
    previous: set[str] = set()
    for i, msg in enumerate(messages):
        if msg.get("role") == "system":
            _check_system_entry(i, msg, beta)
            continue
        if msg.get("role") not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        uses = _check_blocks(i, msg, previous if msg.get("role") == "user" else set())
        if msg.get("role") == "assistant":
            previous = uses
    for tool in body.get("tools") or []:
        if "input_schema" in tool and (tool.get("input_schema") or {}).get("type") != "object":
            raise Invalid(f"tools.{tool.get('name')}.input_schema.type: Input should be 'object'")
    markers = orjson.dumps(body).count(b'"cache_control"')
    if markers > 4:
        raise Invalid(f"A maximum of 4 blocks with cache_control may be provided. Found {markers}.")
    if thinking_on(body):
        _check_thinking(body, messages)


def _check_thinking(body: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise Invalid("Thinking may not be enabled when tool_choice forces tool use.")
    if body.get("temperature") not in (None, 1):
        raise Invalid("`temperature` may only be set to 1 when thinking is enabled.")
    budget = (body.get("thinking") or {}).get("budget_tokens")
    if isinstance(budget, int) and budget >= body["max_tokens"]:
        raise Invalid("`max_tokens` must be greater than `thinking.budget_tokens`.")
    # Anthropic's extended-thinking guide ("Preserving thinking blocks"): during tool use the
    # thinking block of the assistant turn whose tool results are being returned must come back
    # first; thinking of earlier, finished turns may be left out. So only the last assistant
    # turn is checked, and only while its tool loop is open (tool results follow it).
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg.get("role") != "assistant":
            continue
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if not _answered_by_results(messages[i + 1 :]):
            break
        if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in (
            "thinking",
            "redacted_thinking",
        ):
            raise Invalid(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
            )
        break


def _answered_by_results(after: list[dict[str, Any]]) -> bool:
    """Whether the user turn after an assistant turn returns tool results (the loop is open)."""
    for msg in after:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        return isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
    return False


def error_body(kind: str, message: str) -> dict[str, Any]:
    """An Anthropic error envelope."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}


def count_tokens(body: dict[str, Any]) -> int:
    """What the fake counts for a request (4 chars per token over its Chat view)."""
    return estimate_tokens(prompt_text(view(body))) + 3


def _blocks(turn: Turn, thinking: bool, ids: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if thinking:
        text = turn.reasoning or "Let me think about this."
        blocks.append({"type": "thinking", "thinking": text, "signature": signature_for(text)})
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for name, args in turn.tool_calls:
        value = {"input": args} if isinstance(args, str) else args
        blocks.append({"type": "tool_use", "id": f"toolu_fake{next(ids)}", "name": name, "input": value})
    return blocks


def usage(request: dict[str, Any], turn: Turn, model: FakeModel) -> dict[str, Any]:
    """Anthropic usage: ``input_tokens`` is the uncached part of the prompt."""
    n = usage_numbers(count_tokens(request), turn, model)
    out: dict[str, Any] = {
        "input_tokens": n["prompt"] - n["cache_read"] - n["cache_write"],
        "output_tokens": n["completion"],
        "cache_creation_input_tokens": n["cache_write"],
        "cache_read_input_tokens": n["cache_read"],
    }
    if n["reasoning"]:
        out["output_tokens_details"] = {"thinking_tokens": n["reasoning"]}
    return out


def message(request: dict[str, Any], model: FakeModel, turn: Turn, ids: Any) -> dict[str, Any]:
    """A complete ``message`` answer."""
    blocks = _blocks(turn, thinking_on(request), ids)
    stop = STOP.get(turn.finish_reason or "", "tool_use" if turn.tool_calls else "end_turn")
    return {
        "id": f"msg_fake{next(ids)}",
        "type": "message",
        "role": "assistant",
        "model": model.served,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage(request, turn, model),
    }


def _event(payload: dict[str, Any]) -> bytes:
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def frames(full: dict[str, Any]) -> list[bytes]:
    """The answer ``full`` (a :func:`message`) as Anthropic SSE frames (as the real API streams them)."""
    start = {**full, "content": [], "stop_reason": None, "usage": {**full["usage"], "output_tokens": 1}}
    out = [_event({"type": "message_start", "message": start}), _event({"type": "ping"})]
    for index, block in enumerate(full["content"]):
        kind = block["type"]
        if kind == "thinking":
            out.append(
                _event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    }
                )
            )
            for piece in pieces(block["thinking"]):
                out.append(
                    _event(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "thinking_delta", "thinking": piece},
                        }
                    )
                )
            out.append(
                _event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    }
                )
            )
        elif kind == "text":
            out.append(
                _event({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            )
            for piece in pieces(block["text"]):
                out.append(
                    _event(
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                    )
                )
        else:
            out.append(_event({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}))
            args = orjson.dumps(block["input"]).decode()
            for piece in ["", *pieces(args, 9)]:
                out.append(
                    _event(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        }
                    )
                )
        out.append(_event({"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": full["stop_reason"], "stop_sequence": None}
    # As in Anthropic's streaming guide: message_start carries the input counts, the final
    # message_delta the output count only (a consumer must merge, not replace).
    final_usage = {"output_tokens": full["usage"]["output_tokens"]}
    out.append(_event({"type": "message_delta", "delta": delta, "usage": final_usage}))
    out.append(_event({"type": "message_stop"}))
    return out


ERROR_FRAME = _event(error_body("overloaded_error", "Overloaded"))
"""An in-band error event (``error-mid`` fault)."""

FAULT_BODIES: dict[str, tuple[int, dict[str, Any]]] = {
    "fail-500": (500, error_body("api_error", "internal failure")),
    "fail-503": (529, error_body("overloaded_error", "Overloaded")),
    "fail-429": (429, error_body("rate_limit_error", "rate limited")),
    "fail-401": (401, error_body("authentication_error", "invalid x-api-key")),
    "fail-400": (400, error_body("invalid_request_error", "temperature: Input should be less than or equal to 1")),
    "overflow-400": (400, error_body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")),
}
