"""Reasoning reaches each caller in the form its API's clients render (issue 23): Responses
callers get a ``reasoning`` item with ``summary`` parts from Claude's thinking and vLLM's
reasoning; Anthropic callers that did not enable thinking get no ``thinking`` blocks from a
Chat upstream's reasoning. Real SDKs through the proxy, JSON and stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel

pytestmark = pytest.mark.integration

THOUGHT = "weighing the two options"


@pytest.fixture(scope="module")
def proxy(module_upstream: Any) -> Iterator[ServerThread]:
    fake = module_upstream.app
    for name in ("view-vllm", "view-claude"):
        fake.models[name] = FakeModel(name, reasoning=THOUGHT)
    port = module_upstream.port
    config = {
        "llm_clients": {
            "vllm": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
            "claude": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
        },
        "targets": {
            "vllm": {"client": "vllm", "model": "view-vllm"},
            "claude": {"client": "claude", "model": "view-claude"},
        },
        "routes": {
            "chat": {"type": "passthrough", "target": "vllm"},
            "anthropic": {"type": "passthrough", "target": "claude"},
        },
    }
    with ServerThread(Switchyard.from_config(config)) as server:
        yield server


@pytest.mark.parametrize("route", ["chat", "anthropic"])
def test_responses_callers_get_a_reasoning_summary(proxy: ServerThread, route: str) -> None:
    with openai.OpenAI(base_url=proxy.base_url, api_key="test", max_retries=0) as client:
        reply = client.responses.create(model=route, input="pick one", reasoning={"effort": "high"})
        item = next(o for o in reply.output if o.type == "reasoning")
        assert [s.text for s in item.summary] == [THOUGHT]
        with client.responses.stream(model=route, input="pick one", reasoning={"effort": "high"}) as stream:
            deltas = [e.delta for e in stream if e.type == "response.reasoning_summary_text.delta"]
            final = stream.get_final_response()
    assert "".join(deltas) == THOUGHT
    streamed = next(o for o in final.output if o.type == "reasoning")
    assert [s.text for s in streamed.summary] == [THOUGHT]


def test_anthropic_callers_without_thinking_get_no_thinking_blocks(proxy: ServerThread) -> None:
    root = proxy.base_url.removesuffix("/v1")
    ask: dict[str, Any] = {"model": "chat", "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}]}
    with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as client:
        plain = client.messages.create(**ask)
        assert [b.type for b in plain.content] == ["text"]
        with client.messages.stream(**ask) as stream:
            streamed = stream.get_final_message()
        assert [b.type for b in streamed.content] == ["text"]
        thinking = {"type": "enabled", "budget_tokens": 1024}
        asked = client.messages.create(**ask, thinking=thinking)
        assert [b.type for b in asked.content] == ["thinking", "text"]
        with client.messages.stream(**ask, thinking=thinking) as stream:
            asked_stream = stream.get_final_message()
        assert [b.type for b in asked_stream.content] == ["thinking", "text"]
