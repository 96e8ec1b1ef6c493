"""Token counting against the upstream: the backend's ``count_tokens``.

Layer: ``clients``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.wire.base import WireFormat

if TYPE_CHECKING:
    from switchyard.wire.base import Codec


class CountingBackend(Protocol):
    """What a count reads of its backend, :class:`switchyard.clients.backend.HttpBackend`: its
    public surface only (a protocol rather than the class: that module calls this one, so
    importing it back would close an import circle)."""

    format: WireFormat
    url: str
    codec: Codec

    def replays(self, request: ChatRequest, options: CallOptions) -> bool: ...

    async def post_json(
        self, url: str, body: dict[str, Any], options: CallOptions, target: TargetInfo, what: str
    ) -> Any: ...


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
    if backend.replays(request, options):
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
    data = await backend.post_json(count_url(backend), body, options, target, "token count")
    count = data.get("input_tokens", data.get("count")) if isinstance(data, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        raise UpstreamProtocolError(f"{target.name}: token count answer has no count", target=target.name)
    return count
