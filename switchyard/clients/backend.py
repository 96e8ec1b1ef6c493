"""HTTP backend: encode → POST → decode, JSON and SSE, for any wire format with a codec.

Layer: ``clients`` — the only layer that speaks HTTP: answer calls through the lean HTTP/1.1
pool of :mod:`switchyard.clients.h1` when it applies, everything else through ``httpx`` (imported
on first use, so that starting the proxy does not pay for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from switchyard.clients.errors import masked, status_error, timed_out, transport_error
from switchyard.clients.health import Probe, health_url, probe_urls, server_root
from switchyard.clients.http_parts import (
    MAX_RESPONSE_BYTES,
    Deadline,
    drain,
    keeps_deadline,
    lean_pool,
    left,
    next_within,
    read_capped,
)
from switchyard.clients.http_parts import Timeouts as Timeouts
from switchyard.clients.limits import clamp_output, may_clamp
from switchyard.clients.models import ModelListError, parse_model_list, served_window
from switchyard.clients.token_count import count_tokens
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import (
    UpstreamError,
    UpstreamProtocolError,
)
from switchyard.protocol.redact import Redactor, header_secrets
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamError, StreamEvent
from switchyard.protocol.targets import TargetInfo
from switchyard.wire import codec as get_codec
from switchyard.wire import custom_tools, reasoning
from switchyard.wire.anthropic_messages.thinking import thinking_turn_missing
from switchyard.wire.base import WireFormat
from switchyard.wire.json import dumps_in_pieces
from switchyard.wire.openai_chat.plain_answer import PlainAnswer, plain_answer
from switchyard.wire.openai_chat.request import normalize_replay as normalize_chat_replay
from switchyard.wire.sse import SSEParser
from switchyard.wire.text_run import TextRun

if TYPE_CHECKING:
    import httpx

# A request with this many messages is encoded off the event loop (see ``HttpBackend._encode``).
_LARGE_MESSAGES = 2000

_HOP_BY_HOP = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding"})


class HttpBackend:
    """An upstream reachable over HTTP in one wire format.

    Args:
        name: The ``llm_clients`` entry name (for errors and logs).
        base_url: Root URL, e.g. ``http://127.0.0.1:8000/v1``.
        fmt: Wire format the upstream speaks.
        api_key: Secret sent as the format's auth header, or ``None``.
        headers: Extra headers sent on every request.
        timeouts: Default limits.
        max_connections: Connection-pool size.
        transport: An ``httpx`` transport to use instead of the network (tests).
        max_response_bytes: Largest JSON answer body, and largest decoded size of a compressed
            body, read from this upstream (a gzip bomb fails as a protocol error).
    """

    replays_caller_body = True
    """A caller's body of this backend's format (``CallOptions.raw_body``) goes out as it came,
    the model replaced: of the request it reads only ``model``, ``stream`` and ``origin``, so the
    engine may hand it a stand-in for a plain Chat body (switchyard/engine/plain_chat.py)."""

    def __init__(
        self,
        name: str,
        base_url: str,
        fmt: WireFormat | str = WireFormat.OPENAI_CHAT,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.max_response_bytes = max_response_bytes
        self.format = WireFormat(fmt)
        self.max_connections = max_connections
        self.codec = get_codec(self.format)
        self.timeouts = timeouts or Timeouts()
        self.url = self._url(base_url.rstrip("/"), self.codec.path)
        self.base_url = self.url[: -len(self.codec.path)] if self.url.endswith(self.codec.path) else self.url
        base_headers = {"content-type": "application/json", "accept": "application/json"}
        base_headers.update(self._auth_headers(api_key))
        base_headers.update(headers or {})
        self._headers = base_headers
        # The credentials this backend sends (its key, any secret-bearing header): masked in every
        # upstream error it passes on (docs/security.md, "hostile network").
        self._redact = Redactor([*([api_key] if api_key else []), *header_secrets(base_headers)])
        self._drains: set[asyncio.Task[None]] = set()
        self._no_health_endpoint = False  # learned: the default /health answered 404/405
        self._injected = transport
        self._max_connections = max_connections
        self._http: httpx.AsyncClient | None = None
        self._pool = lean_pool(self.url, self._headers, transport is not None, max_connections, max_response_bytes)
        # What a failed request raises, by client: checked by ``except self._errors``.
        self._errors: tuple[type[BaseException], ...] = (self._pool.errors,) if self._pool is not None else ()

    @property
    def _client(self) -> httpx.AsyncClient:
        """The httpx client: probes, ``/models``, token counts, and answer calls when the lean pool
        does not apply. Built (and httpx imported) on first use."""
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                transport=self._injected,
                limits=httpx.Limits(
                    max_connections=self._max_connections, max_keepalive_connections=self._max_connections
                ),
                timeout=httpx.Timeout(self.timeouts.read, connect=self.timeouts.connect),
                follow_redirects=False,
            )
            # Requests are built and sent below the client (see ``_send``): parse the URL and pick
            # the transport (an injected one, or the proxy the environment names for this URL) once.
            self._target_url = httpx.URL(self.url)
            self._transport = self._http._transport_for_url(self._target_url)
            self._base_headers = {**self._http.headers, **self._headers}
            self._errors = (*self._errors, httpx.HTTPError)
        return self._http

    @staticmethod
    def _url(base: str, path: str) -> str:
        if base.endswith(path):
            return base
        if path.startswith("/v1/") and base.endswith("/v1"):
            # Anthropic-style paths carry /v1; accept a base URL given with or without it.
            return base + path[3:]
        return base + path

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        if self.format is WireFormat.ANTHROPIC_MESSAGES:
            # anthropic-version is required on every call (a caller's own value replaces it).
            return {"anthropic-version": "2023-06-01", **({"x-api-key": api_key} if api_key else {})}
        if not api_key:
            return {}
        return {"authorization": f"Bearer {api_key}"}

    def replays(self, request: ChatRequest, options: CallOptions) -> bool:
        """Whether the caller's body goes out verbatim (same format, nothing to strip)."""
        if options.raw_body is None or options.raw_format != self.format._value_:
            return False
        if self.format is WireFormat.ANTHROPIC_MESSAGES and thinking_turn_missing(options.raw_body):
            # A turn another tier wrote (no signed thinking) would be refused by Anthropic; the
            # encoder turns thinking off for this one call instead.
            return False
        # Reasoning another provider issued must be removed before this one sees it.
        return not reasoning.any_foreign(request.messages, self.format._value_)

    async def _encode(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions, stream: bool
    ) -> tuple[bytes, frozenset[str]]:
        """The request body, and the free-form tools whose calls need unwrapping in the answer.

        A long conversation (``_LARGE_MESSAGES`` messages and more) is encoded on a worker
        thread: walking and serialising 100,000 messages takes a few hundred ms, which would
        stall every other request on the event loop.
        """
        if len(request.messages) >= _LARGE_MESSAGES:
            return await asyncio.to_thread(self._encode_now, request, target, options, stream)
        return self._encode_now(request, target, options, stream)

    def _encode_now(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions, stream: bool
    ) -> tuple[bytes, frozenset[str]]:
        replays = self.replays(request, options)
        # Free-form tools sent as function stand-ins (not for a verbatim replay or a Responses
        # upstream, which takes them as they are).
        plain = replays or self.format is WireFormat.OPENAI_RESPONSES
        names = frozenset() if plain else custom_tools.custom_names(request.tools)
        return self._body(request, target, options, stream, replays=replays), names

    def _body(
        self,
        request: ChatRequest,
        target: TargetInfo,
        options: CallOptions,
        stream: bool,
        *,
        replays: bool,
    ) -> bytes:
        if replays:
            assert options.raw_body is not None
            body: dict[str, Any] = dict(options.raw_body)
            body["model"] = target.model
            if self.format is WireFormat.OPENAI_CHAT:
                body = normalize_chat_replay(body)
            if stream and self.format is WireFormat.OPENAI_CHAT:
                # Usage is needed for accounting; the engine strips it again if the caller did not ask.
                body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        else:
            body = self.codec.encode_request(request, model=target.model, stream=stream)
            if request.max_tokens is None and "max_tokens" in target.extra_body and "max_tokens" in body:
                # The encoder's default (Anthropic needs one) gives way to the target's.
                body["max_tokens"] = target.extra_body["max_tokens"]
        for key, value in target.extra_body.items():
            body.setdefault(key, value)
        dump = dumps_in_pieces if len(request.messages) >= _LARGE_MESSAGES else orjson.dumps
        # (In pieces on a worker thread for long conversations: the event loop runs in between.)
        content = dump(body)
        if may_clamp(body, target) and clamp_output(body, request, target, len(content)):
            content = dump(body)
        return content

    def _request(
        self,
        content: bytes,
        options: CallOptions,
        timeouts: Timeouts,
        url: str | None = None,
        deadline: float | None = None,
    ) -> httpx.Request:
        _ = self._client  # builds the client, its transport and merged headers on first use
        headers = self._base_headers
        if options.headers:
            headers = dict(headers)
            for key, value in options.headers.items():
                if self._forwards(key.lower()):
                    headers[key] = value
        import httpx

        pool = timeouts.pool_wait(deadline)
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=pool)
        return httpx.Request(
            "POST",
            self._target_url if url is None else httpx.URL(url),
            content=content,
            headers=headers,
            extensions={"timeout": timeout.as_dict()},
        )

    def _forwards(self, name: str) -> bool:
        """Whether a caller header (lower-cased ``name``) goes on to this upstream: not a
        hop-by-hop one, and anthropic-* (beta flags, version) only to Anthropic."""
        return name not in _HOP_BY_HOP and (
            self.format is WireFormat.ANTHROPIC_MESSAGES or not name.startswith("anthropic-")
        )

    async def _post(
        self,
        content: bytes,
        options: CallOptions,
        timeouts: Timeouts,
        *,
        deadline: float | None = None,
        stream: bool = False,
        bounded: bool = False,
    ) -> Any:
        """POSTs an answer call: through the lean pool when there is one, else through httpx.
        Either way the result has ``status_code``, ``headers``, ``content``, ``aiter_bytes``,
        ``aread`` and ``aclose``, and failures are among ``self._errors``. With ``bounded``
        the lean pool ends the call at ``deadline`` itself (a ``TimeoutError``)."""
        if self._pool is None:
            return await self._send(self._request(content, options, timeouts, deadline=deadline), stream=stream)
        extra = None
        if options.headers:
            # A caller's value replaces the backend's header of the same name (the pool does
            # that, as httpx's header merge does).
            extra = {k.lower(): v for k, v in options.headers.items() if self._forwards(k.lower())}
        return await self._pool.post(
            content,
            extra_headers=extra,
            connect_timeout=timeouts.connect,
            pool_timeout=timeouts.pool_wait(deadline),
            read_timeout=timeouts.read,
            stream=stream,
            deadline=deadline if bounded else None,
        )

    async def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Sends straight to the transport. ``AsyncClient.send`` would add URL merging, a cookie
        jar, auth and redirect handling we do not use, for about a third of the HTTP cost."""
        response = await self._transport.handle_async_request(request)
        response.request = request
        if not stream:
            try:
                await read_capped(response, self.max_response_bytes)
            finally:
                await response.aclose()
        return response

    async def complete(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> ChatResponse:
        data, names = await self._answer_body(request, target, options)
        return self._decoded(data, names, target)

    async def complete_plain(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> ChatResponse | PlainAnswer:
        """:meth:`complete` for a Chat caller whose body this Chat upstream gets as it came: a
        plain answer comes back as a :class:`PlainAnswer` (its reply built without the IR,
        equal to the decoded one's), any other answer decoded as :meth:`complete` does."""
        data, names = await self._answer_body(request, target, options)
        if not names and self.format is WireFormat.OPENAI_CHAT:
            plain = plain_answer(data)
            if plain is not None:
                return plain
        return self._decoded(data, names, target)

    async def _answer_body(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> tuple[dict[str, Any], frozenset[str]]:
        """The upstream's answer as a JSON object, and the free-form tools to restore in it."""
        timeouts, deadline, label = self.timeouts.for_call(options)
        content, names = await self._encode(request, target, options, stream=False)
        try:
            if self._pool is not None:  # the lean pool keeps the deadline with its read timer
                resp = await self._post(content, options, timeouts, deadline=deadline, bounded=True)
            else:
                async with Deadline(left(deadline)):
                    resp = await self._post(content, options, timeouts, deadline=deadline)
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no complete answer within its {label}", target, label) from exc
        except self._errors as exc:
            raise self._transport_error(exc, target, timeouts) from exc
        if resp.status_code >= 400:
            raise status_error(
                self.codec, resp.status_code, resp.content, resp.headers, target=target.name, redact=self._redact
            )
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"{target.name}: upstream sent invalid JSON", target=target.name) from exc
        if not isinstance(data, dict):
            raise UpstreamProtocolError(f"{target.name}: upstream sent a non-object body", target=target.name)
        return data, names

    def _decoded(self, data: dict[str, Any], names: frozenset[str], target: TargetInfo) -> ChatResponse:
        try:
            response = self.codec.decode_response(data)
        except UpstreamError as exc:
            exc.target = target.name
            raise
        return custom_tools.restore_response(response, names)

    async def open_stream(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent]:
        return await self._open(request, target, options, runs=False)

    async def open_stream_runs(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions
    ) -> AsyncIterator[StreamEvent | TextRun]:
        """:meth:`open_stream` for a caller whose encoder takes text runs (the engine's own
        replies to Chat and Anthropic callers): from a Chat upstream, the texts of the plain
        text chunks of one read come as one :class:`TextRun` (wire/text_run.py)."""
        return await self._open(request, target, options, runs=self.format is WireFormat.OPENAI_CHAT)

    async def _open(
        self, request: ChatRequest, target: TargetInfo, options: CallOptions, *, runs: bool
    ) -> AsyncIterator[Any]:
        timeouts, deadline, label = self.timeouts.for_call(options)
        content, names = await self._encode(request, target, options, stream=True)
        try:
            async with Deadline(left(deadline)):
                resp = await self._post(content, options, timeouts, deadline=deadline, stream=True)
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no response headers within its {label}", target, label) from exc
        except self._errors as exc:
            raise self._transport_error(exc, target, timeouts) from exc
        if resp.status_code >= 400:
            try:
                body = await resp.aread()
            except self._errors:
                body = b""
            finally:
                await resp.aclose()
            raise status_error(
                self.codec, resp.status_code, body, resp.headers, target=target.name, redact=self._redact
            )
        # The lean pool's response carries its content type parsed (no header mapping built).
        content_type = getattr(resp, "content_type", None)
        if content_type is None:
            content_type = resp.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            # The upstream ignored ``stream`` and answered in one piece: replay it as a stream.
            # A body that breaks off (truncated, badly chunked, a bomb) fails like a JSON answer
            # would: an upstream error the engine falls back on, never a bare transport error.
            try:
                async with Deadline(left(deadline)):
                    body = await resp.aread()
            except TimeoutError as exc:
                raise timed_out(f"{target.name}: no complete answer within its {label}", target, label) from exc
            except self._errors as exc:
                raise self._transport_error(exc, target, timeouts) from exc
            finally:
                await resp.aclose()
            events: AsyncIterator[Any] = self._replay_json(body, target)
        else:
            events = self._events(resp, target, deadline, timeouts, label, runs=runs and not names)
        return custom_tools.restore_stream(events, names) if names else events

    async def _replay_json(self, body: bytes, target: TargetInfo) -> AsyncIterator[StreamEvent]:
        from switchyard.protocol.stream import response_to_events

        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"{target.name}: upstream sent invalid JSON", target=target.name) from exc
        for event in response_to_events(self.codec.decode_response(data)):
            yield event

    async def _events(
        self, resp: Any, target: TargetInfo, deadline: float | None, timeouts: Timeouts, label: str, *, runs: bool
    ) -> AsyncIterator[StreamEvent | TextRun]:
        parser = SSEParser()
        decoder: Any = self.codec.stream_decoder()
        chunks = resp.aiter_bytes()
        # The lean pool's response can hand over everything already received in one piece: no
        # timeout scope and one parser call for a burst of events instead of one per event.
        take_ready = getattr(resp, "take_ready", None)
        kept = keeps_deadline(resp, deadline)
        handed_off = False
        try:
            while True:
                chunk = take_ready() if take_ready is not None else None
                if chunk is None:
                    try:
                        chunk = await (anext(chunks, None) if kept else next_within(chunks, deadline))
                    except TimeoutError as exc:
                        said = f"{target.name}: stream exceeded its {label}"
                        raise timed_out(said, target, label) from exc
                if chunk is None:
                    break
                if runs:
                    batch, failed = decoder.read(parser, chunk)
                    for item in batch:
                        yield masked(item, self._redact) if type(item) is StreamError else item
                    if failed is not None:
                        raise failed
                else:
                    for sse in parser.feed(chunk):
                        for event in decoder.feed(sse):
                            yield masked(event, self._redact) if type(event) is StreamError else event
                        if decoder.done:
                            break
                if decoder.done:
                    handed_off = await self._rest_of_body(resp, chunks, kept)
                    return
            for sse in parser.finish():
                for event in decoder.feed(sse):
                    yield masked(event, self._redact) if type(event) is StreamError else event
            for event in decoder.finish():
                yield masked(event, self._redact) if type(event) is StreamError else event
        except self._errors as exc:
            raise self._transport_error(exc, target, timeouts) from exc
        except UpstreamError as exc:
            exc.target = target.name
            raise
        finally:
            if not handed_off:
                await resp.aclose()

    async def _rest_of_body(self, resp: Any, chunks: AsyncIterator[bytes], kept: bool) -> bool:
        """What follows a complete answer; whether a background task now owns ``resp``.

        The answer is complete, but the HTTP response may not be: closing it before its last
        bytes drops the connection (and, upstream over TLS, the session), so the rest is read in
        the background and the connection returns to the pool. A lean-pool response that ended
        with the answer is pooled already: its iterator ends at once, and no task is made."""
        if getattr(resp, "complete", False) and not resp.buffered:
            await anext(chunks, None)  # ended: left open, the loop would close it in a task of its own
            return False
        if kept:
            resp.stop_at(None)  # the drain has its own bound: the answer's deadline no longer applies
        task = asyncio.get_running_loop().create_task(drain(resp, chunks, self._errors))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        return True

    async def context_window(self, target: TargetInfo, timeout_s: float) -> int | None:
        """Asks ``GET {base_url}/models`` for the model's context window (vLLM's
        ``max_model_len``; ``context_window``, ``context_length`` and ``max_input_tokens`` are
        read too). ``None`` when the upstream does not say.

        Raises:
            UpstreamError: The lookup failed (connection, timeout).
        """
        url = self._models_url()
        headers = {k: v for k, v in self._headers.items() if k != "content-type"}
        import httpx

        try:
            resp = await self._client.get(url, headers=headers, timeout=httpx.Timeout(timeout_s))
        except self._errors as exc:
            raise self._transport_error(exc, target) from exc
        if resp.status_code != 200:
            return None
        try:
            return served_window(parse_model_list(resp.content, url), target.model)
        except ModelListError:
            return None

    def _models_url(self) -> str:
        if self.format is WireFormat.ANTHROPIC_MESSAGES and not self.base_url.endswith("/v1"):
            return self.base_url + "/v1/models"
        return self.base_url + "/models"

    async def probe_health(self, path: str | None, timeout_s: float) -> Probe:
        """One health probe of this upstream (see :mod:`switchyard.clients.health` for the URL
        chosen and how answers are classified). Never raises for upstream problems."""
        if path is not None:
            urls = [health_url(self.base_url, path)]
        elif self.format is WireFormat.OPENAI_CHAT and not self._no_health_endpoint:
            urls = [server_root(self.base_url) + "/health", self._models_url()]
        else:
            urls = [self._models_url()]
        headers = {k: v for k, v in self._headers.items() if k != "content-type"}
        probe, missing = await probe_urls(self._client, urls, headers, timeout_s)
        if missing and path is None:
            self._no_health_endpoint = True
        return probe

    async def post_json(
        self, url: str, body: dict[str, Any], options: CallOptions, target: TargetInfo, what: str
    ) -> Any:
        """POSTs ``body`` to ``url`` of this upstream through httpx — a side call such as a token
        count, not an answer — with the caller's forwarded headers and the call's limits (its
        deadline too); returns the answer's parsed JSON.

        Raises:
            UpstreamError: Named by ``what``: no answer in time, the connection failed, an error
                status (credentials masked), or an answer that is not JSON.
        """
        timeouts, deadline, label = self.timeouts.for_call(options)
        req = self._request(orjson.dumps(body), options, timeouts, url=url)
        try:
            async with asyncio.timeout(left(deadline)):
                resp = await self._client.send(req)
        except TimeoutError as exc:
            raise timed_out(f"{target.name}: no {what} within its {label}", target, label) from exc
        except self._errors as exc:
            raise self._transport_error(exc, target) from exc
        if resp.status_code >= 400:
            raise status_error(
                self.codec, resp.status_code, resp.content, resp.headers, target=target.name, redact=self._redact
            )
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"{target.name}: {what} answer is not JSON", target=target.name) from exc

    async def count_tokens(self, request: ChatRequest, target: TargetInfo, options: CallOptions) -> int:
        """Prompt tokens of ``request`` as this upstream counts them (see
        :func:`switchyard.clients.token_count.count_tokens`).

        Raises:
            UpstreamError: The upstream has no such endpoint or failed.
        """
        return await count_tokens(self, request, target, options)

    def _transport_error(self, exc: BaseException, target: TargetInfo, limits: Timeouts | None = None) -> UpstreamError:
        return transport_error(exc, target, self.name, self.max_connections, self.timeouts, limits, self._redact)

    async def aclose(self) -> None:
        """Closes pooled connections."""
        for task in list(self._drains):
            task.cancel()
        if self._pool is not None:
            await self._pool.aclose()
        if self._http is not None:
            await self._http.aclose()
