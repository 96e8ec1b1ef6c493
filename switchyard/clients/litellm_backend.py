"""A backend over LiteLLM, for providers Switchyard does not speak natively (Bedrock, Vertex, Azure …).

Layer: ``clients``. Needs the ``litellm`` extra (``pip install 'switchyard-router[litellm]'``);
LiteLLM is imported on the first call, never at ``import switchyard`` (it takes seconds).

The request goes IR → OpenAI Chat body (our own codec) → ``litellm.acompletion``, and the answer
comes back as OpenAI-shaped objects → IR (our own decoders), so routing, fallback, retries,
deadlines and cost accounting are the engine's, exactly as for the HTTP backends. LiteLLM's own
retries are switched off (``num_retries=0``, ``max_retries=0``): the engine is the one retry
owner. Its exceptions are mapped onto the typed error tree by status code and class, so the
error-class table applies unchanged.

Config::

    llm_clients:
      bedrock:
        format: litellm
        litellm_params: {aws_region_name: us-east-1}
    targets:
      claude-bedrock: {client: bedrock, model: bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0}
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from switchyard.clients.errors import is_context_overflow, timed_out
from switchyard.clients.http_parts import Timeouts, left
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamEvent
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import codec as get_codec
from switchyard.wire.base import WireFormat
from switchyard.wire.sse import SSEEvent

# Chat Completions fields LiteLLM takes as keyword arguments; anything else in the body (vLLM's
# ``chat_template_kwargs``, ``top_k`` …) travels in ``extra_body``.
_NATIVE = frozenset(
    {
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "response_format",
        "user",
        "reasoning_effort",
        "stream",
        "stream_options",
    }
)


def _load_litellm() -> Any:
    # LiteLLM fetches a model price map from the internet at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout for every error
    return litellm


class LiteLLMBackend:
    """Calls models through ``litellm.acompletion``.

    Args:
        name: The ``llm_clients`` entry name.
        base_url: Passed as ``api_base`` (``None``: the provider's default).
        api_key: Passed as ``api_key`` (``None``: LiteLLM reads the provider's usual variable).
        headers: Passed as ``extra_headers``.
        timeouts: ``connect``/``read`` go to LiteLLM; ``total`` (and the request deadline) is
            enforced here, streams included.
        params: Extra keyword arguments for every call (``litellm_params``).
        module: The ``litellm`` module to use (tests); imported on first use by default.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        params: Mapping[str, Any] | None = None,
        module: Any = None,
    ) -> None:
        self.name = name
        self.base_url = base_url
        self.api_key = api_key
        self.headers = dict(headers or {})
        self.timeouts = timeouts or Timeouts()
        self.params = dict(params or {})
        self.codec = get_codec(WireFormat.OPENAI_CHAT)
        self._module = module

    @property
    def litellm(self) -> Any:
        """The ``litellm`` module (imported on first use)."""
        if self._module is None:
            self._module = _load_litellm()
        return self._module

    def _kwargs(self, request: ChatRequest, target: TargetInfo, options: CallOptions, stream: bool) -> dict[str, Any]:
        body = self.codec.encode_request(request, model=target.model, stream=stream)
        for key, value in target.extra_body.items():
            body.setdefault(key, value)
        body.pop("model", None)
        kwargs: dict[str, Any] = {k: v for k, v in body.items() if k in _NATIVE}
        extra = {k: v for k, v in body.items() if k not in _NATIVE}
        if extra:
            kwargs["extra_body"] = extra
        if stream:
            # Usage is needed for accounting whether or not the caller asked for it.
            kwargs["stream_options"] = {**(kwargs.get("stream_options") or {}), "include_usage": True}
        timeouts = self.timeouts.merged(options.timeout)
        headers = {**self.headers, **options.headers}
        kwargs.update(self.params)
        kwargs.update(
            model=target.model,
            timeout=timeouts.read,
            num_retries=0,  # the engine owns retries; LiteLLM's would multiply them
            max_retries=0,
        )
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if headers:
            kwargs["extra_headers"] = headers
        return kwargs

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        kwargs = self._kwargs(request, target, options, stream=False)
        _, deadline, label = self.timeouts.for_call(options)
        acompletion = self.litellm.acompletion  # an import failure is not an upstream failure
        try:
            async with asyncio.timeout(left(deadline)):
                result = await acompletion(**kwargs)
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no complete answer within its {label}", target, label) from exc
        except Exception as exc:
            raise map_exception(exc, target.name) from exc
        data = _as_dict(result)
        if data is None:
            raise UpstreamProtocolError(f"{target.name}: LiteLLM returned {type(result).__name__}", target=target.name)
        try:
            return self.codec.decode_response(data)
        except UpstreamError as exc:
            exc.target = target.name
            raise

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        kwargs = self._kwargs(request, target, options, stream=True)
        _, deadline, label = self.timeouts.for_call(options)
        acompletion = self.litellm.acompletion
        try:
            async with asyncio.timeout(left(deadline)):
                chunks = await acompletion(**kwargs)
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no stream within its {label}", target, label) from exc
        except Exception as exc:
            raise map_exception(exc, target.name) from exc
        return self._events(chunks, target, deadline, label)

    async def _events(
        self, chunks: Any, target: TargetInfo, deadline: float | None, label: str
    ) -> AsyncIterator[StreamEvent]:
        decoder = self.codec.stream_decoder()
        iterator = chunks.__aiter__()
        try:
            while True:
                try:
                    async with asyncio.timeout(left(deadline)):
                        chunk = await anext(iterator, None)
                except TimeoutError as exc:
                    raise timed_out(f"{target.name}: stream exceeded its {label}", target, label) from exc
                except UpstreamError:
                    raise
                except Exception as exc:
                    raise map_exception(exc, target.name) from exc
                if chunk is None:
                    break
                data = _as_dict(chunk)
                if data is None:
                    continue
                for event in decoder.feed(SSEEvent(None, orjson.dumps(data).decode())):
                    yield event
            for event in decoder.finish():
                yield event
        except UpstreamError as exc:
            exc.target = target.name
            raise
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # closing a broken stream may fail again; nothing to add
                    pass

    async def aclose(self) -> None:
        """LiteLLM manages its own client cache; nothing to release here."""
        return None


def _as_dict(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if dump is not None:
        data = dump()
        return data if isinstance(data, dict) else None
    return None


def _headers_of(exc: BaseException) -> dict[str, str]:
    found = getattr(exc, "litellm_response_headers", None)
    if found is None:
        found = getattr(getattr(exc, "response", None), "headers", None)
    try:
        return {str(k).lower(): str(v) for k, v in dict(found or {}).items()}
    except (TypeError, ValueError):
        return {}


def map_exception(exc: BaseException, target: str) -> UpstreamError:
    """A LiteLLM (or provider SDK) exception as a typed upstream error, so the engine's
    error-class table applies: by class for timeouts, connection errors and context overflow,
    by ``status_code`` for everything else."""
    if isinstance(exc, UpstreamError):
        return exc
    kind = type(exc).__name__
    message = str(getattr(exc, "message", None) or exc) or kind
    text = f"{target}: {message}"
    status = getattr(exc, "status_code", None)
    headers = _headers_of(exc)
    if kind == "ContextWindowExceededError" or (
        isinstance(status, int) and is_context_overflow(status, message, getattr(exc, "code", None))
    ):
        return ContextWindowExceededError(
            text,
            upstream_status=status if isinstance(status, int) else 400,
            body=b"",
            upstream_headers=headers,
            target=target,
            status=400,
            code="context_length_exceeded",
        )
    if kind in ("Timeout", "APITimeoutError") or isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(text, target=target)
    if kind == "APIConnectionError":
        return UpstreamConnectionError(text, target=target)
    if isinstance(status, int) and 400 <= status <= 599:
        keep = {k: v for k, v in headers.items() if k in ("retry-after", "retry-after-ms")}
        return UpstreamStatusError(text, upstream_status=status, upstream_headers=headers, target=target, headers=keep)
    return UpstreamError(f"{text} ({kind})", target=target)
