"""What a caller's reply leaves out because the caller's API would not have sent it.

Layer: ``engine``.

An Anthropic caller gets ``thinking`` blocks only when it enabled thinking
(``thinking: {type: "enabled" | "adaptive"}``): Anthropic sends none otherwise, and clients
that never asked for them do not expect them (some render them, some send them back). A vLLM or
other Chat upstream returns its ``reasoning`` whatever was asked, so on a translated route the
proxy leaves that reasoning out of the Anthropic reply, JSON and stream alike. The reasoning
tokens stay in the usage and the record.
"""

from __future__ import annotations

from switchyard.protocol.messages import ReasoningPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import ReasoningDelta, StreamEvent
from switchyard.wire.base import StreamEncoder
from switchyard.wire.text_run import TextRun

_ANTHROPIC = "anthropic_messages"


def hides_reasoning(request: ChatRequest) -> bool:
    """Whether the reply to ``request`` must carry no reasoning: an Anthropic caller that did
    not enable thinking."""
    if request.origin != _ANTHROPIC:
        return False
    return request.reasoning is None or request.reasoning.enabled is not True


def without_reasoning(response: ChatResponse) -> ChatResponse:
    """``response`` without its reasoning parts (itself when it has none)."""
    if not any(isinstance(p, ReasoningPart) for p in response.content):
        return response
    kept = [p for p in response.content if not isinstance(p, ReasoningPart)]
    return response.model_copy(update={"content": kept})


class NoReasoning:
    """A stream encoder that passes every event but reasoning on to ``inner``."""

    def __init__(self, inner: StreamEncoder) -> None:
        self.inner = inner

    def encode(self, event: StreamEvent | TextRun) -> bytes:
        """The caller's bytes for ``event``; nothing for reasoning."""
        if isinstance(event, ReasoningDelta):
            return b""
        return self.inner.encode(event)  # type: ignore[arg-type]  # a TextRun only to encoders that take one

    def finish(self) -> bytes:
        """The caller's closing bytes."""
        return self.inner.finish()
