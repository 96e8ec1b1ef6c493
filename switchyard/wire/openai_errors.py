"""The OpenAI error envelope, the one error shape Chat Completions and Responses share.

Layer: ``wire`` — imports ``protocol`` only.

``{"error": {"message", "type", "param", "code"}}``: what both APIs answer with, what a Chat
stream carries in-band before ``[DONE]``, and what vLLM sends (with the HTTP status in ``code``).
Anthropic's shape is its own (``anthropic_messages/response.py``).
"""

from __future__ import annotations

from typing import Any

from switchyard.protocol.errors import ErrorInfo


def encode_error(error: ErrorInfo) -> dict[str, Any]:
    """An OpenAI error envelope."""
    return {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}


def decode_error(body: Any, status: int) -> ErrorInfo:
    """Reads an OpenAI/vLLM error envelope (vLLM puts the HTTP status in ``code``)."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code")
        return ErrorInfo(
            status=status,
            type=str(err.get("type") or "api_error"),
            code=None if code is None else str(code),
            message=str(err.get("message") or ""),
            param=err.get("param"),
        )
    if isinstance(err, str):
        return ErrorInfo(status=status, message=err)
    return ErrorInfo(status=status, message=str(body)[:500])


__all__ = ["decode_error", "encode_error"]
