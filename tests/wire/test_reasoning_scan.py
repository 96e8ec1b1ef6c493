"""Whether a conversation holds reasoning another provider issued: one scan of the part types
first (``wire/reasoning.any_foreign``), then the per-part check, deciding as the per-part check."""

from __future__ import annotations

import itertools

import pytest

from switchyard.protocol.messages import ContentPart, Message, ReasoningPart, TextPart, ToolCallPart
from switchyard.wire import reasoning


class _Thought(ReasoningPart):
    """A subclass of the reasoning part: still reasoning."""


def _reference(messages: list[Message], fmt: str) -> bool:
    return any(reasoning.is_foreign(p, fmt) for m in messages for p in m.content if isinstance(p, ReasoningPart))


PARTS: list[ContentPart] = [
    TextPart(text="plain"),
    ToolCallPart(id="c1", name="Read"),
    ReasoningPart(text="mine, unmarked"),
    ReasoningPart(text="signed", signature="s", provider="anthropic_messages"),
    ReasoningPart(encrypted="e", provider="openai_responses"),
    _Thought(text="signed", signature="s", provider="anthropic_messages"),
]


OPENING = [Message.of("user", "hi"), Message(role="assistant", content=[TextPart(text="on it")])]


@pytest.mark.parametrize("turns", [0, 20])  # a few messages are read part by part, more by type first
def test_it_decides_as_the_per_part_check(turns: int) -> None:
    for fmt in ("openai_chat", "anthropic_messages", "openai_responses"):
        for combo in itertools.product(range(len(PARTS)), repeat=2):
            parts = [PARTS[k] for k in combo]
            messages = [*OPENING * turns, Message.of("user", "go"), Message(role="assistant", content=parts)]
            assert reasoning.any_foreign(messages, fmt) == _reference(messages, fmt), (fmt, combo)


@pytest.mark.parametrize("turns", [0, 20])
def test_a_subclass_of_the_reasoning_part_counts(turns: int) -> None:
    messages = [*OPENING * turns, Message(role="assistant", content=[TextPart(text="a"), PARTS[-1]])]
    assert reasoning.any_foreign(messages, "openai_chat")
    assert not reasoning.any_foreign(messages, "anthropic_messages")
