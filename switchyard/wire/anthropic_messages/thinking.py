"""Extended thinking on Messages requests: the budget for a reasoning preference, and the rules
Anthropic enforces when thinking is on.

Layer: ``wire`` — imports ``protocol`` only.

Sources (Anthropic's extended-thinking guide): a forced ``tool_choice`` is incompatible with
thinking; ``budget_tokens`` must be at least 1024 and below ``max_tokens``; ``temperature`` (other
than 1), ``top_k`` and ``top_p`` below 0.95 are refused; during a tool loop the assistant turn whose
results come back must start with the thinking block Anthropic issued ("Preserving thinking
blocks").
"""

from __future__ import annotations

from typing import Any

from switchyard.protocol.request import ChatRequest
from switchyard.wire import diagnostics

EFFORT_BUDGET: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 32000,
}
"""Thinking budget for an OpenAI-style ``reasoning_effort`` (Anthropic's minimum is 1024)."""

MIN_BUDGET = 1024


def fit_budget(thinking: dict[str, Any], max_tokens: int) -> dict[str, Any] | None:
    """``thinking`` with its budget below ``max_tokens``, as Anthropic requires
    (``budget_tokens < max_tokens``): unchanged when it fits, else cut to ``max_tokens - 1``,
    or ``None`` when that would go under the 1,024-token minimum."""
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < max_tokens:
        return thinking
    if max_tokens - 1 >= MIN_BUDGET:
        return {**thinking, "budget_tokens": max_tokens - 1}
    return None


def _thinking_config(request: ChatRequest, extra: dict[str, Any]) -> dict[str, Any] | None:
    config = request.reasoning
    raw = extra.get("thinking")
    if config is None:
        return raw if isinstance(raw, dict) else None
    if config.enabled is False or config.effort == "none":
        return None
    if config.enabled is None and config.effort is None and config.budget_tokens is None:
        return None
    if isinstance(raw, dict) and raw.get("type") in ("enabled", "adaptive"):
        return raw
    budget = config.budget_tokens or EFFORT_BUDGET.get(config.effort or "", EFFORT_BUDGET["medium"])
    return {"type": "enabled", "budget_tokens": max(MIN_BUDGET, budget)}


def open_loop_breaks_thinking(turns: list[Any]) -> bool:
    """Whether the last assistant turn uses tools without starting with a thinking block.

    With thinking on, Anthropic requires that turn to start with the (signed) thinking block it
    produced; reasoning from another provider cannot stand in for it.
    """
    for turn in reversed(turns):
        if not isinstance(turn, dict) or turn.get("role") != "assistant":
            continue
        blocks = (
            [b for b in turn.get("content") or [] if isinstance(b, dict)]
            if isinstance(turn.get("content"), list)
            else []
        )
        uses_tools = any(b.get("type") == "tool_use" for b in blocks)
        return uses_tools and blocks[0].get("type") not in ("thinking", "redacted_thinking")
    return False


def apply_thinking(
    body: dict[str, Any], request: ChatRequest, extra: dict[str, Any], *, default_max_tokens: int
) -> None:
    """Sets (or leaves out) ``thinking`` on an encoded Messages body, within Anthropic's rules.

    Thinking is left out for a forced tool choice and for an open tool loop whose assistant turn
    does not start with an Anthropic thinking block; the budget is fitted under ``max_tokens``
    (``default_max_tokens`` is added when the caller gave no cap); sampling settings Anthropic
    refuses with thinking are dropped. Each change is reported.
    """
    body.pop("thinking", None)
    thinking = _thinking_config(request, extra)
    if thinking is None or thinking.get("type") == "disabled":
        if thinking is not None:
            body["thinking"] = thinking
        return
    choice = body.get("tool_choice") or {}
    if choice.get("type") in ("any", "tool"):
        diagnostics.report(
            "anthropic_messages.thinking_disabled_forced_tool",
            "thinking disabled for this call: Anthropic rejects thinking with a forced tool choice",
        )
        return
    if open_loop_breaks_thinking(body["messages"]):
        diagnostics.report(
            "anthropic_messages.thinking_disabled_open_tool_loop",
            "thinking disabled for this call: the open tool turn has no Anthropic thinking block to start with",
        )
        return
    if thinking.get("type") == "enabled":
        budget = int(thinking.get("budget_tokens") or MIN_BUDGET)
        if body["max_tokens"] <= budget and request.max_tokens is None:
            body["max_tokens"] = budget + default_max_tokens
        elif body["max_tokens"] <= budget:
            fitted = fit_budget({**thinking, "budget_tokens": budget}, body["max_tokens"])
            if fitted is None:
                diagnostics.report(
                    "anthropic_messages.thinking_disabled_small_max_tokens",
                    f"thinking disabled: max_tokens leaves no room for Anthropic's {MIN_BUDGET}-token minimum budget",
                )
                return
            thinking = fitted
    body["thinking"] = thinking
    # Anthropic rejects sampling overrides while thinking.
    for key in ("temperature", "top_k"):
        if key in body and not (key == "temperature" and body[key] == 1):
            diagnostics.report(f"anthropic_messages.{key}_dropped_thinking", f"{key} is not allowed with thinking")
            del body[key]
    if isinstance(body.get("top_p"), int | float) and body["top_p"] < 0.95:
        diagnostics.report("anthropic_messages.top_p_dropped_thinking", "top_p < 0.95 is not allowed with thinking")
        del body["top_p"]


def thinking_turn_missing(body: dict[str, Any]) -> bool:
    """Whether a caller's Messages body enables thinking while its open tool turn lacks the
    thinking block Anthropic requires there (history written by another model or tier)."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return False
    messages = body.get("messages")
    return isinstance(messages, list) and open_loop_breaks_thinking(messages)
