"""Agent bodies as Claude Code sends them: Anthropic Messages, the cache breakpoint on the newest message.

The Chat conversations of ``stage_trajectories``/``agent_sized`` translated by switchyard's own
codecs (Chat → IR → Anthropic), with what Claude Code adds: ``cache_control`` on the system
blocks and on the last block of the newest message only, so the previous turn's last message
comes back without it. Used by ``hot_path_instructions.py --modes agent-anth-stage-N`` and by
``tests/routers/stage/test_anthropic_decode_reuse.py``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

CACHE = {"type": "ephemeral"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with Claude Code's one message breakpoint: on the newest message's last block."""
    out = _strip(messages)
    last = copy.deepcopy(out[-1])
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    content[-1] = {**content[-1], "cache_control": dict(CACHE)}
    last["content"] = content
    return [*out[:-1], last]


def as_anthropic(chat_body: dict[str, Any]) -> dict[str, Any]:
    """A Chat body as the Anthropic Messages body that says the same (system and tools with breakpoints)."""
    from switchyard.wire.anthropic_messages import request_encode
    from switchyard.wire.openai_chat import request as chat_request

    request = chat_request.decode_request(json.loads(json.dumps(chat_body)))
    body = request_encode.encode_request(request, model=chat_body["model"], stream=False)
    system = body.get("system")
    if isinstance(system, str):
        body["system"] = [{"type": "text", "text": system, "cache_control": dict(CACHE)}]
    if body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": dict(CACHE)}
    body["messages"] = with_breakpoint(body["messages"])
    return body


def requests(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The requests an agent sends along ``body``'s conversation: up to each user message."""
    messages = _strip(body["messages"])
    return [with_breakpoint(messages[: i + 1]) for i, m in enumerate(messages) if m["role"] == "user"]
