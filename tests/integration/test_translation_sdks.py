"""All nine caller-upstream pairs with the real SDKs, JSON and SSE, through the proxy.

The callers are the unmodified ``openai`` (Chat Completions and Responses) and ``anthropic``
SDKs; the upstreams are the fake server's three endpoints, each validating requests the way the
real provider does. Every pair must deliver text, tool calls (ids, names, arguments) and usage,
and a tool loop must close: the caller's tool results reach the upstream as that upstream's
tool-result shape, answering the right call ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from translation_clients import CALLERS, ask, follow_up, user

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

UPSTREAMS = {"openai_chat": "m-chat", "anthropic_messages": "m-anth", "openai_responses": "m-resp"}
ROUTES = {"openai_chat": "via-chat", "anthropic_messages": "via-anthropic", "openai_responses": "via-responses"}


def translation_config(port: int) -> dict[str, Any]:
    """Three clients (one per format) on the fake upstream, one passthrough route to each."""
    return {
        "llm_clients": {
            "chat": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
            "anthropic": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
            "responses": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
        },
        "targets": {
            "t-chat": {"client": "chat", "model": "m-chat"},
            "t-anth": {"client": "anthropic", "model": "m-anth"},
            "t-resp": {"client": "responses", "model": "m-resp"},
        },
        "routes": {
            "via-chat": {"type": "passthrough", "target": "t-chat"},
            "via-anthropic": {"type": "passthrough", "target": "t-anth"},
            "via-responses": {"type": "passthrough", "target": "t-resp"},
        },
    }


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    models = [FakeModel(name, reasoning="Let me think.", cache_read_tokens=8) for name in UPSTREAMS.values()]
    server = serve_fake(FakeUpstream(models))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def clients(fake: Any) -> Iterator[dict[str, Any]]:
    sy = Switchyard.from_config(translation_config(fake.port))
    with ServerThread(sy) as proxy:
        oc = openai.OpenAI(base_url=proxy.base_url, api_key="test", max_retries=0)
        ac = anthropic.Anthropic(base_url=proxy.root_url, api_key="test", max_retries=0)
        yield {"openai": oc, "anthropic": ac, "fake": fake.app}
        oc.close()
        ac.close()


PAIRS = [(c, u) for c in CALLERS for u in UPSTREAMS]
STOP_TEXT = {"openai_chat": "stop", "anthropic_messages": "end_turn", "openai_responses": "completed"}
STOP_TOOLS = {"openai_chat": "tool_calls", "anthropic_messages": "tool_use", "openai_responses": "completed"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("caller", "upstream"), PAIRS)
def test_text_and_usage(clients: dict[str, Any], caller: str, upstream: str, stream: bool) -> None:
    seen = ask(caller, clients, ROUTES[upstream], [user(caller, "hello there")], stream=stream)
    assert seen.text == f"[{UPSTREAMS[upstream]}] hello there"
    assert seen.calls == []
    assert seen.stop == STOP_TEXT[caller]
    assert seen.input_tokens > 0 and seen.output_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("caller", "upstream"), PAIRS)
def test_tool_loop(clients: dict[str, Any], caller: str, upstream: str, stream: bool) -> None:
    history = [user(caller, "please use tools in parallel for cats")]
    seen = ask(caller, clients, ROUTES[upstream], history, tools=True, stream=stream)
    assert [(name, args) for _, name, args in seen.calls] == [
        ("lookup", {"query": "please use tools in parallel for cats"}),
        ("lookup", {"query": "please use tools in parallel for cats #2"}),
    ]
    assert len({call_id for call_id, _, _ in seen.calls}) == 2
    assert seen.stop == STOP_TOOLS[caller]
    assert seen.input_tokens > 0 and seen.output_tokens > 0
    # Close the loop: results go back and reach the upstream as its own tool-result shape.
    history = follow_up(caller, history, seen, ["3 cats", "4 cats"])
    final = ask(caller, clients, ROUTES[upstream], history, tools=True, stream=stream)
    assert final.text == f"[{UPSTREAMS[upstream]}] tools said: 3 cats | 4 cats"
    assert final.calls == []
