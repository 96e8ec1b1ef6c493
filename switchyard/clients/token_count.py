"""Token counting against the upstream: the backend's ``count_tokens``.

Layer: ``clients``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from switchyard.clients.errors import status_error, timed_out
from switchyard.clients.http_parts import left
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.wire.base import WireFormat

if TYPE_CHECKING:
    import httpx

    from switchyard.clients.http_parts import Timeouts
    from switchyard.protocol.errors import UpstreamError
    from switchyard.protocol.redact import Redactor
    from switchyard.wire.base import Codec


class CountingBackend(Protocol):
    """What a count reads of its backend, :class:`switchyard.clients.backend.HttpBackend`.

    A protocol rather than the class: that module calls this one, so importing it back would close
    an import circle. The underscored members are the backend's request plumbing, which this module
    shares as the backend's own helper.
    """

    format: WireFormat
    url: str
    codec: Codec
    timeouts: Timeouts
    _redact: Redactor
    _errors: tuple[type[BaseException], ...]

    @property
    def _client(self) -> httpx.AsyncClient: ...

    def _replays(self, request: ChatRequest, options: CallOptions) -> bool: ...

    def _request(
        self,
        content: bytes,
        options: CallOptions,
        timeouts: Timeouts,
        url: str | None = None,
        deadline: float | None = None,
    ) -> httpx.Request: ...

    def _transport_error(
        self, exc: BaseException, target: TargetInfo, limits: Timeouts | None = None
    ) -> UpstreamError: ...


COUNT_FIELDS = {
    WireFormat.ANTHROPIC_MESSAGES: ("model", "messages", "system", "tools", "tool_choice", "thinking"),
    WireFormat.OPENAI_RESPONSES: (
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
    ),
}


def count_url(backend: CountingBackend) -> str:
    """The upstream's token-counting URL."""
    if backend.format is WireFormat.ANTHROPIC_MESSAGES:
        return backend.url + "/count_tokens"
    if backend.format is WireFormat.OPENAI_RESPONSES:
        return backend.url + "/input_tokens"
    # vLLM serves /tokenize at the server root, beside /v1.
    root = backend.url.removesuffix(backend.codec.path)
    return root.removesuffix("/v1") + "/tokenize"


async def count_tokens(backend: CountingBackend, request: ChatRequest, target: TargetInfo, options: CallOptions) -> int:
    """Prompt tokens of ``request`` as this upstream counts them.

    Anthropic: ``POST /v1/messages/count_tokens``; OpenAI Responses:
    ``POST /v1/responses/input_tokens``; Chat Completions: vLLM's ``POST /tokenize`` with the
    chat messages (rendered by the model's chat template).

    Raises:
        UpstreamError: The upstream has no such endpoint or failed.
    """
    if backend._replays(request, options):
        assert options.raw_body is not None
        body: dict[str, Any] = dict(options.raw_body)
        body["model"] = target.model
    else:
        body = backend.codec.encode_request(request, model=target.model, stream=False)
    if backend.format is WireFormat.OPENAI_CHAT:
        keep: tuple[str, ...] = ("model", "messages", "tools", "chat_template_kwargs")
        body = {k: body[k] for k in keep if k in body} | {"add_generation_prompt": True}
    else:
        body = {k: body[k] for k in COUNT_FIELDS[backend.format] if k in body}
    timeouts, deadline, label = backend.timeouts.for_call(options)  # as every call: the request's deadline too
    req = backend._request(orjson.dumps(body), options, timeouts, url=count_url(backend))
    try:
        async with asyncio.timeout(left(deadline)):
            resp = await backend._client.send(req)
    except TimeoutError as exc:
        raise timed_out(f"{target.name}: no token count within its {label}", target, label) from exc
    except backend._errors as exc:
        raise backend._transport_error(exc, target) from exc
    if resp.status_code >= 400:
        raise status_error(
            backend.codec, resp.status_code, resp.content, resp.headers, target=target.name, redact=backend._redact
        )
    try:
        data = orjson.loads(resp.content)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"{target.name}: token count answer is not JSON", target=target.name) from exc
    count = data.get("input_tokens", data.get("count")) if isinstance(data, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        raise UpstreamProtocolError(f"{target.name}: token count answer has no count", target=target.name)
    return count
