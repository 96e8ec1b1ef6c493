"""The provider-neutral IR: requests, messages, responses, stream events and errors.

Layer: ``protocol`` — the bottom layer; imports nothing else of ours.
"""

from switchyard.protocol.call import CallOptions, ModelBackend, ModelCall
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

__all__ = [
    "CallOptions",
    "ChatRequest",
    "ChatResponse",
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
