"""OpenAI Chat Completions codec (also what vLLM speaks).

Layer: ``wire`` — imports ``protocol`` only.
"""

from __future__ import annotations

from typing import Any

from switchyard.protocol.errors import ErrorInfo
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.wire import guard
from switchyard.wire.base import WireFormat
from switchyard.wire.openai_chat import request as _request
from switchyard.wire.openai_chat import response as _response
from switchyard.wire.openai_chat import stream as _stream
from switchyard.wire.sse import KEEPALIVE


class OpenAIChatCodec:
    """The :class:`~switchyard.wire.base.Codec` for ``openai_chat``."""

    format = WireFormat.OPENAI_CHAT
    path = "/chat/completions"

    def decode_request(self, body: dict[str, Any]) -> ChatRequest:
        return guard.caller_body(self.format.value, _request.decode_request, body)

    def encode_request(self, request: ChatRequest, *, model: str, stream: bool) -> dict[str, Any]:
        return _request.encode_request(request, model=model, stream=stream)

    def decode_response(self, body: dict[str, Any]) -> ChatResponse:
        return guard.upstream_body(self.format.value, _response.decode_response, body)

    def encode_response(self, response: ChatResponse, *, model: str) -> dict[str, Any]:
        return _response.encode_response(response, model=model)

    def stream_decoder(self) -> guard.GuardedDecoder:
        return guard.GuardedDecoder(self.format.value, _stream.ChatStreamDecoder())

    def stream_encoder(self, *, model: str, include_usage: bool) -> _stream.ChatStreamEncoder:
        return _stream.ChatStreamEncoder(model=model, include_usage=include_usage)

    def encode_error(self, error: ErrorInfo) -> dict[str, Any]:
        return _response.encode_error(error)

    def stream_error(self, error: ErrorInfo) -> bytes:
        return _stream.stream_error(error)

    def decode_error(self, body: Any, status: int) -> ErrorInfo:
        return _response.decode_error(body, status)

    def keepalive(self) -> bytes:
        return KEEPALIVE


CODEC = OpenAIChatCodec()

__all__ = ["CODEC", "OpenAIChatCodec"]
