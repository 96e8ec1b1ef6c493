"""The provider-neutral response and usage.

Layer: ``protocol`` — imports nothing of ours.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchyard.protocol.decision import ChoiceAnswer
from switchyard.protocol.messages import ContentPart, ReasoningPart, TextPart, ToolCallPart

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "content_filter", "pause_turn", "error"]
"""Why generation stopped, in Anthropic's vocabulary (the richest of the three)."""


class Usage(BaseModel):
    """Token usage of one model call.

    ``input_tokens`` is the whole prompt, cached part included (OpenAI's convention);
    Anthropic's uncached ``input_tokens`` is recovered as
    ``input_tokens - cache_read_tokens - cache_creation_tokens``.

    Attributes:
        input_tokens: Prompt tokens, cached and cache-creation tokens included.
        output_tokens: Generated tokens, reasoning included.
        cache_read_tokens: Prompt tokens served from the provider's prompt cache.
        cache_creation_tokens: Prompt tokens written to the prompt cache.
        reasoning_tokens: Generated tokens spent on reasoning.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """Prompt tokens neither read from nor written to the cache (Anthropic's ``input_tokens``)."""
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_creation_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ChatResponse(BaseModel):
    """One complete assistant turn.

    Attributes:
        id: Response id (the upstream's, or one we generated).
        model: The model that produced it (upstream model id).
        content: Reasoning, text and tool-call parts, in the order produced.
        stop_reason: Why generation stopped.
        stop_sequence: The stop string that matched, when ``stop_reason == "stop_sequence"``.
        usage: Token usage.
        created: Unix time of creation.
        choice: A decision model's answer to the request's typed-choice question (``None``
            for every other answer).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    model: str = ""
    content: list[ContentPart] = Field(default_factory=list)
    stop_reason: StopReason = "end_turn"
    stop_sequence: str | None = None
    usage: Usage = Field(default_factory=Usage)
    created: int = 0
    choice: ChoiceAnswer | None = None

    @property
    def text(self) -> str:
        """Concatenated visible text."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def reasoning(self) -> str:
        """Concatenated reasoning text."""
        return "".join(p.text for p in self.content if isinstance(p, ReasoningPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """Tool calls, in order."""
        return [p for p in self.content if isinstance(p, ToolCallPart)]
