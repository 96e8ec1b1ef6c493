"""Requests recorded from real coding agents, replayed through the codecs in milliseconds.

Every JSON file in ``tests/fixtures/agents/`` holds what one agent sent (secrets removed): the
method, path, headers and body of one request (or a list of them under ``requests``). Files
named ``synthetic-*`` were written by hand from the shapes in issue 12 until recordings existed;
the others come from the agent matrix (``tests/agents/``) unchanged.

For each request the test checks what an agent depends on, so that a decoder change that would
break Claude Code, Codex or Hermes fails here first:

* it decodes (no 400 from the router for a request the provider accepts);
* every top-level field is either modelled by the IR or kept verbatim in ``extra``;
* the caller's own format re-encodes it without loss (extras, system entries at their
  position, hosted/server tools), and both the verbatim replay and that encoding pass the fake
  provider's validation, which enforces the provider's documented rules (``docs/fakes.md``);
* the two other formats encode it into something their fake provider accepts, with every
  dropped field counted as a diagnostic, and the reasoning effort mapped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from switchyard.protocol.request import ChatRequest
from switchyard.testing import fake_anthropic, fake_responses
from switchyard.testing.fake_upstream import vllm_problem
from switchyard.wire import codec, diagnostics
from switchyard.wire.base import WireFormat
from switchyard.wire.extras import PORTABLE
from switchyard.wire.openai_chat.request import normalize_replay

AGENTS = Path(__file__).parents[1] / "fixtures" / "agents"

# Top-level fields each decoder maps into IR slots (everything else must land in ``extra``).
MODELLED: dict[WireFormat, frozenset[str]] = {
    WireFormat.ANTHROPIC_MESSAGES: frozenset(
        {
            "model",
            "messages",
            "system",
            "max_tokens",
            "stop_sequences",
            "stream",
            "temperature",
            "top_p",
            "tools",
            "tool_choice",
            "metadata",
        }
    ),
    WireFormat.OPENAI_CHAT: frozenset(
        {
            "model",
            "messages",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
            "top_p",
            "stop",
            "seed",
            "stream",
            "stream_options",
            "response_format",
            "reasoning_effort",
            "user",
            "metadata",
        }
    ),
    WireFormat.OPENAI_RESPONSES: frozenset(
        {
            "model",
            "input",
            "instructions",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "max_output_tokens",
            "temperature",
            "top_p",
            "stream",
            "stream_options",
            "reasoning",
            "user",
            "metadata",
        }
    ),
}

# Caller headers the engine forwards upstream (see switchyard.engine.core._FORWARD_HEADERS).
FORWARDED = ("anthropic-beta", "anthropic-version")


@dataclass(frozen=True)
class AgentRequest:
    """One recorded request."""

    file: str
    agent: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def format(self) -> WireFormat:
        route = self.path.partition("?")[0].rstrip("/")
        if route.endswith("/messages"):
            return WireFormat.ANTHROPIC_MESSAGES
        if route.endswith("/responses"):
            return WireFormat.OPENAI_RESPONSES
        if route.endswith("/chat/completions"):
            return WireFormat.OPENAI_CHAT
        if "input" in self.body:
            return WireFormat.OPENAI_RESPONSES
        anthropic = "system" in self.body or "thinking" in self.body or "stop_sequences" in self.body
        return WireFormat.ANTHROPIC_MESSAGES if anthropic else WireFormat.OPENAI_CHAT

    @property
    def forwarded(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k in FORWARDED}


def _entries(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [e for e in data if isinstance(e, dict)]
    if isinstance(data, dict) and isinstance(data.get("requests"), list):
        return [e for e in data["requests"] if isinstance(e, dict)]
    return [data] if isinstance(data, dict) else []


def _request(file: str, entry: dict[str, Any], agent: str) -> AgentRequest | None:
    nested = entry.get("request") if isinstance(entry.get("request"), dict) else entry
    body = nested.get("body", nested.get("json"))
    if isinstance(body, str):
        body = json.loads(body)
    if body is None and ("messages" in nested or "input" in nested):
        body = nested
    if not isinstance(body, dict) or not ("messages" in body or "input" in body):
        return None  # not an inference request (a GET probe, a recorded reply)
    headers = nested.get("headers") if isinstance(nested.get("headers"), dict) else {}
    path = str(nested.get("path") or nested.get("url") or "")
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return AgentRequest(
        file=file,
        agent=str(entry.get("agent") or agent),
        path=path,
        headers={str(k).lower(): str(v) for k, v in headers.items()},
        body=body,
    )


def load_requests() -> list[AgentRequest]:
    """Every inference request of every fixture file (a file with none is an error)."""
    found: list[AgentRequest] = []
    for file in sorted(AGENTS.glob("*.json")):
        data = json.loads(file.read_text(encoding="utf-8"))
        agent = str(data.get("agent", file.stem)) if isinstance(data, dict) else file.stem
        requests = [r for e in _entries(data) if (r := _request(file.name, e, agent)) is not None]
        assert requests, f"{file.name}: no inference request found"
        found.extend(requests)
    return found


REQUESTS = load_requests()
IDS = [f"{r.file}[{i}]" for i, r in enumerate(REQUESTS)]
# Until the matrix has recorded real agents, the hand-written fixtures stand in for them.
pytestmark = pytest.mark.skipif(not REQUESTS, reason="no agent fixtures")


@pytest.fixture(autouse=True)
def _fresh_diagnostics() -> None:
    diagnostics.reset()


def _decode(req: AgentRequest) -> ChatRequest:
    return codec(req.format).decode_request(req.body)


def _inline_system(messages: Any) -> list[int]:
    """Positions of ``system`` entries inside an Anthropic ``messages`` list."""
    return [i for i, m in enumerate(messages or []) if isinstance(m, dict) and m.get("role") == "system"]


def _validate(fmt: WireFormat, body: dict[str, Any], headers: dict[str, str]) -> None:
    """The fake provider's verdict on ``body`` (raises with the provider's message)."""
    if fmt is WireFormat.ANTHROPIC_MESSAGES:
        fake_anthropic.validate(body, headers)
    elif fmt is WireFormat.OPENAI_RESPONSES:
        fake_responses.validate(body)
    else:
        problem = vllm_problem(body)
        assert problem is None, problem


def _tool_count(fmt: WireFormat, body: dict[str, Any]) -> int:
    return len(body.get("tools") or [])


@pytest.mark.parametrize("req", REQUESTS, ids=IDS)
def test_every_field_is_modelled_or_kept(req: AgentRequest) -> None:
    request = _decode(req)
    for key, value in req.body.items():
        if key in MODELLED[req.format]:
            continue
        assert key in request.extra, f"{key!r} was neither mapped nor kept"
        assert request.extra[key] == value, f"{key!r} changed on decode"
    assert request.origin == req.format.value
    tools = req.body.get("tools") or []
    kept = request.extra.get("tools") or []
    assert len(request.tools) + len(kept) == len(tools), "a tool was lost on decode"


@pytest.mark.parametrize("req", REQUESTS, ids=IDS)
def test_decoded_meaning(req: AgentRequest) -> None:
    """The fields agents rely on mean the same in the IR."""
    request = _decode(req)
    body = req.body
    if req.format is WireFormat.ANTHROPIC_MESSAGES:
        inline = _inline_system(body.get("messages"))
        leading = 1 if body.get("system") else 0
        system = [i for i, m in enumerate(request.messages) if m.role == "system"]
        assert len(system) == leading + len(inline)
        thinking = body.get("thinking") or {}
        if thinking.get("type") in ("enabled", "adaptive"):
            assert request.reasoning is not None and request.reasoning.enabled
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None:
            assert request.reasoning is not None and request.reasoning.effort == effort
    if req.format is WireFormat.OPENAI_RESPONSES:
        effort = (body.get("reasoning") or {}).get("effort")
        if effort is not None:
            assert request.reasoning is not None and request.reasoning.effort == effort
    if req.format is WireFormat.OPENAI_CHAT:
        for msg in body.get("messages") or []:
            if msg.get("role") == "assistant" and msg.get("tool_calls") == []:
                break
        else:
            return
        assert all(m.tool_calls or m.role != "assistant" or m.text for m in request.messages)


@pytest.mark.parametrize("req", REQUESTS, ids=IDS)
def test_same_format_replay_and_encode(req: AgentRequest) -> None:
    request = _decode(req)
    fmt = req.format
    # What HttpBackend sends when it replays the caller's body verbatim.
    replay = {**req.body, "model": "upstream-model"}
    if fmt is WireFormat.OPENAI_CHAT:
        replay = normalize_replay(replay)
    _validate(fmt, replay, req.forwarded)
    # What it sends when a router rewrote the request or foreign reasoning had to go.
    out = codec(fmt).encode_request(request, model="upstream-model", stream=request.stream)
    for key, value in request.extra.items():
        if key != "tools":
            assert out.get(key) == value, f"extra field {key!r} not passed through"
    assert _tool_count(fmt, out) == _tool_count(fmt, req.body)
    if fmt is not WireFormat.OPENAI_CHAT:
        # Every key of every tool survives (Anthropic's defer_loading, hosted/namespace tools).
        sent_tools = {t.get("name") or t.get("type"): set(t) for t in out.get("tools") or []}
        for tool in req.body.get("tools") or []:
            keys = set(tool)
            if fmt is WireFormat.ANTHROPIC_MESSAGES and tool.get("type") == "custom":
                keys.discard("type")  # Anthropic's default tool type, said or not
            assert keys <= sent_tools[tool.get("name") or tool.get("type")], f"tool keys lost: {tool.get('name')}"
    if fmt is WireFormat.ANTHROPIC_MESSAGES:
        sent = [m for m in out["messages"] if m["role"] == "system"]
        assert len(sent) == len(_inline_system(req.body.get("messages")))
        if "thinking" in req.body:
            assert out.get("thinking") == req.body["thinking"]
    if fmt is WireFormat.OPENAI_CHAT:
        for msg in out["messages"]:
            assert msg.get("tool_calls") != [], "an empty tool_calls array reached a Chat upstream"
        for msg in replay["messages"]:
            assert msg.get("tool_calls") != [], "an empty tool_calls array reached a Chat upstream"
    _validate(fmt, out, req.forwarded)


@pytest.mark.parametrize("target", list(WireFormat), ids=lambda f: f"to_{f.value}")
@pytest.mark.parametrize("req", REQUESTS, ids=IDS)
def test_translated_encode(req: AgentRequest, target: WireFormat) -> None:
    if target is req.format:
        pytest.skip("same format: see test_same_format_replay_and_encode")
    request = _decode(req)
    diagnostics.reset()
    out = codec(target).encode_request(request, model="upstream-model", stream=request.stream)
    found = diagnostics.counts()
    dropped = [k for k in request.extra if k not in PORTABLE[target.value] and k != "n"]
    if dropped:
        assert f"{req.format.value}_to_{target.value}.fields_dropped" in found, "a field was dropped silently"
    if any(t.native for t in request.tools):
        assert f"{target.value}.tool_fields_dropped" in found, "tool fields were dropped silently"
    # Headers of the caller's format are not forwarded to another (HttpBackend strips them).
    headers = req.forwarded if target is WireFormat.ANTHROPIC_MESSAGES and req.format is target else {}
    _validate(target, out, headers)
    # Every system instruction still reaches the model.
    texts = [p.text for m in request.messages if m.role in ("system", "developer") for p in m.content if p.text]
    dumped = json.dumps(out, ensure_ascii=False)
    for text in texts:
        assert json.dumps(text, ensure_ascii=False)[1:-1] in dumped, "system text lost in translation"
    effort = request.reasoning.effort if request.reasoning is not None else None
    if effort is not None and effort != "none":
        if target is WireFormat.OPENAI_CHAT:
            assert out.get("reasoning_effort") == effort
        elif target is WireFormat.OPENAI_RESPONSES:
            assert out["reasoning"]["effort"] == effort
