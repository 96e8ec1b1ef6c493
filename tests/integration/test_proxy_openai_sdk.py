"""The real openai SDK against the proxy over a real fake upstream on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def proxy(module_config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    with recording_proxy(module_config) as served:
        yield served


@pytest.fixture(scope="module")
def client(proxy: tuple[ServerThread, list[DecisionRecord]]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy[0].base_url, api_key="test", max_retries=0) as c:
        yield c


def test_json_answer_carries_routing_headers(client: openai.OpenAI, module_upstream: Any) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="fast", messages=[{"role": "user", "content": "hello there"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "[fake-efficient] hello there"
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    assert raw.headers["x-switchyard-route"] == "fast"
    assert raw.headers["x-switchyard-decision-source"] == "passthrough"
    assert float(raw.headers["x-switchyard-overhead-ms"]) >= 0
    # The target's extra_body reached the upstream, shallow-merged into the body.
    sent = module_upstream.app.bodies("fake-efficient")[-1]
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}


def test_request_keys_win_over_extra_body(client: openai.OpenAI, module_upstream: Any) -> None:
    client.chat.completions.create(
        model="fast",
        messages=[{"role": "user", "content": "x"}],
        extra_body={"chat_template_kwargs": {"enable_thinking": True}},
    )
    assert module_upstream.app.bodies("fake-efficient")[-1]["chat_template_kwargs"] == {"enable_thinking": True}


def test_streamed_tool_call_through_proxy(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="fast",
        messages=[{"role": "user", "content": "please use a tool to find cats"}],
        tools=TOOLS,
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"query": "please use a tool to find cats"}


def test_stream_usage_only_when_asked(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(model="fast", messages=[{"role": "user", "content": "a b c"}], stream=True)
    )
    assert all(c.choices for c in chunks), "no usage chunk without stream_options.include_usage"
    chunks = list(
        client.chat.completions.create(
            model="fast",
            messages=[{"role": "user", "content": "a b c"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_fallback_on_5xx_is_recorded(client: openai.OpenAI, proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="resilient", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "[fake-capable] hi"
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    record = proxy[1][-1]
    # The default policy retries a 500 twice on the same target, then falls back.
    assert [(a.target, a.retry) for a in record.attempts] == [
        ("broken", 0),
        ("broken", 1),
        ("broken", 2),
        ("capable", 0),
    ]
    assert record.attempts[0].status == 500 and not record.attempts[0].ok
    assert record.attempts[0].error_class == "server_error"
    assert record.fallbacks_tried == 1
    assert record.cost_usd > 0


def test_streaming_fallback_before_first_byte(client: openai.OpenAI) -> None:
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model="resilient", messages=[{"role": "user", "content": "streamed"}], stream=True
        )
        if c.choices
    )
    assert text == "[fake-capable] streamed"


def test_unknown_route_is_404_in_openai_envelope(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "x"}])
    body = err.value.body
    assert isinstance(body, dict) and body["code"] == "model_not_found"
    assert "fast" in body["message"]


def test_malformed_json_is_400(proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    import httpx

    resp = httpx.post(
        f"{proxy[0].base_url}/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
        timeout=5,
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"


def test_models_lists_routes(client: openai.OpenAI) -> None:
    ids = {m.id for m in client.models.list()}
    assert ids == {"fast", "mix", "resilient"}
