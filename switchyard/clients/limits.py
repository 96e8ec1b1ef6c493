"""Output limits: a request's token cap is clamped to what the target can produce.

Layer: ``clients`` — applied to the body just before it is sent, whichever way it was built
(the caller's body replayed verbatim, or encoded from the IR).

Agents ask for large completions (Hermes Agent sends ``max_tokens`` of 65,536 to 128,000; Claude
Code 32,000) whatever model serves them. A provider answers a cap above the model's output
limit, or a prompt plus cap above its context window (vLLM's ``max_model_len``; Anthropic's
window), with a 400 — for a request that would have been fine with a smaller cap. So the cap is
lowered, with a counted diagnostic, to:

* the target's ``max_output_tokens`` (configured per target), and
* when the target's context window is known (configured, or read from ``/v1/models`` at
  start-up), the room the prompt leaves in it: ``window - estimated prompt tokens``. The
  estimate (:func:`switchyard.wire.tokens.estimate_input_tokens`) is raised by
  ``PROMPT_MARGIN`` so that a prompt it underestimates still fits. When no room is left the cap
  is left alone: the prompt itself overflows, and the context-window fallback deals with that.
"""

from __future__ import annotations

from typing import Any

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import diagnostics
from switchyard.wire.anthropic_messages.thinking import fit_budget
from switchyard.wire.tokens import estimate_input_tokens

OUTPUT_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
"""Body fields that cap a completion, in the three formats."""

PROMPT_MARGIN = 0.25
"""Share added to the prompt estimate before computing the room left in the window."""

MIN_OUTPUT = 16
"""Never clamp below this (OpenAI Responses rejects ``max_output_tokens`` under 16)."""

_CHARS_PER_TOKEN = 4


def output_cap(request: ChatRequest, target: TargetInfo, asked: int, body_bytes: int | None = None) -> int | None:
    """The cap to send instead of ``asked``, or ``None`` when ``asked`` may go out as it is.

    Args:
        request: The request (its prompt is estimated only when the cap might not fit).
        target: The target, with its known limits.
        asked: The cap in the body.
        body_bytes: Size of the serialized body, when known: a quarter of it bounds the
            estimate from above (every character the estimate counts is in the body, and the
            JSON around each message outweighs its per-message allowance), so a cap that fits
            beside that bound needs no estimate.
    """
    cap = target.max_output_tokens
    window = target.context_window
    # The prompt needs no estimate when even a generous bound leaves room for the cap.
    bound = int(body_bytes / _CHARS_PER_TOKEN * (1 + PROMPT_MARGIN)) if body_bytes is not None else window
    if window and asked > window // 8 and asked + (bound or 0) > window:
        prompt = int(estimate_input_tokens(request) * (1 + PROMPT_MARGIN))
        room = window - prompt
        if room >= MIN_OUTPUT:
            cap = room if cap is None else min(cap, room)
    if cap is None or asked <= cap:
        return None
    return max(cap, MIN_OUTPUT)


def may_clamp(body: dict[str, Any], target: TargetInfo) -> bool:
    """Whether :func:`clamp_output` could change ``body`` (a few dict lookups)."""
    limit = target.max_output_tokens
    window = target.context_window
    if limit is None and window is None:
        return False
    for key in OUTPUT_KEYS:
        asked = body.get(key)
        if isinstance(asked, int) and ((limit is not None and asked > limit) or (window and asked > window // 8)):
            return True
    return False


def clamp_output(body: dict[str, Any], request: ChatRequest, target: TargetInfo, body_bytes: int | None = None) -> bool:
    """Lowers the body's completion cap to what ``target`` can produce (in place).

    Returns:
        Whether the body changed.
    """
    changed = False
    if target.max_output_tokens is None and target.context_window is None:
        return changed
    for key in OUTPUT_KEYS:
        asked = body.get(key)
        if not isinstance(asked, int) or isinstance(asked, bool):
            continue
        cap = output_cap(request, target, asked, body_bytes)
        if cap is None:
            continue
        changed = True
        body[key] = cap
        diagnostics.report(
            "output_limit.clamped",
            f"{key}={asked} exceeds what target {target.name!r} can produce; sent {cap}",
        )
        _fit_thinking(body, cap)
    return changed


def _fit_thinking(body: dict[str, Any], cap: int) -> None:
    """Anthropic requires ``thinking.budget_tokens < max_tokens``: shrink or drop the budget."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict):
        return
    fitted = fit_budget(thinking, cap)
    if fitted is not None:
        body["thinking"] = fitted
    else:
        del body["thinking"]
        diagnostics.report("output_limit.thinking_dropped", "the clamped max_tokens leaves no room for thinking")
