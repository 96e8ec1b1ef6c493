"""Typed errors.

Layer: ``protocol`` — imports nothing of ours.

The tree::

    SwitchyardError                      status, type, code, message
    ├── InvalidRequestError              400 the caller's request is malformed
    ├── RouteNotFoundError               404 no route with the requested id
    ├── ThreadNotFoundError              404 an Anthropic message thread this route cannot continue
    ├── RouterError                      500 a router failed in a way it could not absorb
    └── UpstreamError                    an upstream call failed (carries ``target``)
        ├── UpstreamStatusError          the upstream answered with an HTTP error status
        │   └── ContextWindowExceededError   400 the prompt does not fit the model
        ├── UpstreamConnectionError      502 refused, reset, DNS …
        ├── UpstreamTimeoutError         504 connect/read/total deadline passed
        └── UpstreamProtocolError        502 the upstream's answer could not be decoded

Engine fallback decisions are made on these types (see ``UpstreamError.fallback_ok``), and
every codec encodes any of them into its own error envelope.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard._dataclass import dataclass


# A plain record, not a pydantic model: nothing validates it (the codecs build it from
# decoded bodies), and the server's import then does not load pydantic.
@dataclass(slots=True, kw_only=True)
class ErrorInfo:
    """A format-neutral description of an error, as carried in streams and records."""

    status: int = 500
    type: str = "api_error"
    code: str | None = None
    message: str = ""
    param: str | None = None


class SwitchyardError(Exception):
    """Base of every error the library raises on purpose.

    Attributes:
        status: HTTP status to answer the caller with.
        type: OpenAI-style error type (``invalid_request_error``, ``api_error`` …).
        code: Machine-readable code (``model_not_found``, ``context_length_exceeded`` …).
        param: The offending request field, when known.
        message: Human-readable message.
        headers: Extra response headers (e.g. ``retry-after``).
    """

    status: int = 500
    type: str = "api_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})

    def info(self) -> ErrorInfo:
        """The error as an :class:`ErrorInfo`."""
        return ErrorInfo(status=self.status, type=self.type, code=self.code, message=self.message, param=self.param)


class InvalidRequestError(SwitchyardError):
    """The caller's request is malformed or asks for something impossible."""

    status = 400
    type = "invalid_request_error"


class RouteNotFoundError(SwitchyardError):
    """The requested model id names no route.

    Typed as OpenAI types its own answer for an unknown model (404 ``invalid_request_error``,
    code ``model_not_found``, param ``model``); Anthropic's envelope takes its type from the
    status instead (``not_found_error``).
    """

    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class ThreadNotFoundError(SwitchyardError):
    """An Anthropic ``thread: {type: "continue"}`` that the chosen upstream cannot continue.

    Anthropic answers an unknown ``previous_message_id`` with 404 ``not_found_error`` and
    ``error.details.error_code: "thread_not_found"``; both Anthropic SDKs then replay the whole
    conversation (their tool runners stop threading after a second miss). Upstreams of other
    formats keep no Anthropic threads, so the proxy answers every ``continue`` routed to one
    this way.
    """

    status = 404
    type = "not_found_error"
    code = "thread_not_found"


class PreviousResponseNotFoundError(InvalidRequestError):
    """An OpenAI Responses ``previous_response_id`` that this caller may not continue.

    Answered as OpenAI answers an id it does not hold: 400 ``invalid_request_error``, code
    ``previous_response_not_found``, param ``previous_response_id``
    (:mod:`switchyard.engine.stored_responses`).
    """

    code = "previous_response_not_found"


class RouterError(SwitchyardError):
    """A router failed and could not fall open."""

    status = 500
    type = "api_error"
    code = "router_error"


class UpstreamError(SwitchyardError):
    """An upstream model call failed.

    Attributes:
        target: Name of the target that failed (set by the engine when known).
        fallback_ok: Whether trying the next candidate makes sense.
    """

    status = 502
    type = "api_error"
    code = "upstream_error"
    fallback_ok = True

    def __init__(self, message: str, *, target: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.target = target


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an HTTP error status.

    Attributes:
        upstream_status: The status the upstream sent.
        body: The upstream's raw error body, so it can be relayed unchanged.
        upstream_headers: The upstream's response headers.
    """

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        body: bytes = b"",
        upstream_headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("status", upstream_status)
        super().__init__(message, **kwargs)
        self.upstream_status = upstream_status
        self.body = body
        self.upstream_headers: dict[str, str] = dict(upstream_headers or {})
        self.type = _type_for_status(upstream_status)

    @property
    def fallback_ok(self) -> bool:  # type: ignore[override]
        """Connection-class statuses fall back; other 4xx go back to the caller."""
        return self.upstream_status in (408, 429) or self.upstream_status >= 500


class ContextWindowExceededError(UpstreamStatusError):
    """The prompt does not fit the model's context window."""

    code = "context_length_exceeded"

    @property
    def fallback_ok(self) -> bool:  # type: ignore[override]
        return True


class UpstreamConnectionError(UpstreamError):
    """The upstream could not be reached or dropped the connection."""

    status = 502
    code = "upstream_connection_error"


class UpstreamTimeoutError(UpstreamError):
    """A connect, read or total deadline passed.

    Attributes:
        caller_limit: The limit that passed was one the caller chose (``x-switchyard-timeout``
            tighter than the client's configured limits), not the target's own: it says nothing
            about the target's health, so it never counts towards its circuit breaker.
    """

    status = 504
    type = "timeout_error"
    code = "upstream_timeout"
    caller_limit = False


class UpstreamProtocolError(UpstreamError):
    """The upstream's answer could not be decoded."""

    status = 502
    code = "upstream_protocol_error"


def _type_for_status(status: int) -> str:
    if status == 400:
        return "invalid_request_error"
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status == 408 or status == 504:
        return "timeout_error"
    return "api_error" if status >= 500 else "invalid_request_error"
