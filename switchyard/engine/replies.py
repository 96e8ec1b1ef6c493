"""The HTTP face of the engine's answers: ``x-switchyard-*`` headers and error replies.

Layer: ``engine``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from switchyard.engine import caller_view
from switchyard.engine.records import DecisionRecord
from switchyard.engine.reply import Reply
from switchyard.engine.target import Target
from switchyard.protocol.errors import SwitchyardError, UpstreamError, UpstreamStatusError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps
from switchyard.wire.openai_chat.plain_answer import PlainAnswer

HEADER_SELECTED = "x-switchyard-selected-model"
HEADER_ROUTE = "x-switchyard-route"
HEADER_SOURCE = "x-switchyard-decision-source"
HEADER_OVERHEAD = "x-switchyard-overhead-ms"
HEADER_REQUEST_ID = "x-switchyard-request-id"

# Caller headers worth forwarding upstream (everything else stays at the proxy).
FORWARD_HEADERS = ("anthropic-beta", "anthropic-version")


def forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers (lower-cased names) that go on to the upstream: ``FORWARD_HEADERS``."""
    return {k: v for k in FORWARD_HEADERS if (v := headers.get(k))}


def reply_headers(record: DecisionRecord, *, stream: bool) -> dict[str, str]:
    """The ``x-switchyard-*`` headers (and content type) of a successful reply."""
    headers = {
        "content-type": "text/event-stream" if stream else "application/json",
        HEADER_SELECTED: record.selected or "",
        HEADER_ROUTE: record.route,
        HEADER_SOURCE: record.source,
        HEADER_OVERHEAD: f"{record.overhead_ms:.3f}",
        HEADER_REQUEST_ID: record.request_id,
    }
    if stream:
        headers["cache-control"] = "no-cache"
        headers["x-accel-buffering"] = "no"
    return headers


def error_reply(
    targets: dict[str, Target], fmt: WireFormat, exc: SwitchyardError, record: DecisionRecord | None
) -> Reply:
    """The error reply in the caller's envelope (or the provider's own words, same API family)."""
    codec = get_codec(fmt)
    headers = {"content-type": "application/json", **exc.headers}
    if record is not None:
        headers[HEADER_ROUTE] = record.route
        headers[HEADER_SOURCE] = record.source
        headers[HEADER_REQUEST_ID] = record.request_id
        headers[HEADER_SELECTED] = record.selected or ""
    if exc.status in (429, 503) and "retry-after" not in headers:
        headers["retry-after"] = "1"
    if isinstance(exc, UpstreamError):
        # The engine already retried and fell back as far as the policy allows; an SDK
        # retrying on top would multiply attempts (openai/anthropic SDKs obey this header).
        headers["x-should-retry"] = "false"
    if isinstance(exc, UpstreamStatusError) and exc.status < 500 and exc.status not in (408, 429):
        upstream_fmt = targets[exc.target].info.format if exc.target in targets else None
        if upstream_fmt == fmt.value and exc.body.lstrip().startswith(b"{"):
            # Same API family: relay the provider's own words (agents match on them) — but
            # never an HTML page from a proxy in front of it.
            return Reply(exc.status, headers, body=exc.body)
    return Reply(exc.status, headers, body=dumps(codec.encode_error(exc.info())))


def answer_reply(
    codec: Any,
    request: ChatRequest,
    answer: ChatResponse | PlainAnswer,
    model: str,
    record: DecisionRecord,
    release: Callable[[], None] | None,
) -> Reply:
    """The 200 reply of a JSON answer in the caller's format (``codec``), naming ``model``.

    ``release`` emits the answer's held record (``Engine.handle(hold_record=True)``): should
    encoding fail (a bug), the record is emitted here, marked failed, rather than lost with the
    reply that would have carried it.
    """
    try:
        if isinstance(answer, PlainAnswer):
            payload = answer.encode(model=model)
        else:
            if caller_view.hides_reasoning(request):  # no thinking blocks for callers that did not enable thinking
                answer = caller_view.without_reasoning(answer)
            payload = codec.encode_response(answer, model=model)
        body = dumps(payload)
    except Exception as exc:
        if release is not None:
            record.status = 500
            record.error = f"internal error: the answer could not be encoded ({type(exc).__name__})"
            release()
        raise
    return Reply(200, reply_headers(record, stream=False), body=body, release=release)


def lower(headers: Mapping[str, str] | None) -> dict[str, str]:
    if not headers:
        return {}
    return {k.lower(): v for k, v in headers.items()}
