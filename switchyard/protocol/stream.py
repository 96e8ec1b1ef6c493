"""Stream events of the IR and an accumulator that folds them into a response.

Layer: ``protocol`` — imports nothing of ours.

Decoders turn an upstream SSE stream into these events; encoders turn them into the
caller's SSE format. The vocabulary is deliberately small:

* :class:`MessageStart` opens the turn.
* :class:`ReasoningDelta`, :class:`TextDelta` and :class:`ToolCallDelta` carry content. A
  change of kind starts a new content part; a :class:`ReasoningDelta` carrying a
  ``signature`` closes its reasoning part (Anthropic sends the signature last); one carrying
  ``redacted`` data is a part of its own, and a new ``item_id`` (Responses) starts a new part.
* :class:`UsageDelta` reports usage (latest non-zero value of each field wins).
* :class:`MessageStop` ends the turn with a stop reason.
* :class:`StreamError` reports an in-band upstream failure; nothing follows it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.messages import ContentPart, ReasoningPart, TextPart, ToolCallPart
from switchyard.protocol.response import ChatResponse, StopReason, Usage


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class MessageStart(_Event):
    """The turn begins."""

    type: Literal["message_start"] = "message_start"
    id: str
    model: str = ""
    created: int = 0


class TextDelta(_Event):
    """A fragment of visible text."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ReasoningDelta(_Event):
    """A fragment of reasoning, or the closing signature/redacted data of a reasoning part."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str = ""
    signature: str | None = None
    provider: str | None = None
    redacted: str | None = None
    encrypted: str | None = None
    item_id: str | None = None


class ToolCallDelta(_Event):
    """A fragment of a tool call.

    Attributes:
        index: Ordinal of the call within the turn (0, 1, …), normalised by decoders even when
            the upstream reused or omitted indexes.
        id: Call id; present on the first fragment of each call.
        name: Tool name; present on the first fragment of each call.
        arguments: A fragment of the JSON arguments (or raw input of a ``custom`` tool).
        kind: ``function`` or ``custom``.
    """

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    kind: Literal["function", "custom"] = "function"


class UsageDelta(_Event):
    """Usage so far (cumulative)."""

    type: Literal["usage"] = "usage"
    usage: Usage


class MessageStop(_Event):
    """The turn ended normally."""

    type: Literal["message_stop"] = "message_stop"
    stop_reason: StopReason = "end_turn"
    stop_sequence: str | None = None


class StreamError(_Event):
    """The upstream failed mid-stream; the turn is incomplete."""

    type: Literal["stream_error"] = "stream_error"
    error: ErrorInfo


StreamEvent = MessageStart | TextDelta | ReasoningDelta | ToolCallDelta | UsageDelta | MessageStop | StreamError
"""Any stream event."""


def merge_usage(old: Usage, new: Usage) -> Usage:
    """Merges a cumulative usage report into what was known, keeping non-zero fields."""
    return Usage(
        input_tokens=new.input_tokens or old.input_tokens,
        output_tokens=new.output_tokens or old.output_tokens,
        cache_read_tokens=new.cache_read_tokens or old.cache_read_tokens,
        cache_creation_tokens=new.cache_creation_tokens or old.cache_creation_tokens,
        reasoning_tokens=new.reasoning_tokens or old.reasoning_tokens,
    )


class StreamAccumulator:
    """Folds stream events into a :class:`ChatResponse`.

    Example:
        >>> acc = StreamAccumulator()
        >>> for ev in events:
        ...     acc.add(ev)
        >>> response = acc.response()
    """

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.created = 0
        self.parts: list[ContentPart] = []
        self.usage = Usage()
        self.stop_reason: StopReason | None = None
        self.stop_sequence: str | None = None
        self.error: ErrorInfo | None = None
        self._calls: dict[int, ToolCallPart] = {}
        self._reasoning_open = False

    def add(self, event: StreamEvent) -> None:
        """Adds one event."""
        if isinstance(event, TextDelta):
            last = self.parts[-1] if self.parts else None
            if isinstance(last, TextPart):
                last.text += event.text
            else:
                self.parts.append(TextPart(text=event.text))
        elif isinstance(event, ReasoningDelta):
            self._add_reasoning(event)
        elif isinstance(event, ToolCallDelta):
            call = self._calls.get(event.index)
            if call is None:
                call = ToolCallPart(id=event.id or "", name=event.name or "", arguments="", kind=event.kind)
                self._calls[event.index] = call
                self.parts.append(call)
            else:
                if event.id and not call.id:
                    call.id = event.id
                if event.name and not call.name:
                    call.name = event.name
            call.arguments += event.arguments
        elif isinstance(event, UsageDelta):
            self.usage = merge_usage(self.usage, event.usage)
        elif isinstance(event, MessageStart):
            self.id, self.model, self.created = event.id, event.model, event.created
        elif isinstance(event, MessageStop):
            self.stop_reason = event.stop_reason
            self.stop_sequence = event.stop_sequence
        elif isinstance(event, StreamError):
            self.error = event.error
        if not isinstance(event, ReasoningDelta | UsageDelta):
            self._reasoning_open = False

    def _add_reasoning(self, event: ReasoningDelta) -> None:
        last = self.parts[-1] if self.parts else None
        # A redacted block is a part of its own; a new ``item_id`` starts a new part too.
        same_item = event.item_id is None or (isinstance(last, ReasoningPart) and last.item_id == event.item_id)
        if isinstance(last, ReasoningPart) and self._reasoning_open and same_item and event.redacted is None:
            part = last
            part.text += event.text
        else:
            part = ReasoningPart(text=event.text, item_id=event.item_id)
            self.parts.append(part)
            self._reasoning_open = True
        if event.provider:
            part.provider = event.provider
        if event.redacted is not None:
            part.redacted = event.redacted
            self._reasoning_open = False
        if event.encrypted is not None:
            part.encrypted = event.encrypted
        if event.signature is not None:
            part.signature = (part.signature or "") + event.signature
            self._reasoning_open = False

    def response(self) -> ChatResponse:
        """The accumulated response. ``stop_reason`` defaults to ``tool_use``/``end_turn``."""
        stop = self.stop_reason
        if stop is None:
            stop = "tool_use" if self._calls else "end_turn"
        for call in self._calls.values():
            if call.kind == "function" and not call.arguments:
                call.arguments = "{}"
        return ChatResponse(
            id=self.id,
            model=self.model,
            content=list(self.parts),
            stop_reason=stop,
            stop_sequence=self.stop_sequence,
            usage=self.usage,
            created=self.created,
        )


def response_to_events(response: ChatResponse) -> list[StreamEvent]:
    """Replays a complete response as a stream (for answers produced while routing)."""
    events: list[StreamEvent] = [MessageStart(id=response.id, model=response.model, created=response.created)]
    call_index = 0
    for part in response.content:
        if isinstance(part, TextPart):
            events.append(TextDelta(text=part.text))
        elif isinstance(part, ReasoningPart):
            events.append(
                ReasoningDelta(
                    text=part.text,
                    signature=part.signature,
                    provider=part.provider,
                    redacted=part.redacted,
                    encrypted=part.encrypted,
                    item_id=part.item_id,
                )
            )
        elif isinstance(part, ToolCallPart):
            events.append(
                ToolCallDelta(index=call_index, id=part.id, name=part.name, arguments=part.arguments, kind=part.kind)
            )
            call_index += 1
    events.append(UsageDelta(usage=response.usage))
    events.append(MessageStop(stop_reason=response.stop_reason, stop_sequence=response.stop_sequence))
    return events
