"""Upstream error classification: HTTP status and body → typed errors.

Layer: ``clients``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import orjson

from switchyard.clients.http_parts import Timeouts, is_connect_timeout, is_decoding_error, is_pool_timeout, is_timeout
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.redact import Redactor, redact_urls
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
    return typed_status_error(status, body, headers, message, code, target=target)


def typed_status_error(
    status: int, body: bytes, headers: Mapping[str, str], message: str, code: str | None, *, target: str | None
) -> UpstreamStatusError:
    """The typed error for an error answer whose message and code are already read: a context
    overflow (``400``, ``context_length_exceeded``) or a plain status error, keeping only the
    retry headers to pass on."""
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
    return StreamError(error=dataclasses.replace(event.error, message=redact.text(event.error.message)))


def transport_error(
    exc: BaseException,
    target: TargetInfo,
    client: str,
    max_connections: int,
    configured: Timeouts,
    limits: Timeouts | None,
    redact: Redactor,
) -> UpstreamError:
    """The upstream error for a transport failure ``exc`` of ``llm_clients.<client>``: a pool
    timeout, a timeout (``caller_limit`` when the limit that passed, ``limits``, is tighter than
    the ``configured`` one), an undecodable body, or a lost connection."""
    if is_pool_timeout(exc):
        return UpstreamTimeoutError(
            f"{target.name}: connection pool exhausted: all {max_connections} connections to "
            f"llm_clients.{client} are busy (raise its max_connections or lower the load)",
            target=target.name,
        )
    if is_timeout(exc):
        kind = type(exc).__name__
        error = UpstreamTimeoutError(f"{target.name}: upstream timed out ({kind})", target=target.name)
        if limits is not None:
            # The caller's x-switchyard-timeout may only tighten a limit: when the one that
            # passed is tighter than configured, it was the caller's choice.
            if is_connect_timeout(exc):
                error.caller_limit = limits.connect < configured.connect
            else:
                error.caller_limit = limits.read < configured.read
        return error
    said = redact.text(redact_urls(f"{type(exc).__name__}: {exc}"))
    if is_decoding_error(exc):
        # The body could not be decoded (corrupt, or past max_response_bytes once inflated):
        # the upstream answered, but with nothing usable — a protocol failure, not a lost link.
        return UpstreamProtocolError(f"{target.name}: {said}", target=target.name)
    return UpstreamConnectionError(f"{target.name}: {said}", target=target.name)
