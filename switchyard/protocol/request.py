"""The provider-neutral chat request.

Layer: ``protocol`` — imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.protocol.tools import ToolChoice, ToolDefinition


class ReasoningConfig(BaseModel):
    """The caller's reasoning preference, in one neutral shape.

    Attributes:
        enabled: ``True``/``False`` when the caller said so; ``None`` when it did not.
        effort: OpenAI-style effort (``minimal`` … ``max``) when given.
        budget_tokens: Anthropic-style thinking budget when given.
        summary: Responses ``reasoning.summary`` when given.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool | None = None
    effort: str | None = None
    budget_tokens: int | None = None
    summary: str | None = None


class ChatRequest(BaseModel):
    """A request for one assistant turn.

    System and developer instructions are ordinary messages with role ``system`` or
    ``developer`` (Anthropic's top-level ``system`` and Responses' ``instructions`` decode
    into a leading ``system`` message).

    Attributes:
        model: The route id the caller asked for (or, on the way out, the upstream model).
        messages: The conversation so far.
        tools: Tools the model may call.
        tool_choice: How tools must be used; ``None`` means the format's default.
        parallel_tool_calls: Whether several tool calls may come in one turn.
        max_tokens: Cap on generated tokens (visible plus reasoning).
        temperature: Sampling temperature.
        top_p: Nucleus sampling.
        stop: Stop sequences.
        seed: Best-effort determinism.
        stream: Whether the caller wants a stream.
        include_usage: Whether a streaming caller asked for usage (OpenAI ``stream_options``).
        response_format: Structured-output request in OpenAI's shape
            (``{"type": "json_schema", "json_schema": {...}}`` or ``{"type": "json_object"}``).
        reasoning: Reasoning preference.
        user: End-user id.
        metadata: Free-form string metadata.
        extra: Fields the IR has no slot for, kept to forward to upstreams that understand
            them (e.g. vLLM's ``chat_template_kwargs``, ``top_k``).
        origin: Wire format the request was decoded from (``None`` when built in code). An
            upstream of the same format receives ``extra`` whole; another format receives only
            the fields it understands (see ``switchyard.wire.extras``).
        choice: A typed-choice question for a decision model (built in code by a
            ``decision_model`` route, never decoded from a caller): only a ``system_one``
            client answers it, with :attr:`ChatResponse.choice`.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    model: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolDefinition] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    response_format: dict[str, Any] | None = None
    reasoning: ReasoningConfig | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    origin: str | None = None
    choice: ChoiceQuestion | None = None

    def first_user_text(self) -> str:
        """Text of the first user message, the task statement of most agent sessions."""
        for msg in self.messages:
            if msg.role == "user" and msg.text:
                return msg.text
        return ""

    def last_user_text(self) -> str:
        """Text of the latest user message that is not only tool results."""
        for msg in reversed(self.messages):
            if msg.role == "user" and msg.text:
                return msg.text
        return ""

    def is_tool_continuation(self) -> bool:
        """Whether the newest message hands tool results back (an open tool loop)."""
        if not self.messages:
            return False
        last = self.messages[-1]
        if last.role == "tool":
            return True
        return (
            last.role == "user"
            and any(isinstance(p, ToolResultPart) for p in last.content)
            and not any(isinstance(p, TextPart) and p.text.strip() for p in last.content)
        )
