"""The provider-neutral IR: requests, messages, responses, stream events and errors.

Layer: ``protocol`` — the bottom layer; imports nothing else of ours.

The names below load on first use: importing one IR module (``protocol.errors``) does not
import the request and message models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard._lazy import lazy_attributes

if TYPE_CHECKING:
    from switchyard.protocol.call import CallOptions, ModelBackend, ModelCall
    from switchyard.protocol.decision import ChoiceAnswer, ChoiceQuestion
    from switchyard.protocol.errors import (
        ContextWindowExceededError,
        ErrorInfo,
        InvalidRequestError,
        RouteNotFoundError,
        RouterError,
        SwitchyardError,
        ThreadNotFoundError,
        UpstreamConnectionError,
        UpstreamError,
        UpstreamProtocolError,
        UpstreamStatusError,
        UpstreamTimeoutError,
    )
    from switchyard.protocol.messages import (
        ContentPart,
        ImagePart,
        Message,
        ReasoningPart,
        Role,
        TextPart,
        ToolCallPart,
        ToolResultPart,
    )
    from switchyard.protocol.request import ChatRequest, ReasoningConfig
    from switchyard.protocol.response import ChatResponse, StopReason, Usage
    from switchyard.protocol.stream import (
        MessageStart,
        MessageStop,
        ReasoningDelta,
        StreamAccumulator,
        StreamError,
        StreamEvent,
        TextDelta,
        ToolCallDelta,
        UsageDelta,
        response_to_events,
    )
    from switchyard.protocol.targets import Price, TargetInfo
    from switchyard.protocol.tools import ToolChoice, ToolDefinition

_LAZY = {
    "CallOptions": "switchyard.protocol.call",
    "ModelBackend": "switchyard.protocol.call",
    "ModelCall": "switchyard.protocol.call",
    "ChoiceAnswer": "switchyard.protocol.decision",
    "ChoiceQuestion": "switchyard.protocol.decision",
    "ContextWindowExceededError": "switchyard.protocol.errors",
    "ErrorInfo": "switchyard.protocol.errors",
    "InvalidRequestError": "switchyard.protocol.errors",
    "RouteNotFoundError": "switchyard.protocol.errors",
    "RouterError": "switchyard.protocol.errors",
    "SwitchyardError": "switchyard.protocol.errors",
    "ThreadNotFoundError": "switchyard.protocol.errors",
    "UpstreamConnectionError": "switchyard.protocol.errors",
    "UpstreamError": "switchyard.protocol.errors",
    "UpstreamProtocolError": "switchyard.protocol.errors",
    "UpstreamStatusError": "switchyard.protocol.errors",
    "UpstreamTimeoutError": "switchyard.protocol.errors",
    "ContentPart": "switchyard.protocol.messages",
    "ImagePart": "switchyard.protocol.messages",
    "Message": "switchyard.protocol.messages",
    "ReasoningPart": "switchyard.protocol.messages",
    "Role": "switchyard.protocol.messages",
    "TextPart": "switchyard.protocol.messages",
    "ToolCallPart": "switchyard.protocol.messages",
    "ToolResultPart": "switchyard.protocol.messages",
    "ChatRequest": "switchyard.protocol.request",
    "ReasoningConfig": "switchyard.protocol.request",
    "ChatResponse": "switchyard.protocol.response",
    "StopReason": "switchyard.protocol.response",
    "Usage": "switchyard.protocol.response",
    "MessageStart": "switchyard.protocol.stream",
    "MessageStop": "switchyard.protocol.stream",
    "ReasoningDelta": "switchyard.protocol.stream",
    "StreamAccumulator": "switchyard.protocol.stream",
    "StreamError": "switchyard.protocol.stream",
    "StreamEvent": "switchyard.protocol.stream",
    "TextDelta": "switchyard.protocol.stream",
    "ToolCallDelta": "switchyard.protocol.stream",
    "UsageDelta": "switchyard.protocol.stream",
    "response_to_events": "switchyard.protocol.stream",
    "Price": "switchyard.protocol.targets",
    "TargetInfo": "switchyard.protocol.targets",
    "ToolChoice": "switchyard.protocol.tools",
    "ToolDefinition": "switchyard.protocol.tools",
}

__all__ = [
    "CallOptions",
    "ChatRequest",
    "ChatResponse",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ContentPart",
    "ContextWindowExceededError",
    "ErrorInfo",
    "ImagePart",
    "InvalidRequestError",
    "Message",
    "MessageStart",
    "MessageStop",
    "ModelBackend",
    "ModelCall",
    "Price",
    "ReasoningConfig",
    "ReasoningDelta",
    "ReasoningPart",
    "Role",
    "RouteNotFoundError",
    "RouterError",
    "StopReason",
    "StreamAccumulator",
    "StreamError",
    "StreamEvent",
    "SwitchyardError",
    "TargetInfo",
    "TextDelta",
    "TextPart",
    "ThreadNotFoundError",
    "ToolCallDelta",
    "ToolCallPart",
    "ToolChoice",
    "ToolDefinition",
    "ToolResultPart",
    "UpstreamConnectionError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "Usage",
    "UsageDelta",
    "response_to_events",
]


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
