"""Simulated judge models for the fake upstream: brains that answer verdict JSON.

Used by the integration tests, the demo and the escalation latency benchmark. A brain sees the
judge request exactly as it reached the upstream (Chat Completions JSON), so everything the
router sent — instructions, transcript, ``response_format`` — can be inspected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from switchyard.testing.fake_upstream import Brain, FakeModel, Turn, last_user_text

Decide = Callable[[str, dict[str, Any]], dict[str, Any]]
"""``(transcript shown to the judge, request body) -> verdict``."""


def verdict_kind(body: dict[str, Any]) -> str:
    """``capability``, ``escalation``, ``hand_back`` or ``custom``: which judge is being asked."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
    messages = body.get("messages") or [{}]
    system = str(messages[0].get("content") or "") if messages[0].get("role") == "system" else ""
    props = set((schema or {}).get("properties") or {})
    text = system if schema is None else ""
    if "p_solve" in props or '"p_solve"' in text:
        return "capability"
    if "hand_back" in props or '"hand_back"' in text:
        return "hand_back"
    if "escalate" in props or '"escalate"' in text:
        return "escalation"
    return "custom"


def verdict_brain(decide: Decide, *, in_reasoning: bool = False, fenced: bool = False) -> Brain:
    """A brain that answers ``decide(transcript, body)`` as JSON.

    Args:
        decide: Produces the verdict.
        in_reasoning: Put the JSON in the reasoning field and leave ``content`` empty, as
            reasoning judges (Nemotron, DeepSeek) do.
        fenced: Wrap the JSON in a Markdown code fence.
    """

    def brain(body: dict[str, Any], model: FakeModel) -> Turn:
        text = json.dumps(decide(last_user_text(body), body))
        if fenced:
            text = f"```json\n{text}\n```"
        if in_reasoning:
            return Turn(text="", reasoning=f"Weighing the evidence. The verdict: {text}")
        return Turn(text=text)

    return brain


def capability_brain(p_solve: Callable[[str], float]) -> Brain:
    """A capability judge whose forecast is ``p_solve(transcript)``; rule and boundary follow it."""

    def decide(view: str, body: dict[str, Any]) -> dict[str, Any]:
        p = p_solve(view)
        rule, boundary = (
            ("SUP-1", "supported") if p >= 0.7 else ("UNC-1", "uncertain") if p >= 0.4 else ("LIM-2", "unsupported")
        )
        return {"crux": "simulated forecast", "primary_rule": rule, "capability_boundary": boundary, "p_solve": p}

    return verdict_brain(decide)


def escalation_brain(escalate: Callable[[str], bool], hand_back: Callable[[str], bool] | None = None) -> Brain:
    """An escalation judge: ``escalate(transcript)`` for turn reviews, ``hand_back(transcript)``
    for recovery checks (default: never hand back)."""

    def decide(view: str, body: dict[str, Any]) -> dict[str, Any]:
        if verdict_kind(body) == "hand_back":
            back = bool(hand_back(view)) if hand_back is not None else False
            return {"reason": "simulated hand-back check", "hand_back": back}
        return {"reason": "simulated review", "escalate": bool(escalate(view))}

    return verdict_brain(decide)


def under_review(view: str) -> str:
    """The part of an escalation transcript that shows the turn under review."""
    marker = "## Turn under review"
    return view[view.index(marker) :] if marker in view else ""
