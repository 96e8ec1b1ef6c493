"""Upstream error classification: HTTP status and body → typed errors.

Layer: ``clients``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from switchyard.protocol.errors import ContextWindowExceededError, UpstreamStatusError, UpstreamTimeoutError
from switchyard.protocol.redact import Redactor
from switchyard.protocol.stream import StreamError
from switchyard.protocol.targets import TargetInfo
from switchyard.wire.base import Codec

# Phrases providers use for "the prompt does not fit" (OpenAI, Anthropic, vLLM, SGLang …).
_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "context window",
    "context length is only",
    "please reduce the length of the input",
    "exceeds the maximum allowed",
    "longer than the model's context length",
    "longer than the maximum model length",
    "prompt is too long",
    "maximum number of tokens",
    "is too large for the model",
)


# Where providers state the limit in an overflow message (OpenAI/vLLM, vLLM's decoder check,
# SGLang, Anthropic): the captured number is the model's context window in tokens.
_LIMIT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length is ([\d,]+)",
        r"maximum model length (?:of |is )?([\d,]+)",
        r"context length is only ([\d,]+)",
        r"model's context length \(([\d,]+)",
        r"tokens > ([\d,]+) maximum",
    )
)


def overflow_limit(message: str) -> int | None:
    """The context window an overflow message states, e.g. 4096 in OpenAI's
    "This model's maximum context length is 4096 tokens", or ``None``."""
    for pattern in _LIMIT_PATTERNS:
        found = pattern.search(message)
        if found:
            digits = found.group(1).replace(",", "")
            if digits.isdigit() and int(digits) > 0:
                return int(digits)
    return None


def is_context_overflow(status: int, body_text: str, code: str | None) -> bool:
    """Whether a 4xx answer says the prompt is longer than the model's context window."""
    if status not in (400, 413, 422):
        return False
    if code == "context_length_exceeded":
        return True
    lowered = body_text.lower()
    return any(p in lowered for p in _OVERFLOW_PHRASES)


def status_error(
    codec: Codec,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    target: str | None,
    redact: Redactor | None = None,
) -> UpstreamStatusError:
    """Builds the typed error for an upstream HTTP error answer.

    With ``redact``, the secrets the proxy sent upstream are masked in the body first, so neither
    the relayed body nor the message (nor any log line made from them) can quote them.
    """
    if redact:
        body = redact.data(body)
    parsed: Any
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    if parsed is None:
        text = body[:300].decode("utf-8", errors="replace").strip()
        message = f"upstream answered HTTP {status}" + (f": {text}" if text and not text.startswith("<") else "")
        code: str | None = None
    else:
        info = codec.decode_error(parsed, status)
        message, code = info.message or f"upstream answered HTTP {status}", info.code
    keep = {k: v for k, v in headers.items() if k.lower() in ("retry-after", "retry-after-ms")}
    body_text = body[:4000].decode("utf-8", errors="replace")
    if is_context_overflow(status, body_text, code):
        return ContextWindowExceededError(
            message,
            upstream_status=status,
            body=body,
            upstream_headers=headers,
            target=target,
            status=400,
            code="context_length_exceeded",
            headers=keep,
        )
    return UpstreamStatusError(
        message,
        upstream_status=status,
        body=body,
        upstream_headers=headers,
        target=target,
        code=code if code and not code.isdigit() else None,
        headers=keep,
    )


def timed_out(message: str, target: TargetInfo, label: str) -> UpstreamTimeoutError:
    """A deadline passed: the request's own (``x-switchyard-timeout``, the caller's choice) or
    the client's configured total (the target's)."""
    error = UpstreamTimeoutError(message, target=target.name)
    error.caller_limit = label == "request deadline"
    return error


def masked(event: StreamError, redact: Redactor) -> StreamError:
    """An upstream's in-band stream error with the backend's secrets masked in its message."""
    if not redact or not event.error.message:
        return event
    return StreamError(error=event.error.model_copy(update={"message": redact.text(event.error.message)}))
