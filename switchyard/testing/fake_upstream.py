"""A fake model server for tests, the demo and benchmarks, speaking all three wire formats.

Not a mock: a real ASGI app served by uvicorn on 127.0.0.1, with scriptable answers,
latencies and injected faults, and request validation modelled on the real providers:

* ``POST /v1/chat/completions`` — OpenAI Chat / vLLM (JSON and SSE, tool calls, vLLM-style
  ``reasoning``, usage chunks); rejects ``tools: []``, non-function tools, ``tool_choice``
  without tools and ``stream_options`` without ``stream`` as vLLM does.
* ``POST /v1/messages`` and ``/v1/messages/count_tokens`` — Anthropic Messages (JSON and
  named-event SSE, ``tool_use``, signed ``thinking``); see :mod:`switchyard.testing.fake_anthropic`.
* ``POST /v1/responses`` and ``/v1/responses/input_tokens`` — OpenAI Responses (JSON and SSE,
  function and custom tool calls, reasoning items); see :mod:`switchyard.testing.fake_responses`.
* ``POST /tokenize`` — vLLM's token counter; ``GET /v1/models``; ``GET /health``.

The same brains answer on every endpoint (they see a Chat-shaped view of each request).
Faults are chosen per request by the model name (``fail-500``) or by the ``x-fake-fault``
header; see :data:`FAULTS`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any

import orjson

from switchyard.testing import fake_anthropic, fake_responses
from switchyard.testing.fake_common import (
    FAULTS,
    Brain,
    FakeModel,
    Receive,
    Scope,
    Send,
    Turn,
    echo_brain,
    estimate_tokens,
    last_user_text,
    pieces,
    prompt_text,
    send_frames,
    send_json,
    send_raw,
    usage_numbers,
)

__all__ = [
    "FAULTS",
    "Brain",
    "FakeModel",
    "FakeUpstream",
    "Received",
    "Turn",
    "echo_brain",
    "estimate_tokens",
    "last_user_text",
    "prompt_text",
]

_CHAT_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "fail-500": (500, {"error": {"message": "internal failure", "type": "InternalServerError", "code": 500}}),
    "fail-503": (503, {"error": {"message": "overloaded", "type": "ServiceUnavailableError", "code": 503}}),
    "fail-429": (
        429,
        {"error": {"message": "rate limited", "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
    ),
    "fail-401": (
        401,
        {"error": {"message": "invalid api key", "type": "authentication_error", "code": "invalid_api_key"}},
    ),
    "fail-400": (
        400,
        {
            "error": {
                "message": "temperature must be <= 2",
                "type": "BadRequestError",
                "code": 400,
                "param": "temperature",
            }
        },
    ),
    "overflow-400": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, you requested 9000 "
                "tokens. Please reduce the length of the messages.",
                "type": "BadRequestError",
                "code": 400,
            }
        },
    ),
}


@dataclass(slots=True)
class Received:
    """A request the fake server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeUpstream:
    """The ASGI app. Unknown model names get a default :class:`FakeModel` of that name.

    Attributes:
        received: Every request body, in arrival order (for assertions).
    """

    def __init__(self, models: list[FakeModel] | None = None) -> None:
        self.models = {m.name: m for m in models or []}
        self.received: list[Received] = []
        self._ids = itertools.count(1)

    def model(self, name: str) -> FakeModel:
        """The model called ``name`` (created on first use)."""
        found = self.models.get(name)
        if found is None:
            found = self.models[name] = FakeModel(name)
        return found

    def bodies(self, model: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        """Received request bodies, optionally only those for ``model`` and/or whose path ends with ``path``."""
        return [
            r.body
            for r in self.received
            if (model is None or r.body.get("model") == model) and (path is None or r.path.endswith(path))
        ]

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
            await self._get(path, send)
            return
        kind = _endpoint(path)
        if kind is None:
            await send_json(send, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "code": 404}})
            return
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            await send_json(send, 400, {"error": {"message": "bad json", "type": "BadRequestError", "code": 400}})
            return
        self.received.append(Received(path, headers, request))
        if kind in ("count_tokens", "input_tokens", "tokenize"):
            await self._count(kind, request, send)
            return
        name = str(request.get("model", ""))
        fault = headers.get("x-fake-fault") or (name if name in FAULTS else None)
        if fault and await self._fault_before(kind, fault, send):
            return
        model = self.model(name)
        if model.first_byte_s:
            await asyncio.sleep(model.first_byte_s)
        if kind == "messages":
            await self._anthropic(send, request, model, fault)
        elif kind == "responses":
            await self._responses(send, request, model, fault)
        else:
            await self._chat(send, request, model, fault)

    async def _get(self, path: str, send: Send) -> None:
        if path.endswith("/models"):
            data = [
                {"id": m.name, "object": "model", "owned_by": "fake", "max_model_len": m.context_window}
                for m in self.models.values()
            ]
            await send_json(send, 200, {"object": "list", "data": data})
        elif path.endswith("/health"):
            await send_json(send, 200, {"status": "ok"})
        else:
            await send_json(send, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "code": 404}})

    async def _count(self, kind: str, request: dict[str, Any], send: Send) -> None:
        if str(request.get("model", "")) in FAULTS:
            # A server without a token counter (e.g. not vLLM, or an old version).
            await send_json(send, 404, {"error": {"message": "Not Found", "type": "NotFoundError", "code": 404}})
            return
        if kind == "count_tokens":
            await send_json(send, 200, {"input_tokens": fake_anthropic.count_tokens(request)})
        elif kind == "input_tokens":
            n = fake_responses.count_tokens(request)
            await send_json(send, 200, {"object": "response.input_tokens", "input_tokens": n})
        else:
            n = estimate_tokens(prompt_text(request)) + 3 * len(request.get("messages") or [])
            await send_json(send, 200, {"count": n, "max_model_len": 131072, "tokens": list(range(n))})

    async def _fault_before(self, kind: str, fault: str, send: Send) -> bool:
        """Faults that replace the whole answer; returns whether one was sent."""
        table = {
            "messages": fake_anthropic.FAULT_BODIES,
            "responses": fake_responses.FAULT_BODIES,
        }.get(kind, _CHAT_ERRORS)
        if fault in table:
            status, payload = table[fault]
            extra = [(b"retry-after", b"1")] if status == 429 else None
            await send_json(send, status, payload, extra=extra)
        elif fault == "fail-502-html":
            await send_raw(send, 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", b"text/html")
        elif fault == "stall-headers":
            await asyncio.sleep(30)
            await send_json(send, 500, {"error": {"message": "late", "type": "InternalServerError", "code": 500}})
        elif fault == "empty-stream":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            return False
        return True

    # -- Anthropic Messages and OpenAI Responses ---------------------------------------------

    async def _anthropic(self, send: Send, request: dict[str, Any], model: FakeModel, fault: str | None) -> None:
        try:
            fake_anthropic.validate(request)
        except fake_anthropic.Invalid as exc:
            await send_json(send, 400, fake_anthropic.error_body("invalid_request_error", str(exc)))
            return
        turn = model.brain(fake_anthropic.view(request), model)
        if request.get("stream"):
            frames = fake_anthropic.frames(request, model, turn, self._ids)
            # message_start, ping, block start, first delta — then the fault.
            await send_frames(send, frames, model, fault, fake_anthropic.ERROR_FRAME, at=4)
        else:
            await send_json(send, 200, fake_anthropic.message(request, model, turn, self._ids))

    async def _responses(self, send: Send, request: dict[str, Any], model: FakeModel, fault: str | None) -> None:
        try:
            fake_responses.validate(request)
        except fake_responses.Invalid as exc:
            await send_json(send, exc.status, fake_responses.error_body(str(exc), param=exc.param))
            return
        turn = model.brain(fake_responses.view(request), model)
        if request.get("stream"):
            frames = fake_responses.frames(request, model, turn, self._ids)
            # created, in_progress, item added, part added, first delta — then the fault.
            await send_frames(send, frames, model, fault, fake_responses.error_frame(), at=5)
        else:
            await send_json(send, 200, fake_responses.response(request, model, turn, self._ids))

    # -- Chat Completions ----------------------------------------------------------------------

    async def _chat(self, send: Send, request: dict[str, Any], model: FakeModel, fault: str | None) -> None:
        problem = _vllm_problem(request)
        if problem is not None:
            await send_json(send, 400, {"error": {"message": problem, "type": "BadRequestError", "code": 400}})
            return
        turn = model.brain(request, model)
        if request.get("stream"):
            await send_frames(send, self._chat_frames(request, model, turn), model, fault, _CHAT_ERROR_FRAME)
        else:
            await send_json(send, 200, self._completion(request, model, turn))

    def _usage(self, request: dict[str, Any], turn: Turn, model: FakeModel) -> dict[str, Any]:
        n = usage_numbers(estimate_tokens(prompt_text(request)), turn, model)
        usage: dict[str, Any] = {
            "prompt_tokens": n["prompt"],
            "completion_tokens": n["completion"],
            "total_tokens": n["prompt"] + n["completion"],
        }
        if n["cache_read"] or n["cache_write"]:
            usage["prompt_tokens_details"] = {"cached_tokens": n["cache_read"], "cache_write_tokens": n["cache_write"]}
        if n["reasoning"]:
            usage["completion_tokens_details"] = {"reasoning_tokens": n["reasoning"]}
        return usage

    def _calls(self, turn: Turn, request: dict[str, Any]) -> list[dict[str, Any]]:
        custom = {(t.get("custom") or {}).get("name") for t in request.get("tools") or [] if t.get("type") == "custom"}
        out: list[dict[str, Any]] = []
        for name, args in turn.tool_calls:
            call_id = f"call_{next(self._ids)}"
            if isinstance(args, str) and name in custom:
                out.append({"id": call_id, "type": "custom", "custom": {"name": name, "input": args}})
            elif isinstance(args, str):
                # Free-form text for a tool declared as a function: the model fills its one parameter.
                fn = {"name": name, "arguments": orjson.dumps({"input": args}).decode()}
                out.append({"id": call_id, "type": "function", "function": fn})
            else:
                fn = {"name": name, "arguments": orjson.dumps(args).decode()}
                out.append({"id": call_id, "type": "function", "function": fn})
        return out

    def _completion(self, request: dict[str, Any], model: FakeModel, turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            message["reasoning"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = self._calls(turn, request)
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        return {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self._usage(request, turn, model),
        }

    def _chat_frames(self, request: dict[str, Any], model: FakeModel, turn: Turn) -> list[bytes]:
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
        frames += [chunk({"reasoning": piece}) for piece in pieces(turn.reasoning)]
        frames += [chunk({"content": piece}) for piece in pieces(turn.text)]
        for index, call in enumerate(self._calls(turn, request)):
            if call["type"] == "custom":
                first = {
                    "index": index,
                    "id": call["id"],
                    "type": "custom",
                    "custom": {"name": call["custom"]["name"], "input": ""},
                }
                frames.append(chunk({"tool_calls": [first]}))
                frames += [
                    chunk({"tool_calls": [{"index": index, "custom": {"input": piece}}]})
                    for piece in pieces(call["custom"]["input"], 12)
                ]
                continue
            fn = call["function"]
            first = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": ""},
            }
            frames.append(chunk({"tool_calls": [first]}))
            frames += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in pieces(fn["arguments"], 12)
            ]
        frames.append(chunk({}, turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")))
        options = request.get("stream_options") or {}
        if options.get("include_usage"):
            final = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model.name,
                "choices": [],
                "usage": self._usage(request, turn, model),
            }
            frames.append(b"data: " + orjson.dumps(final) + b"\n\n")
        frames.append(b"data: [DONE]\n\n")
        return frames


_CHAT_ERROR_FRAME = (
    b"data: "
    + orjson.dumps({"error": {"message": "engine failed mid-answer", "type": "InternalServerError", "code": 500}})
    + b"\n\ndata: [DONE]\n\n"
)


def _endpoint(path: str) -> str | None:
    for suffix, kind in (
        ("/chat/completions", "chat"),
        ("/messages/count_tokens", "count_tokens"),
        ("/messages", "messages"),
        ("/responses/input_tokens", "input_tokens"),
        ("/responses", "responses"),
        ("/tokenize", "tokenize"),
    ):
        if path.endswith(suffix):
            return kind
    return None


def _vllm_problem(request: dict[str, Any]) -> str | None:
    """What vLLM's request validation would reject (``None`` when it accepts the request)."""
    tools = request.get("tools")
    if tools is not None:
        if not tools:
            return "`tools` must not be an empty array; omit the field instead"
        if any(t.get("type", "function") != "function" for t in tools):
            return "only function tools are supported"
    elif request.get("tool_choice") not in (None, "none"):
        return "When using `tool_choice`, `tools` must be set."
    if "stream_options" in request and not request.get("stream"):
        return "Stream options can only be defined when `stream=True`."
    return None
