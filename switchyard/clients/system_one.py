"""A decision-model upstream with a System One-style typed-choice API (``format: system_one``).

Layer: ``clients`` — HTTP through ``httpx`` (imported on first use).

TypeSafe's System One API (``POST https://api.typesafe.ai/v1/systemone``, the same shape behind
OpenRouter's Decisions API) takes a ``state`` and named typed ``questions`` and answers each
question with a distribution instead of text::

    request:  {"model": "jev-latest", "state": "...",
               "questions": {"route": {"type": "choice", "instructions": "...",
                                       "criteria": {"easy": "...", "hard": "..."}}}}
    response: {"model": "jev-1.13.0",
               "answers": {"route": {"type": "choice", "choice": "easy", "confidence": 0.81,
                                     "probabilities": {"easy": 0.88, "hard": 0.12}}},
               "usage": {"input_tokens": 318, "output_tokens": 34}}

This backend answers only requests that carry a :class:`~switchyard.protocol.decision.ChoiceQuestion`
(``ChatRequest.choice``, set by a ``decision_model`` route); the answer comes back in
``ChatResponse.choice`` with the call's token usage, so the engine books it as routing overhead
like any judge call. It cannot stream and cannot answer a chat turn: the config refuses a
``system_one`` target anywhere a route could serve an answer from it.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from switchyard.clients.errors import timed_out, transport_error, typed_status_error
from switchyard.clients.http_parts import MAX_RESPONSE_BYTES, Timeouts, left
from switchyard.protocol.call import CallOptions
from switchyard.protocol.decision import ChoiceAnswer
from switchyard.protocol.errors import (
    RouterError,
    UpstreamProtocolError,
    UpstreamStatusError,
)
from switchyard.protocol.redact import Redactor
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo

if TYPE_CHECKING:
    import httpx

QUESTION_ID = "route"
"""The id of the one question a routing request asks (its answer is read back under it)."""

_ENDPOINT_SUFFIXES = ("/systemone", "/decisions")


def endpoint(base_url: str) -> str:
    """The POST URL for ``base_url``: a URL that ends with ``/systemone`` (TypeSafe) or
    ``/decisions`` (OpenRouter's Decisions API) is used as given; ``…/v1`` gets ``/systemone``;
    a server root (``https://api.typesafe.ai``, NVIDIA Switchyard's spelling) gets ``/v1/systemone``."""
    base = base_url.rstrip("/")
    if base.endswith(_ENDPOINT_SUFFIXES):
        return base
    return base + ("/systemone" if base.endswith("/v1") else "/v1/systemone")


def encode(request: ChatRequest, model: str, extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The System One body for a request carrying a typed-choice question.

    The state is the text of the request's messages (a ``decision_model`` route sends one user
    message holding its rendered view of the conversation).

    Raises:
        RouterError: The request carries no question (a router bug, never a caller's).
    """
    question = request.choice
    if question is None:
        raise RouterError("a system_one decision model answers typed-choice questions only; this request has none")
    state = "\n\n".join(m.text for m in request.messages if m.text)
    body: dict[str, Any] = {
        "model": model,
        "state": state,
        "questions": {
            QUESTION_ID: {"type": "choice", "instructions": question.instructions, "criteria": dict(question.options)},
        },
    }
    for key, value in (extra_body or {}).items():
        body.setdefault(key, value)
    return body


def decode(data: Any, target: str, request_id: str | None = None) -> ChatResponse:
    """A System One answer as a response whose ``choice`` holds the routing question's answer.

    Raises:
        UpstreamProtocolError: The body is not a System One answer to our question (the
            labels and sums are the router's to judge, not the transport's).
    """

    def bad(why: str) -> UpstreamProtocolError:
        return UpstreamProtocolError(f"{target}: not a System One answer ({why})", target=target)

    if not isinstance(data, dict):
        raise bad("body is not a JSON object")
    answers = data.get("answers")
    answer = answers.get(QUESTION_ID) if isinstance(answers, dict) else None
    if not isinstance(answer, dict):
        raise bad(f"no answers.{QUESTION_ID}")
    if answer.get("type", "choice") != "choice":
        raise bad(f"answers.{QUESTION_ID} is a {answer.get('type')!r} answer, not a choice")
    choice, probabilities, confidence = answer.get("choice"), answer.get("probabilities"), answer.get("confidence")
    if not isinstance(choice, str) or not isinstance(probabilities, dict):
        raise bad(f"answers.{QUESTION_ID} needs a string 'choice' and a 'probabilities' object")
    numbers: dict[str, float] = {}
    for label, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad(f"probability of {label!r} is not a finite number")
        numbers[str(label)] = float(value)
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, int | float)):
        raise bad("confidence is not a number")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    return ChatResponse(
        id=request_id or f"systemone-{uuid.uuid4().hex[:16]}",
        model=str(data.get("model") or ""),
        usage=Usage(input_tokens=_count(usage, "input_tokens"), output_tokens=_count(usage, "output_tokens")),
        choice=ChoiceAnswer(
            choice=choice, probabilities=numbers, confidence=None if confidence is None else float(confidence)
        ),
        created=int(time.time()),
    )


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _error_message(body: bytes, status: int) -> str:
    """The message of a System One error body: FastAPI's ``detail`` (a string, or a list of
    ``{loc, msg}``), an OpenAI-style ``error`` object, or the status alone."""
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    detail = parsed.get("detail") if isinstance(parsed, dict) else None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = [
            f"{'.'.join(str(p) for p in d.get('loc') or [])}: {d.get('msg')}" for d in detail[:3] if isinstance(d, dict)
        ]
        return "; ".join(parts) or f"upstream answered HTTP {status}"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return f"upstream answered HTTP {status}"


class SystemOneBackend:
    """A System One-style decision API.

    Args:
        name: The ``llm_clients`` entry name.
        base_url: ``https://api.typesafe.ai/v1`` (``/systemone`` is added) or the full endpoint.
        api_key: Sent as ``Authorization: Bearer``.
        headers: Extra headers on every request.
        timeouts: Default limits; a call's ``total`` and the request deadline bound it.
        max_connections: Connection-pool size.
        transport: An ``httpx`` transport to use instead of the network (tests).
        max_response_bytes: Largest answer body accepted.
    """

    replays_caller_body = False

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.url = endpoint(base_url)
        self.timeouts = timeouts or Timeouts()
        self.max_connections = max_connections
        self.max_response_bytes = max_response_bytes
        self._headers = {"content-type": "application/json", "accept": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._redact = Redactor([api_key] if api_key else [])
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                transport=self._transport,
                limits=httpx.Limits(max_connections=self.max_connections),
                timeout=httpx.Timeout(self.timeouts.read, connect=self.timeouts.connect),
                follow_redirects=False,
            )
        return self._http

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        """Asks the request's typed-choice question; the answer is in ``ChatResponse.choice``."""
        body = orjson.dumps(encode(request, target.model, target.extra_body))
        timeouts, deadline, label = self.timeouts.for_call(options)
        client = self._client()
        import httpx

        try:
            async with asyncio.timeout(left(deadline)):
                resp = await client.post(
                    self.url,
                    content=body,
                    headers={**self._headers, **options.headers},
                    timeout=httpx.Timeout(timeouts.read, connect=timeouts.connect),
                )
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no decision within its {label}", target, label) from exc
        except httpx.HTTPError as exc:
            raise transport_error(
                exc, target, self.name, self.max_connections, self.timeouts, timeouts, self._redact
            ) from exc
        content = resp.content
        if len(content) > self.max_response_bytes:
            raise UpstreamProtocolError(f"{target.name}: answer larger than max_response_bytes", target=target.name)
        if resp.status_code >= 400:
            raise self._status_error(resp.status_code, content, resp.headers, target.name)
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"{target.name}: upstream sent invalid JSON", target=target.name) from exc
        return decode(data, target.name, resp.headers.get("x-typesafe-request-id"))

    def _status_error(self, status: int, body: bytes, headers: Mapping[str, str], target: str) -> UpstreamStatusError:
        body = self._redact.data(body)
        message = self._redact.text(_error_message(body, status))
        return typed_status_error(status, body, headers, message, None, target=target)

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        """Never: a decision model answers no chat turn (the config keeps it from being asked)."""
        raise RouterError(f"{target.name}: a system_one decision model cannot stream a chat answer")

    async def aclose(self) -> None:
        """Closes the connection pool."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
