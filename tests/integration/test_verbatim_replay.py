"""Same-format requests are forwarded verbatim — only ``model`` replaced and the target's
``extra_body`` merged — unless a router rewrote the request or the history holds reasoning
another provider issued; then the request is re-encoded from the IR. For all three formats."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from switchyard.clients.backend import HttpBackend
from switchyard.engine.core import Engine, Route, Target
from switchyard.protocol.call import ModelCall
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.wire import reasoning

BASE = {"openai_chat": "/v1", "anthropic_messages": "", "openai_responses": "/v1"}
EXTRA = {
    "openai_chat": {"chat_template_kwargs": {"enable_thinking": False}},
    "anthropic_messages": {"metadata": {"user_id": "team-a"}},
    "openai_responses": {"safety_identifier": "team-a"},
}
PATH = {"openai_chat": "/chat/completions", "anthropic_messages": "/messages", "openai_responses": "/responses"}

# Bodies with fields the IR does not model and key orders a re-encode would change.
BODIES: dict[str, dict[str, Any]] = {
    "openai_chat": {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "model": "route",
        "top_k": 7,
        "logit_bias": {"50256": -100},
        "seed": 3,
        "user": "u1",
    },
    "anthropic_messages": {
        "model": "route",
        "max_tokens": 77,
        "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [{"role": "user", "content": "hi"}],
        "top_k": 5,
        "service_tier": "standard_only",
    },
    "openai_responses": {
        "model": "route",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "store": False,
        "truncation": "auto",
        "prompt_cache_key": "k",
        "max_output_tokens": 64,
    },
}


class NoteRouter:
    """A router that rewrites the request (adds a system note) — so replay must not happen."""

    def __init__(self, target: str, rewrite: bool) -> None:
        self.target = target
        self.rewrite = rewrite

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        if not self.rewrite:
            return Decision(candidates=(self.target,), source="test")
        changed = request.model_copy(update={"messages": [Message.of("system", "NOTE"), *request.messages]})
        return Decision(candidates=(self.target,), request=changed, source="test")


@pytest.fixture(scope="module")
def fake(module_upstream: Any) -> Any:
    return module_upstream  # conftest's plain fake upstream, one per module


@pytest.fixture
async def engine(fake: Any) -> AsyncIterator[Engine]:
    targets: dict[str, Target] = {}
    routes: dict[str, Route] = {}
    for fmt, base in BASE.items():
        backend = HttpBackend(fmt, f"http://127.0.0.1:{fake.port}{base}", fmt)
        info = TargetInfo(name=fmt, model=f"up-{fmt}", client=fmt, format=fmt, extra_body=EXTRA[fmt])
        targets[fmt] = Target(info, backend)
        for rewrite in (False, True):
            name = f"{fmt}-{'rewrite' if rewrite else 'plain'}"
            routes[name] = Route(name=name, kind="test", router=NoteRouter(fmt, rewrite), targets=(fmt,))
    eng = Engine(routes, targets)
    yield eng
    await eng.aclose()


@pytest.mark.parametrize("fmt", list(BODIES))
async def test_same_format_body_is_forwarded_verbatim(engine: Engine, fake: Any, fmt: str) -> None:
    body = {**BODIES[fmt], "model": f"{fmt}-plain"}
    reply = await engine.handle(fmt, orjson.dumps(body), {})
    assert reply.status == 200, reply.body
    sent = fake.app.bodies(path=PATH[fmt])[-1]
    expected = {**body, "model": f"up-{fmt}", **EXTRA[fmt]}
    assert sent == expected
    assert list(sent) == list(expected)  # key order too: the caller's bytes, re-serialised


@pytest.mark.parametrize("fmt", list(BODIES))
async def test_a_rewritten_request_is_re_encoded(engine: Engine, fake: Any, fmt: str) -> None:
    body = {**BODIES[fmt], "model": f"{fmt}-rewrite"}
    reply = await engine.handle(fmt, orjson.dumps(body), {})
    assert reply.status == 200, reply.body
    sent = fake.app.bodies(path=PATH[fmt])[-1]
    assert "NOTE" in orjson.dumps(sent).decode()
    assert sent["model"] == f"up-{fmt}"


async def test_foreign_reasoning_prevents_replay(engine: Engine, fake: Any) -> None:
    token = reasoning.pack(reasoning.ReasoningPart(text="vLLM thought", provider="openai_chat"))
    body = {
        "model": "anthropic_messages-plain",
        "max_tokens": 50,
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "vLLM thought", "signature": token},
                    {"type": "text", "text": "a"},
                ],
            },
            {"role": "user", "content": "next"},
        ],
    }
    reply = await engine.handle("anthropic_messages", orjson.dumps(body), {})
    assert reply.status == 200, reply.body  # the fake rejects unsigned thinking: it was stripped
    sent = fake.app.bodies(path="/messages")[-1]
    assert all(b.get("type") != "thinking" for m in sent["messages"] for b in m["content"] if isinstance(b, dict))
