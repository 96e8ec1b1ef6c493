"""A fake model server for tests, the demo and benchmarks, speaking all three wire formats.

Not a mock: a real ASGI app served by uvicorn on 127.0.0.1, with scriptable answers,
latencies and injected faults, and request validation modelled on the real providers:

* ``POST /v1/chat/completions`` — OpenAI Chat / vLLM (JSON and SSE, tool calls, vLLM-style
  ``reasoning``, usage chunks); rejects ``tools: []``, non-function tools, ``tool_choice``
  without tools and ``stream_options`` without ``stream`` as vLLM does, and a ``tool`` message
  that answers no preceding ``tool_calls`` as OpenAI does; see
  :mod:`switchyard.testing.fake_chat`.
* ``POST /v1/messages`` and ``/v1/messages/count_tokens`` — Anthropic Messages (JSON and
  named-event SSE, ``tool_use``, signed ``thinking``, message threads); see
  :mod:`switchyard.testing.fake_anthropic` and :mod:`switchyard.testing.fake_threads`.
* ``POST /v1/responses`` and ``/v1/responses/input_tokens`` — OpenAI Responses (JSON and SSE,
  function and custom tool calls, reasoning items); see :mod:`switchyard.testing.fake_responses`.
* ``POST /v1/systemone`` — a System One-style decision model (typed choices with
  probabilities, TypeSafe's shape); see :mod:`switchyard.testing.fake_decision`.
* ``POST /tokenize`` — vLLM's token counter; ``GET /v1/models`` (each model's ``max_model_len``
  is its :attr:`FakeModel.context_window`); ``GET /health`` at the server root, answering
  :attr:`FakeUpstream.health_status` after :attr:`FakeUpstream.health_delay_s` (a vLLM whose
  engine died answers 503).

The same brains answer on every endpoint (they see a Chat-shaped view of each request).
Faults are chosen per request by the model name (``fail-500``) or by the ``x-fake-fault``
header; see :data:`FAULTS`. Stalls last :attr:`FakeUpstream.stall_s` (or the request's
``x-fake-stall-s`` header) and end early when the client disconnects, which is recorded in
:attr:`FakeUpstream.disconnects` (tests use it to prove a request was cancelled upstream).
:func:`refused_url` gives a base URL where nothing listens (connection refused).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import Any

import orjson

from switchyard._dataclass import dataclass
from switchyard.testing import fake_anthropic, fake_chat, fake_decision, fake_responses
from switchyard.testing.fake_chat import tool_order_problem, vllm_problem
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
    fail_status,
    flaky,
    http_body,
    is_fault,
    last_user_text,
    leaky_brain,
    output_limit_problem,
    prompt_text,
    refused_url,
    send_frames,
    send_json,
    send_raw,
)
from switchyard.testing.fake_threads import ThreadError, Threads

__all__ = [
    "FAULTS",
    "Brain",
    "FakeModel",
    "FakeUpstream",
    "Received",
    "Turn",
    "echo_brain",
    "estimate_tokens",
    "is_fault",
    "last_user_text",
    "leaky_brain",
    "prompt_text",
    "refused_url",
]


@dataclass(slots=True)
class _Answer:
    """One request being answered: where to send, by which model, with which fault."""

    send: Send
    receive: Receive
    model: FakeModel
    fault: str | None
    hold: Callable[[], Awaitable[bool]]
    headers: dict[str, str] = field(default_factory=dict)


_BODY_FAULTS = frozenset({"stall-mid", "reset-mid", "malformed-sse", "empty-stream"})


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
        health_status: What ``GET /health`` answers (settable while serving).
        health_delay_s: How long ``GET /health`` waits before answering.
        received: Every request body, in arrival order (for assertions).
        threads: The Anthropic message threads this server holds
            (:mod:`switchyard.testing.fake_threads`).
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
        self.health_status = 200
        self.health_delay_s = 0.0
        self._flaky: dict[str, int] = {}
        self._ids = itertools.count(1)
        self.threads = Threads()
        # How many received requests, GETs and disconnects are kept (None: all). Trimmed as each
        # is recorded, before the answer goes out, so a caller never sees one too many.
        self.keep: int | None = None

    def _kept(self, items: list[Any]) -> None:
        if self.keep is not None and len(items) > self.keep:
            del items[: -self.keep]

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

    def bodies(self, model: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        """Received request bodies, optionally only those for ``model`` and/or whose path ends with ``path``."""
        return [
            r.body
            for r in self.received
            if (model is None or r.body.get("model") == model) and (path is None or r.path.endswith(path))
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await http_body(scope, receive, send)
        if body is None:
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        if scope["method"] == "GET":
            self.gets.append(path)
            self._kept(self.gets)
            await self._get(path, send, receive)
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
        self._kept(self.received)
        if kind in ("count_tokens", "input_tokens", "tokenize"):
            await self._count(kind, request, send)
            return
        name = str(request.get("model", ""))
        fault = headers.get("x-fake-fault") or (name if is_fault(name) else None)
        stall = float(headers.get("x-fake-stall-s") or self.stall_s)
        if fault and await self._fault_before(kind, fault, send, receive, name, stall, headers):
            return
        model = self.model(name)
        if model.first_byte_s:
            await asyncio.sleep(model.first_byte_s)
        if kind == "systemone":
            await _system_one(request, headers, send)
            return
        answer = _Answer(send, receive, model, fault, lambda: self._hold(receive, stall, name), headers)
        if kind == "messages":
            await self._anthropic(answer, request)
        elif kind == "responses":
            await self._responses(answer, request)
        else:
            await self._chat(answer, request)

    async def _get(self, path: str, send: Send, receive: Receive) -> None:
        if path.endswith("/models"):
            data = [
                {"id": m.name, "object": "model", "owned_by": "fake", "max_model_len": m.context_window}
                for m in self.models.values()
            ]
            await send_json(send, 200, {"object": "list", "data": data})
        elif path.endswith("/health"):
            if self.health_delay_s:
                try:
                    async with asyncio.timeout(self.health_delay_s):
                        while (await receive())["type"] != "http.disconnect":
                            pass
                    return  # the prober gave up and went away
                except TimeoutError:
                    pass
            if self.health_status == 200:
                await send_raw(send, 200, b"", b"application/json")  # vLLM: 200, empty body
            else:
                await send_json(send, self.health_status, {"error": "engine is dead"})
        else:
            await send_json(send, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "code": 404}})

    async def _count(self, kind: str, request: dict[str, Any], send: Send) -> None:
        if is_fault(str(request.get("model", ""))):
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

    async def _hold(self, receive: Receive, seconds: float, name: str) -> bool:
        """Stays silent for ``seconds``; returns ``True`` (and records it) if the client went away."""
        try:
            async with asyncio.timeout(seconds):
                while (await receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            return False
        self.disconnects.append(name)
        self._kept(self.disconnects)
        return True

    async def _fault_before(
        self,
        kind: str,
        fault: str,
        send: Send,
        receive: Receive,
        name: str,
        stall: float,
        headers: dict[str, str],
    ) -> bool:
        """Faults that replace the whole answer; returns whether one was sent."""
        flakiness = flaky(fault)
        if flakiness is not None:
            seen = self._flaky.get(name, 0)
            self._flaky[name] = seen + 1
            if seen >= flakiness[0]:
                return False
            fault = f"fail-{flakiness[1]}"
        table = {
            "messages": fake_anthropic.FAULT_BODIES,
            "responses": fake_responses.FAULT_BODIES,
        }.get(kind, fake_chat.FAULT_BODIES)
        status_fault = fail_status(fault)
        if fault in ("fail-429", "fail-429-long", "fail-429-reset"):
            body = table.get("fail-429", fake_chat.FAULT_BODIES["fail-429"])[1]
            if fault == "fail-429-reset":
                extra = [
                    (b"x-ratelimit-limit-requests", b"60"),
                    (b"x-ratelimit-remaining-requests", b"0"),
                    (b"x-ratelimit-reset-requests", self.ratelimit_reset.encode()),
                    (b"x-ratelimit-remaining-tokens", b"149000"),
                    (b"x-ratelimit-reset-tokens", b"6m0s"),
                ]
            else:
                after = "3600" if fault == "fail-429-long" else headers.get("x-fake-retry-after") or self.retry_after
                extra = [(b"retry-after", after.encode())]
            await send_json(send, 429, body, extra=extra)
        elif fault in table or fault in fake_chat.FAULT_BODIES:
            status, payload = table.get(fault) or fake_chat.FAULT_BODIES[fault]
            await send_json(send, status, payload)
        elif fault == "fail-502-html":
            await send_raw(send, 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", b"text/html")
        elif fault == "stall-headers":
            if await self._hold(receive, stall, name):
                return True
            await send_json(send, 500, {"error": {"message": "late", "type": "InternalServerError", "code": 500}})
        elif fault == "empty-stream":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif status_fault is not None:
            code, html = status_fault
            if html:
                page = f"<html><body><h1>{code}</h1>blocked by the gateway</body></html>".encode()
                await send_raw(send, code, page, b"text/html")
            else:
                await send_json(
                    send, code, {"error": {"message": f"injected HTTP {code}", "type": "api_error", "code": code}}
                )
        else:
            return False
        return True

    async def _reply_json(self, answer: _Answer, payload: dict[str, Any], turn: Turn) -> None:
        """A non-streamed answer, with the JSON forms of the mid-answer faults."""
        if answer.fault in _BODY_FAULTS:
            await self._broken_body(answer, payload)
            return
        delay = answer.model.json_delay(turn)
        if delay:
            await asyncio.sleep(delay)
        await send_json(answer.send, 200, payload)

    async def _broken_body(self, answer: _Answer, payload: dict[str, Any]) -> None:
        body = orjson.dumps(payload)
        send = answer.send
        if answer.fault == "empty-stream":
            await send_raw(send, 200, b"", b"application/json")
            return
        if answer.fault == "malformed-sse":
            await send_raw(send, 200, body[: len(body) // 2], b"application/json")
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        if answer.fault == "reset-mid":
            raise ConnectionResetError("fake upstream drops the connection mid-body")
        if await answer.hold():
            return
        await send({"type": "http.response.body", "body": body[len(body) // 2 :], "more_body": False})

    # -- Anthropic Messages and OpenAI Responses ---------------------------------------------

    async def _anthropic(self, answer: _Answer, request: dict[str, Any]) -> None:
        send, model = answer.send, answer.model
        try:
            request, continues = self.threads.expand(request, answer.headers)
        except ThreadError as exc:
            await send_json(send, exc.status, exc.body())
            return
        try:
            fake_anthropic.validate(request, answer.headers)
            problem = output_limit_problem(request, model, fake_anthropic.count_tokens(request))
            if problem is not None:
                raise fake_anthropic.Invalid(problem)
        except fake_anthropic.Invalid as exc:
            await send_json(send, 400, fake_anthropic.error_body("invalid_request_error", str(exc)))
            return
        turn = model.brain(fake_anthropic.view(request), model)
        reply = fake_anthropic.message(request, model, turn, self._ids)
        if continues is not None and answer.fault is None:
            self.threads.keep(request, reply, continues)
        if request.get("stream"):
            frames = fake_anthropic.frames(reply)
            # message_start, ping, block start, first delta — then the fault.
            await send_frames(send, frames, model, answer.fault, fake_anthropic.ERROR_FRAME, at=4, hold=answer.hold)
        else:
            await self._reply_json(answer, reply, turn)

    async def _responses(self, answer: _Answer, request: dict[str, Any]) -> None:
        send, model = answer.send, answer.model
        try:
            fake_responses.validate(request)
            problem = output_limit_problem(request, model, fake_responses.count_tokens(request))
            if problem is not None:
                raise fake_responses.Invalid(problem, param="max_output_tokens")
        except fake_responses.Invalid as exc:
            await send_json(send, exc.status, fake_responses.error_body(str(exc), param=exc.param))
            return
        turn = model.brain(fake_responses.view(request), model)
        if request.get("stream"):
            frames = fake_responses.frames(request, model, turn, self._ids)
            # created, in_progress, item added, part added, first delta — then the fault.
            await send_frames(send, frames, model, answer.fault, fake_responses.error_frame(), at=5, hold=answer.hold)
        else:
            await self._reply_json(answer, fake_responses.response(request, model, turn, self._ids), turn)

    # -- Chat Completions ----------------------------------------------------------------------

    async def _chat(self, answer: _Answer, request: dict[str, Any]) -> None:
        send, model = answer.send, answer.model
        problem = (
            vllm_problem(request)
            or tool_order_problem(request)
            or output_limit_problem(request, model, estimate_tokens(prompt_text(request)))
        )
        if problem is not None:
            await send_json(send, 400, {"error": {"message": problem, "type": "BadRequestError", "code": 400}})
            return
        turn = model.brain(request, model)
        if request.get("stream"):
            frames = fake_chat.frames(request, model, turn, self._ids)
            await send_frames(send, frames, model, answer.fault, fake_chat.ERROR_FRAME, hold=answer.hold)
        else:
            await self._reply_json(answer, fake_chat.completion(request, model, turn, self._ids), turn)


async def _system_one(request: dict[str, Any], headers: dict[str, str], send: Send) -> None:
    """A System One-style decision answer (see :mod:`switchyard.testing.fake_decision`)."""
    if not headers.get("authorization", "").startswith("Bearer "):
        await send_json(send, 401, {"detail": "Missing or invalid API key"})
        return
    problems = fake_decision.request_problems(request)
    if problems:
        await send_json(send, 422, {"detail": problems})
        return
    await send_json(send, 200, fake_decision.system_one_answer(request))


def _endpoint(path: str) -> str | None:
    for suffix, kind in (
        ("/chat/completions", "chat"),
        ("/messages/count_tokens", "count_tokens"),
        ("/messages", "messages"),
        ("/responses/input_tokens", "input_tokens"),
        ("/responses", "responses"),
        ("/tokenize", "tokenize"),
        ("/systemone", "systemone"),
    ):
        if path.endswith(suffix):
            return kind
    return None
