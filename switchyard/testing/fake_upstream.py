"""A fake OpenAI-compatible model server for tests, the demo and benchmarks.

Not a mock: a real ASGI app served by uvicorn on 127.0.0.1, speaking the Chat Completions wire
format (JSON and SSE, tool calls, vLLM-style ``reasoning``, usage chunks) with scriptable
answers, latencies and injected faults.

Faults are chosen per request by the model name (``fail-500``) or by the ``x-fake-fault``
header; see :data:`FAULTS`. Stalls last :attr:`FakeUpstream.stall_s` (or the request's
``x-fake-stall-s`` header) and end early when the client disconnects, which is recorded in
:attr:`FakeUpstream.disconnects` (tests use it to prove a request was cancelled upstream).
:func:`refused_url` gives a base URL where nothing listens (connection refused).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

FAULTS = {
    "fail-500": "answer 500 with an OpenAI error body",
    "fail-502-html": "answer 502 with an HTML body",
    "fail-503": "answer 503",
    "fail-NNN": "answer status NNN with an OpenAI error body (e.g. fail-408, fail-504; fail-NNN-html: an HTML page)",
    "fail-429": "answer 429 with Retry-After: FakeUpstream.retry_after (x-fake-retry-after overrides)",
    "fail-429-long": "answer 429 with Retry-After: 3600",
    "fail-429-reset": "answer 429 with OpenAI x-ratelimit-* headers (requests exhausted) and no Retry-After",
    "fail-401": "answer 401",
    "fail-403": "answer 403",
    "fail-400": "answer 400 (a plain bad request)",
    "overflow-400": "answer 400 context_length_exceeded (maximum context length is 4096 tokens)",
    "flaky-N": "answer 503 to the first N requests for this model, then normally (flaky-N-SSS: status SSS)",
    "stall-headers": "send nothing for stall_s seconds, then a 500",
    "stall-mid": "stream two chunks (JSON: half the body), then go silent for stall_s seconds",
    "reset-mid": "stream two chunks (JSON: half the body), then drop the connection",
    "malformed-sse": "stream two chunks, then a non-JSON data line (JSON: a 200 with an invalid body)",
    "empty-stream": "answer 200 text/event-stream with no events (JSON: a 200 with an empty body)",
}

_FAIL_STATUS = re.compile(r"fail-(\d{3})(-html)?")
_FLAKY = re.compile(r"flaky-(\d+)(?:-(\d{3}))?")


def is_fault(name: str) -> bool:
    """Whether a model name selects a fault."""
    return name in FAULTS or bool(_FAIL_STATUS.fullmatch(name) or _FLAKY.fullmatch(name))


def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: connecting is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    finally:
        sock.close()
    return f"http://127.0.0.1:{port}/v1"


@dataclass(slots=True)
class Turn:
    """What a fake model answers.

    Attributes:
        text: Visible text.
        tool_calls: ``(name, arguments)`` pairs, arguments as a dict.
        reasoning: Reasoning text (sent as vLLM's ``reasoning`` field).
        finish_reason: Overrides the natural finish reason.
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: str = ""
    finish_reason: str | None = None


Brain = Callable[[dict[str, Any], "FakeModel"], Turn]
"""Decides a fake model's turn from the request body."""


def estimate_tokens(text: str) -> int:
    """Roughly 4 characters per token, at least 1 for non-empty text."""
    return max(1, (len(text) + 3) // 4) if text else 0


def prompt_text(body: dict[str, Any]) -> str:
    """All message text of a Chat request, concatenated (for token estimates)."""
    out: list[str] = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        for call in msg.get("tool_calls") or []:
            out.append(str((call.get("function") or {}).get("arguments", "")))
    for tool in body.get("tools") or []:
        out.append(orjson.dumps(tool).decode())
    return "\n".join(out)


def last_user_text(body: dict[str, Any]) -> str:
    """Text of the newest user message."""
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def echo_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """Answers with the model's name and the last user message; calls the first tool when asked
    to (the user text contains ``use a tool`` or ``tool_choice`` forces one)."""
    tools = body.get("tools") or []
    forced = body.get("tool_choice") not in (None, "auto", "none")
    user = last_user_text(body)
    last_role = (body.get("messages") or [{}])[-1].get("role")
    if tools and last_role != "tool" and (forced or "use a tool" in user.lower()):
        fn = tools[0].get("function") or {}
        return Turn(tool_calls=[(str(fn.get("name", "tool")), {"query": user[:40]})])
    return Turn(text=f"[{model.name}] {user}".strip(), reasoning=model.reasoning)


@dataclass(slots=True)
class FakeModel:
    """One model the fake server knows.

    Attributes:
        name: Model id.
        brain: Decides answers (default :func:`echo_brain`).
        first_byte_s: Delay before the answer (headers included).
        per_chunk_s: Delay between stream chunks.
        reasoning: Reasoning text added by :func:`echo_brain`.
        context_window: Reported by ``GET /v1/models`` as ``max_model_len``.
        paced_json: Also pace non-streamed answers by ``per_chunk_s`` per stream piece, so a
            buffered call takes as long as the stream would (latency benchmarks).
        reasoning_field: Name of the reasoning field in answers: ``reasoning`` (current vLLM) or
            ``reasoning_content`` (older vLLM, DeepSeek, SGLang).
    """

    name: str
    brain: Brain = echo_brain
    first_byte_s: float = 0.0
    per_chunk_s: float = 0.0
    reasoning: str = ""
    context_window: int = 131072
    paced_json: bool = False
    reasoning_field: str = "reasoning"


@dataclass(slots=True)
class Received:
    """A request the fake server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeUpstream:
    """The ASGI app. Unknown model names get a default :class:`FakeModel` of that name.

    Args:
        models: Models to know up front.
        stall_s: How long the stall faults stay silent.
        retry_after: The ``Retry-After`` value of ``fail-429``.
        ratelimit_reset: The ``x-ratelimit-reset-requests`` value of ``fail-429-reset``.

    Attributes:
        received: Every request body, in arrival order (for assertions).
        gets: Paths of every GET request, in arrival order.
        disconnects: Model names of requests whose client went away during a stall.
    """

    def __init__(
        self,
        models: list[FakeModel] | None = None,
        *,
        stall_s: float = 30.0,
        retry_after: str = "1",
        ratelimit_reset: str = "250ms",
    ) -> None:
        self.models = {m.name: m for m in models or []}
        self.received: list[Received] = []
        self.gets: list[str] = []
        self.disconnects: list[str] = []
        self.stall_s = stall_s
        self.retry_after = retry_after
        self.ratelimit_reset = ratelimit_reset
        self._flaky: dict[str, int] = {}
        self._ids = itertools.count(1)

    def reset(self) -> None:
        """Forgets received requests, disconnects and ``flaky-N`` counts."""
        self.received.clear()
        self.disconnects.clear()
        self._flaky.clear()

    def count(self, model: str) -> int:
        """How many requests named ``model``."""
        return sum(1 for r in self.received if r.body.get("model") == model)

    def model(self, name: str) -> FakeModel:
        """The model called ``name`` (created on first use)."""
        found = self.models.get(name)
        if found is None:
            found = self.models[name] = FakeModel(name)
        return found

    def bodies(self, model: str | None = None) -> list[dict[str, Any]]:
        """Received request bodies, optionally only those for ``model``."""
        return [r.body for r in self.received if model is None or r.body.get("model") == model]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        if scope["method"] == "GET":
            self.gets.append(path)
        if scope["method"] == "GET" and path.endswith("/models"):
            data = [
                {"id": m.name, "object": "model", "owned_by": "fake", "max_model_len": m.context_window}
                for m in self.models.values()
            ]
            await _json(send, 200, {"object": "list", "data": data})
            return
        if scope["method"] == "GET" and path.endswith("/health"):
            await _json(send, 200, {"status": "ok"})
            return
        if not path.endswith("/chat/completions"):
            await _json(send, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "code": 404}})
            return
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            await _json(send, 400, {"error": {"message": "bad json", "type": "BadRequestError", "code": 400}})
            return
        self.received.append(Received(path, headers, request))
        name = str(request.get("model", ""))
        fault = headers.get("x-fake-fault") or (name if is_fault(name) else None)
        stall = float(headers.get("x-fake-stall-s") or self.stall_s)
        if fault and await self._fault_before(fault, send, receive, name, stall, headers):
            return
        model = self.model(name)
        if model.first_byte_s:
            await asyncio.sleep(model.first_byte_s)
        turn = model.brain(request, model)
        if request.get("stream"):
            await self._stream(send, receive, request, model, turn, fault, stall)
        elif fault in _BODY_FAULTS:
            await self._broken_body(send, receive, self._completion(request, model, turn), str(fault), name, stall)
        else:
            if model.paced_json and model.per_chunk_s:
                pieces = len(_pieces(turn.text)) + len(_pieces(turn.reasoning)) + len(turn.tool_calls)
                await asyncio.sleep(model.per_chunk_s * pieces)
            await _json(send, 200, self._completion(request, model, turn))

    async def _hold(self, receive: Receive, seconds: float, name: str) -> bool:
        """Stays silent for ``seconds``; returns ``True`` (and records it) if the client went away."""
        try:
            async with asyncio.timeout(seconds):
                while (await receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            return False
        self.disconnects.append(name)
        return True

    async def _broken_body(
        self, send: Send, receive: Receive, payload: dict[str, Any], fault: str, name: str, stall: float
    ) -> None:
        """The JSON (non-stream) forms of the mid-answer faults."""
        body = orjson.dumps(payload)
        if fault == "empty-stream":
            await _raw(send, 200, b"", b"application/json")
            return
        if fault == "malformed-sse":
            await _raw(send, 200, body[: len(body) // 2], b"application/json")
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        if fault == "reset-mid":
            raise ConnectionResetError("fake upstream drops the connection mid-body")
        if await self._hold(receive, stall, name):
            return
        await send({"type": "http.response.body", "body": body[len(body) // 2 :], "more_body": False})

    async def _fault_before(
        self, fault: str, send: Send, receive: Receive, name: str, stall: float, headers: dict[str, str]
    ) -> bool:
        """Faults that replace the whole answer; returns whether one was sent."""
        flaky = _FLAKY.fullmatch(fault)
        if flaky:
            seen = self._flaky.get(name, 0)
            self._flaky[name] = seen + 1
            if seen >= int(flaky.group(1)):
                return False
            fault = f"fail-{flaky.group(2) or 503}"
        if fault == "fail-500":
            await _json(
                send, 500, {"error": {"message": "internal failure", "type": "InternalServerError", "code": 500}}
            )
        elif fault == "fail-502-html":
            await _raw(send, 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", b"text/html")
        elif fault == "fail-503":
            await _json(send, 503, {"error": {"message": "overloaded", "type": "ServiceUnavailableError", "code": 503}})
        elif fault == "fail-429":
            after = headers.get("x-fake-retry-after") or self.retry_after
            await _json(send, 429, _RATE_LIMITED, extra=[(b"retry-after", after.encode())])
        elif fault == "fail-429-long":
            await _json(send, 429, _RATE_LIMITED, extra=[(b"retry-after", b"3600")])
        elif fault == "fail-429-reset":
            extra = [
                (b"x-ratelimit-limit-requests", b"60"),
                (b"x-ratelimit-remaining-requests", b"0"),
                (b"x-ratelimit-reset-requests", self.ratelimit_reset.encode()),
                (b"x-ratelimit-remaining-tokens", b"149000"),
                (b"x-ratelimit-reset-tokens", b"6m0s"),
            ]
            await _json(send, 429, _RATE_LIMITED, extra=extra)
        elif fault == "fail-401":
            await _json(
                send,
                401,
                {"error": {"message": "invalid api key", "type": "authentication_error", "code": "invalid_api_key"}},
            )
        elif fault == "fail-403":
            await _json(
                send,
                403,
                {
                    "error": {
                        "message": "your organization may not use this model",
                        "type": "permission_error",
                        "code": "model_access_denied",
                    }
                },
            )
        elif fault == "fail-400":
            await _json(
                send,
                400,
                {
                    "error": {
                        "message": "temperature must be <= 2",
                        "type": "BadRequestError",
                        "code": 400,
                        "param": "temperature",
                    }
                },
            )
        elif fault == "overflow-400":
            await _json(
                send,
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 4096 tokens. However, you requested 9000 "
                        "tokens. Please reduce the length of the messages.",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                },
            )
        elif fault == "stall-headers":
            if await self._hold(receive, stall, name):
                return True
            await _json(send, 500, {"error": {"message": "late", "type": "InternalServerError", "code": 500}})
        elif fault == "empty-stream":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif (status := _FAIL_STATUS.fullmatch(fault)) is not None:
            code = int(status.group(1))
            if status.group(2):
                page = f"<html><body><h1>{code}</h1>blocked by the gateway</body></html>".encode()
                await _raw(send, code, page, b"text/html")
            else:
                error = {"error": {"message": f"injected HTTP {code}", "type": "api_error", "code": code}}
                await _json(send, code, error)
        else:
            return False
        return True

    def _usage(self, request: dict[str, Any], turn: Turn) -> dict[str, Any]:
        completion = (
            estimate_tokens(turn.text)
            + estimate_tokens(turn.reasoning)
            + sum(estimate_tokens(orjson.dumps(args).decode()) + 5 for _, args in turn.tool_calls)
        )
        reasoning = estimate_tokens(turn.reasoning)
        prompt = estimate_tokens(prompt_text(request))
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _calls(self, turn: Turn) -> list[dict[str, Any]]:
        return [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(args).decode()},
            }
            for name, args in turn.tool_calls
        ]

    def _completion(self, request: dict[str, Any], model: FakeModel, turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            message[model.reasoning_field] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = self._calls(turn)
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        return {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self._usage(request, turn),
        }

    async def _stream(
        self,
        send: Send,
        receive: Receive,
        request: dict[str, Any],
        model: FakeModel,
        turn: Turn,
        fault: str | None,
        stall: float,
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        cid = f"chatcmpl-fake{next(self._ids)}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + orjson.dumps(payload) + b"\n\n"

        frames: list[bytes] = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({model.reasoning_field: piece}) for piece in _pieces(turn.reasoning)]
        frames += [chunk({"content": piece}) for piece in _pieces(turn.text)]
        for index, call in enumerate(self._calls(turn)):
            fn = call["function"]
            frames.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            frames += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(fn["arguments"], 12)
            ]
        frames.append(chunk({}, turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")))
        options = request.get("stream_options") or {}
        if options.get("include_usage"):
            frames.append(
                b"data: "
                + orjson.dumps(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model.name,
                        "choices": [],
                        "usage": self._usage(request, turn),
                    }
                )
                + b"\n\n"
            )
        frames.append(b"data: [DONE]\n\n")
        for i, data in enumerate(frames):
            if fault in ("stall-mid", "reset-mid", "malformed-sse") and i == 2:
                if fault == "stall-mid":
                    if await self._hold(receive, stall, model.name):
                        return
                elif fault == "reset-mid":
                    raise ConnectionResetError("fake upstream drops the connection mid-stream")
                else:
                    await send({"type": "http.response.body", "body": b"data: {not json\n\n", "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
            if i and model.per_chunk_s:
                await asyncio.sleep(model.per_chunk_s)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_RATE_LIMITED = {"error": {"message": "rate limited", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
_BODY_FAULTS = frozenset({"stall-mid", "reset-mid", "malformed-sse", "empty-stream"})


def _pieces(text: str, size: int = 0) -> list[str]:
    """Splits text into stream-sized pieces (words, or fixed-size slices when ``size``)."""
    if not text:
        return []
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)]
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


async def _json(send: Send, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _raw(send, status, orjson.dumps(payload), b"application/json", extra)


async def _raw(
    send: Send, status: int, body: bytes, content_type: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
