"""Pieces the fake upstream's three wire formats share: turns, models, brains, ASGI helpers.

The fake upstream deliberately does not use ``switchyard.wire``: it is an independent
implementation of what real providers send and accept, so a translation bug cannot cancel out
between the codec under test and the server it talks to.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import field
from typing import Any

import orjson

from switchyard._dataclass import dataclass

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def http_body(
    scope: Scope, receive: Receive, send: Send, on_shutdown: Callable[[], None] | None = None
) -> bytes | None:
    """The request body of an HTTP call to a fake's ASGI app, read whole; ``None`` for what is
    not one: the lifespan protocol is answered here (``on_shutdown`` runs before its shutdown
    completes) and any other scope type ignored."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if on_shutdown is not None:
                    on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return None
    if scope["type"] != "http":
        return None
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


FAULTS = {
    "fail-500": "answer 500 with an error body in the endpoint's format",
    "fail-502-html": "answer 502 with an HTML body",
    "fail-503": "answer 503 (Anthropic endpoint: 529 overloaded_error)",
    "fail-NNN": "answer status NNN with an error body (e.g. fail-408, fail-504; fail-NNN-html: an HTML page)",
    "fail-429": "answer 429 with Retry-After: FakeUpstream.retry_after (x-fake-retry-after overrides)",
    "fail-429-long": "answer 429 with Retry-After: 3600",
    "fail-429-reset": "answer 429 with OpenAI x-ratelimit-* headers (requests exhausted) and no Retry-After",
    "fail-401": "answer 401",
    "fail-403": "answer 403",
    "fail-400": "answer 400 (a plain bad request)",
    "overflow-400": "answer 400 context_length_exceeded in the endpoint's wording",
    "flaky-N": "answer 503 to the first N requests for this model, then normally (flaky-N-SSS: status SSS)",
    "stall-headers": "send nothing for stall_s seconds, then a 500",
    "stall-mid": "stream the first content (JSON: half the body), then go silent for stall_s seconds",
    "pause-mid": "stream the first content, pause 0.6 s, then finish normally",
    "reset-mid": "stream the first content (JSON: half the body), then drop the connection",
    "malformed-sse": "stream the first content, then a non-JSON data line (JSON: a 200 with an invalid body)",
    "error-mid": "stream the first content, then an in-band error event in the endpoint's format",
    "empty-stream": "answer 200 text/event-stream with no events (JSON: a 200 with an empty body)",
}

_FAIL_STATUS = re.compile(r"fail-(\d{3})(-html)?")
_FLAKY = re.compile(r"flaky-(\d+)(?:-(\d{3}))?")


def is_fault(name: str) -> bool:
    """Whether a model name selects a fault."""
    return name in FAULTS or bool(_FAIL_STATUS.fullmatch(name) or _FLAKY.fullmatch(name))


def fail_status(fault: str) -> tuple[int, bool] | None:
    """``fail-NNN[-html]`` as ``(status, html)``, else ``None``."""
    found = _FAIL_STATUS.fullmatch(fault)
    return None if found is None else (int(found.group(1)), bool(found.group(2)))


def flaky(fault: str) -> tuple[int, int] | None:
    """``flaky-N[-SSS]`` as ``(failures, status)``, else ``None``."""
    found = _FLAKY.fullmatch(fault)
    return None if found is None else (int(found.group(1)), int(found.group(2) or 503))


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
        tool_calls: ``(name, arguments)`` pairs; arguments as a dict for function tools, or a
            string (raw input) for free-form ``custom`` tools.
        reasoning: Reasoning text (vLLM ``reasoning``, an Anthropic ``thinking`` block when the
            request enables thinking, a Responses reasoning item when it asks for reasoning).
        finish_reason: Overrides the natural finish reason (Chat vocabulary: ``stop``,
            ``length``, ``tool_calls``, ``content_filter``).
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    reasoning: str = ""
    finish_reason: str | None = None


Brain = Callable[[dict[str, Any], "FakeModel"], Turn]
"""Decides a fake model's turn from a Chat-shaped view of the request body."""


def estimate_tokens(text: str) -> int:
    """Roughly 4 characters per token, at least 1 for non-empty text."""
    return max(1, (len(text) + 3) // 4) if text else 0


def content_text(content: Any) -> str:
    """The text of a Chat message's ``content``: a string, or the ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def prompt_text(body: dict[str, Any]) -> str:
    """All message text of a Chat-shaped request, concatenated (for token estimates)."""
    out: list[str] = []
    for msg in body.get("messages") or []:
        out.append(content_text(msg.get("content")))
        for call in msg.get("tool_calls") or []:
            out.append(str((call.get("function") or {}).get("arguments", "")))
    for tool in body.get("tools") or []:
        out.append(orjson.dumps(tool).decode())
    return "\n".join(out)


def last_user_text(body: dict[str, Any]) -> str:
    """Text of the newest user message."""
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") == "user":
            return content_text(msg.get("content"))
    return ""


def _patch(text: str, i: int) -> str:
    return f"*** Begin Patch\n*** Add File: note{i}.txt\n+{text}\n*** End Patch"


def _call_for(tool: dict[str, Any], text: str, i: int) -> tuple[str, dict[str, Any] | str]:
    if tool.get("type") == "custom":
        return str((tool.get("custom") or {}).get("name", "tool")), _patch(text, i)
    fn = tool.get("function") or {}
    props = (fn.get("parameters") or {}).get("properties") or {}
    key = "query" if "query" in props or not props else next(iter(props))
    return str(fn.get("name", "tool")), {key: text if i == 0 else f"{text} #{i + 1}"}


def echo_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """Answers with the model's name and the last user message.

    Calls tools when the user text says ``use a tool`` (the first tool) or ``use tools in
    parallel`` (the first two tools, or the first one twice), or when ``tool_choice`` forces
    one. A free-form tool gets a small patch as raw input. After tool results it reports what
    the tools said.
    """
    tools = body.get("tools") or []
    forced = body.get("tool_choice") not in (None, "auto", "none")
    user = last_user_text(body)
    lowered = user.lower()
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if tools and last.get("role") != "tool" and (forced or "use a tool" in lowered or "in parallel" in lowered):
        picked = tools[:1]
        if "in parallel" in lowered:
            picked = tools[:2] if len(tools) > 1 else [tools[0], tools[0]]
        return Turn(tool_calls=[_call_for(t, user[:40], i) for i, t in enumerate(picked)], reasoning=model.reasoning)
    if last.get("role") == "tool":
        results: list[str] = []
        for msg in reversed(messages):
            if msg.get("role") != "tool":
                break
            results.insert(0, content_text(msg.get("content")))
        return Turn(text=f"[{model.name}] tools said: {' | '.join(results)}", reasoning=model.reasoning)
    return Turn(text=f"[{model.name}] {user}".strip(), reasoning=model.reasoning)


def leaky_brain(kind: str = "reasoning") -> Brain:
    """A model served by a vLLM without its parsers: the raw markup arrives in the text.

    Args:
        kind: ``reasoning`` — the thoughts and ``</think>`` precede the answer in ``content``
            (no ``--reasoning-parser``); ``tool_call`` — the Nemotron tool-call XML is the
            ``content`` and no ``tool_calls`` are returned (no ``--tool-call-parser``).
    """
    if kind not in ("reasoning", "tool_call"):
        raise ValueError(f"kind must be 'reasoning' or 'tool_call', got {kind!r}")

    def brain(body: dict[str, Any], model: FakeModel) -> Turn:
        user = last_user_text(body)
        if kind == "tool_call":
            xml = f"<tool_call>\n<function=lookup>\n<parameter=query>\n{user}\n</parameter>\n</function>\n</tool_call>"
            return Turn(text=xml)
        return Turn(text=f"The user wrote {user!r}. A short answer will do.\n</think>\n\n[{model.name}] {user}")

    return brain


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
        cache_read_tokens: Prompt tokens reported as read from the prompt cache.
        cache_write_tokens: Prompt tokens reported as written to the prompt cache.
        paced_json: Also pace non-streamed answers by ``per_chunk_s`` per stream piece, so a
            buffered call takes as long as the stream would (latency benchmarks).
        reasoning_field: Name of the Chat reasoning field in answers: ``reasoning`` (current
            vLLM) or ``reasoning_content`` (older vLLM, DeepSeek, SGLang).
        max_output_tokens: When set, a request asking for more output tokens is rejected with
            400 in the endpoint's words (OpenAI, Anthropic and vLLM all refuse a cap above the
            model's limit).
        enforce_window: Reject a prompt plus output cap above ``context_window`` with vLLM's
            400 ("This model's maximum context length is …"), as vLLM does.
        answers_as: The ``model`` its answers name, when not ``name``: a dated snapshot
            (``name-20250929``), or a gateway that silently serves another model.
    """

    name: str
    brain: Brain = echo_brain
    first_byte_s: float = 0.0
    per_chunk_s: float = 0.0
    reasoning: str = ""
    context_window: int = 131072
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    paced_json: bool = False
    reasoning_field: str = "reasoning"
    max_output_tokens: int | None = None
    enforce_window: bool = False
    answers_as: str = ""

    @property
    def served(self) -> str:
        """The ``model`` its answers name."""
        return self.answers_as or self.name

    def json_delay(self, turn: Turn) -> float:
        """How long a non-streamed answer waits when ``paced_json`` is on."""
        if not (self.paced_json and self.per_chunk_s):
            return 0.0
        return self.per_chunk_s * (len(pieces(turn.text)) + len(pieces(turn.reasoning)) + len(turn.tool_calls))


def usage_numbers(prompt: int, turn: Turn, model: FakeModel) -> dict[str, int]:
    """Token counts of a turn: prompt (whole), completion, reasoning, cache read/write."""
    reasoning = estimate_tokens(turn.reasoning)
    calls = sum(estimate_tokens(a if isinstance(a, str) else orjson.dumps(a).decode()) + 5 for _, a in turn.tool_calls)
    read = min(model.cache_read_tokens, prompt)
    write = min(model.cache_write_tokens, prompt - read)
    return {
        "prompt": prompt,
        "completion": estimate_tokens(turn.text) + reasoning + calls,
        "reasoning": reasoning,
        "cache_read": read,
        "cache_write": write,
    }


def signature_for(text: str) -> str:
    """The signature the fake Anthropic upstream issues for a thinking block (base64-like)."""
    return "EqF" + hashlib.sha256(b"fake-thinking:" + text.encode()).hexdigest()[:40]


def encrypted_for(text: str) -> str:
    """The ``encrypted_content`` the fake Responses upstream issues for a reasoning item."""
    return "gAAAA" + hashlib.sha256(b"fake-reasoning:" + text.encode()).hexdigest()[:40]


def pieces(text: str, size: int = 0) -> list[str]:
    """Splits text into stream-sized pieces (words, or fixed-size slices when ``size``)."""
    if not text:
        return []
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)]
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


async def send_json(send: Send, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """Sends a complete JSON answer."""
    await send_raw(send, status, orjson.dumps(payload), b"application/json", extra)


async def send_raw(
    send: Send, status: int, body: bytes, content_type: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Sends a complete answer."""
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_frames(
    send: Send,
    frames: list[bytes],
    model: FakeModel,
    fault: str | None,
    error_frame: bytes,
    at: int = 2,
    hold: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Streams SSE frames, applying a mid-stream fault before frame ``at`` (after the first content).

    ``hold`` is how ``stall-mid`` stays silent: it returns ``True`` when the client went away
    (the stream then just ends); without it the stall lasts 30 s.
    """
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    for i, data in enumerate(frames):
        if i == at and fault in ("stall-mid", "pause-mid", "reset-mid", "malformed-sse", "error-mid"):
            if fault == "stall-mid":
                if hold is None:
                    await asyncio.sleep(30)
                elif await hold():
                    return
            elif fault == "pause-mid":
                await asyncio.sleep(0.6)
            elif fault == "reset-mid":
                raise ConnectionResetError("fake upstream drops the connection mid-stream")
            else:
                bad = b"data: {not json\n\n" if fault == "malformed-sse" else error_frame
                await send({"type": "http.response.body", "body": bad, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
        if i and model.per_chunk_s:
            await asyncio.sleep(model.per_chunk_s)
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def output_limit_problem(request: dict[str, Any], model: FakeModel, prompt_tokens: int) -> str | None:
    """Why a provider would refuse the request's output cap (``None`` when it accepts it)."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        asked = request.get(key)
        if not isinstance(asked, int) or isinstance(asked, bool):
            continue
        if model.max_output_tokens is not None and asked > model.max_output_tokens:
            return (
                f"{key}: {asked} > {model.max_output_tokens}, which is the maximum allowed number of output "
                f"tokens for {model.name}"
            )
        if model.enforce_window and prompt_tokens + asked > model.context_window:
            return (
                f"This model's maximum context length is {model.context_window} tokens. However, you requested "
                f"{prompt_tokens + asked} tokens ({prompt_tokens} in the messages, {asked} in the completion). "
                "Please reduce the length of the messages or completion."
            )
    return None
