"""Conformance checklist of ``wire-formats.md``, items 24-44: the Anthropic Messages endpoint.

The caller is the real ``anthropic`` SDK (and raw HTTP where the SDK hides what is checked);
the upstreams are the fake server's Chat, Messages and Responses endpoints.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import httpx
import pytest
from checklist_support import FORMATS, MODELS, Stack, brain, route, running

from switchyard.engine import core
from switchyard.protocol.messages import ToolCallPart
from switchyard.protocol.response import ChatResponse
from switchyard.testing import Turn, streams
from switchyard.wire import codec, diagnostics, reasoning
from switchyard.wire.anthropic_messages import DEFAULT_MAX_TOKENS

TOOLS = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": TOOLS[0]["input_schema"]}}]
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def messages_stream(stack: Stack, body: dict[str, Any], path: str = "/v1/messages") -> list[streams.RawEvent]:
    with stack.http.stream("POST", path, json={"max_tokens": 500, **body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        return streams.parse(resp.read())


def test_item24_beta_query_and_plain_paths_behave_the_same(stack: Stack) -> None:
    kwargs: dict[str, Any] = {
        "model": route("openai_chat"),
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}],
    }
    plain = stack.anthropic.messages.create(**kwargs)
    beta = stack.anthropic.beta.messages.create(**kwargs)  # POST /v1/messages?beta=true
    texts = [[b.text for b in m.content if b.type == "text"] for m in (plain, beta)]
    assert texts == [["[m-chat] hello"], ["[m-chat] hello"]]
    counts = {
        stack.anthropic.messages.count_tokens(model=kwargs["model"], messages=kwargs["messages"]).input_tokens,
        stack.anthropic.beta.messages.count_tokens(model=kwargs["model"], messages=kwargs["messages"]).input_tokens,
    }
    assert len(counts) == 1 and counts.pop() > 0
    raw = stack.http.post(
        "/v1/messages/count_tokens?beta=true", json={"model": kwargs["model"], "messages": kwargs["messages"]}
    )
    assert raw.status_code == 200 and raw.json()["input_tokens"] > 0


def test_item25_x_api_key_only_and_bearer_only_are_both_accepted(stack: Stack) -> None:
    kwargs: dict[str, Any] = {
        "model": route("openai_chat"),
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "x"}],
    }
    with anthropic.Anthropic(base_url=stack.proxy.root_url, api_key="key-only", max_retries=0) as keyed:
        assert keyed.messages.create(**kwargs).content
    with anthropic.Anthropic(base_url=stack.proxy.root_url, api_key=None, auth_token="tok", max_retries=0) as bearer:
        assert bearer.messages.create(**kwargs).content


def test_item26_anthropic_version_and_beta_headers_are_forwarded_unchanged(stack: Stack) -> None:
    beta = "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
    headers = {"anthropic-beta": beta, "anthropic-version": "2023-06-01"}
    stack.anthropic.messages.create(
        model=route("anthropic_messages"),
        max_tokens=50,
        messages=[{"role": "user", "content": "x"}],
        extra_headers=headers,
    )
    sent = stack.last_headers("/messages")
    assert sent["anthropic-beta"] == beta and sent["anthropic-version"] == "2023-06-01"
    assert sent["x-api-key"] == "sk-ant-test-key"  # the client's own key, not the caller's
    stack.anthropic.messages.create(
        model=route("openai_chat"), max_tokens=50, messages=[{"role": "user", "content": "x"}], extra_headers=headers
    )
    assert "anthropic-beta" not in stack.last_headers("/chat/completions")


@pytest.mark.parametrize("upstream", FORMATS)
def test_item27_every_event_name_equals_its_json_type(stack: Stack, upstream: str) -> None:
    events = messages_stream(
        stack,
        {"model": route(upstream), "messages": [{"role": "user", "content": "please use a tool"}], "tools": TOOLS},
    )
    assert events and all(e.event == e.json["type"] for e in events)


@pytest.mark.parametrize("upstream", FORMATS)
def test_item28_one_start_one_stop_paired_blocks_indexes_from_zero(stack: Stack, upstream: str) -> None:
    body = {
        "model": route(upstream),
        "messages": [{"role": "user", "content": "use tools in parallel"}],
        "tools": TOOLS,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "max_tokens": 3000,
    }
    if upstream == "openai_responses":
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    events = messages_stream(stack, body)
    streams.check_anthropic(events)
    starts = [e.json["content_block"]["type"] for e in events if e.event == "content_block_start"]
    assert starts[0] == "thinking" and starts[-2:] == ["tool_use", "tool_use"]


def test_item29_chat_text_then_tool_call_become_text_block_then_tool_use_block(stack: Stack) -> None:
    args = {"query": "cats", "limit": 3}
    with brain(stack, "openai_chat", Turn(text="Looking it up.", tool_calls=[("lookup", args)])):
        events = messages_stream(
            stack, {"model": route("openai_chat"), "messages": [{"role": "user", "content": "x"}], "tools": TOOLS}
        )
    blocks = [e.json for e in events if e.event == "content_block_start"]
    assert [(b["index"], b["content_block"]["type"]) for b in blocks] == [(0, "text"), (1, "tool_use")]
    text = "".join(e.json["delta"]["text"] for e in events if e.event == "content_block_delta" and e.json["index"] == 0)
    partial = "".join(
        e.json["delta"]["partial_json"] for e in events if e.event == "content_block_delta" and e.json["index"] == 1
    )
    assert text == "Looking it up." and json.loads(partial) == args


def test_item30_anthropic_tool_use_becomes_chat_tool_call_deltas(stack: Stack) -> None:
    with stack.http.stream(
        "POST",
        "/v1/chat/completions",
        json={
            "model": route("anthropic_messages"),
            "messages": [{"role": "user", "content": "please use a tool"}],
            "tools": CHAT_TOOLS,
            "stream": True,
        },
    ) as resp:
        events = streams.parse(resp.read())
    deltas = [tc for e in events[:-1] for c in e.json["choices"] for tc in c["delta"].get("tool_calls") or []]
    assert {d["index"] for d in deltas} == {0}
    assert deltas[0]["id"].startswith("toolu_fake") and deltas[0]["function"]["name"] == "lookup"
    assert json.loads("".join(d["function"]["arguments"] for d in deltas)) == {"query": "please use a tool"}


def test_item31_vllm_reasoning_becomes_a_thinking_block_with_a_marked_signature(stack: Stack) -> None:
    # Only for a caller that enabled thinking: Anthropic sends no thinking blocks otherwise, and
    # neither does the proxy (issue 23; the last lines below).
    ask = {"model": route("openai_chat"), "messages": [{"role": "user", "content": "x"}]}
    thinking = {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    with brain(stack, "openai_chat", Turn(text="Answer.", reasoning="Step one. Step two.")):
        events = messages_stream(stack, {**ask, **thinking})
        plain = messages_stream(stack, ask)
    starts = [e.json for e in events if e.event == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["thinking", "text"]
    assert [e.json["content_block"]["type"] for e in plain if e.event == "content_block_start"] == ["text"]
    deltas = [e.json["delta"] for e in events if e.event == "content_block_delta" and e.json["index"] == 0]
    assert "".join(d.get("thinking", "") for d in deltas) == "Step one. Step two."
    (signature,) = [d["signature"] for d in deltas if d["type"] == "signature_delta"]
    assert reasoning.is_token(signature)  # router-generated and marked as such


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("tool_calls", "tool_use"), ("length", "max_tokens"), ("stop", "end_turn"), ("content_filter", "refusal")],
)
def test_item32_message_delta_carries_mapped_stop_reason_and_output_tokens(
    stack: Stack, finish: str, expected: str
) -> None:
    calls = [("lookup", {"query": "x"})] if finish == "tool_calls" else []
    with brain(stack, "openai_chat", Turn(text="partial answer", tool_calls=calls, finish_reason=finish)):
        events = messages_stream(
            stack, {"model": route("openai_chat"), "messages": [{"role": "user", "content": "x"}], "tools": TOOLS}
        )
    (delta,) = [e.json for e in events if e.event == "message_delta"]
    assert delta["delta"]["stop_reason"] == expected
    assert delta["usage"]["output_tokens"] > 0


def test_item32_matched_stop_string_becomes_stop_sequence() -> None:
    chunk = {
        "choices": [{"message": {"role": "assistant", "content": "a"}, "finish_reason": "stop", "stop_reason": "END"}]
    }
    body = codec("anthropic_messages").encode_response(codec("openai_chat").decode_response(chunk), model="m")
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "END")


@pytest.mark.parametrize("upstream", FORMATS)
def test_item33_stream_final_message_equals_the_non_streamed_response(stack: Stack, upstream: str) -> None:
    kwargs: dict[str, Any] = {
        "model": route(upstream),
        "max_tokens": 500,
        "messages": [{"role": "user", "content": "use tools in parallel"}],
        "tools": TOOLS,
    }
    plain = stack.anthropic.messages.create(**kwargs)
    with stack.anthropic.messages.stream(**kwargs) as s:
        streamed = s.get_final_message()

    def view(m: Any) -> Any:
        blocks = [
            (b.type, getattr(b, "text", None), getattr(b, "name", None), getattr(b, "input", None)) for b in m.content
        ]
        return blocks, m.stop_reason, m.usage.input_tokens, m.usage.output_tokens

    assert view(streamed) == view(plain)


def test_item34_upstream_pings_are_harmless_and_idle_streams_get_pings() -> None:
    original = core.KEEPALIVE_S
    core.KEEPALIVE_S = 0.15
    try:
        with running() as stack:
            # The fake Anthropic upstream sends a ping after message_start; the block grammar holds.
            events = messages_stream(
                stack, {"model": route("anthropic_messages"), "messages": [{"role": "user", "content": "x"}]}
            )
            streams.check_anthropic(events)
            # 0.6 s of upstream silence mid-stream: keep-alives reach every caller format.
            body = {"model": route("openai_chat", "pause-mid"), "messages": [{"role": "user", "content": "a b c d"}]}
            events = messages_stream(stack, body)
            streams.check_anthropic(events)
            assert sum(e.event == "ping" for e in events) >= 2
            with stack.http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as resp:
                raw = resp.read()
            assert raw.count(b": keep-alive\n\n") >= 2
            streams.check_chat(streams.parse(raw), include_usage=False)
            with stack.http.stream(
                "POST", "/v1/responses", json={"model": body["model"], "input": "a b c d", "stream": True}
            ) as resp:
                raw = resp.read()
            assert raw.count(b": keep-alive\n\n") >= 2
            streams.check_responses(streams.parse(raw))
            with stack.anthropic.messages.stream(max_tokens=100, **body) as s:
                final = s.get_final_message()
                assert [b.text for b in final.content if b.type == "text"] == ["[pause-mid] a b c d"]
    finally:
        core.KEEPALIVE_S = original


@pytest.mark.parametrize("fault", ["error-mid", "reset-mid"])
@pytest.mark.parametrize("upstream", FORMATS)
def test_item35_mid_stream_failure_is_an_error_event_and_the_sdk_raises(
    stack: Stack, upstream: str, fault: str
) -> None:
    body = {"model": route(upstream, fault), "messages": [{"role": "user", "content": "one two three four"}]}
    events = messages_stream(stack, body)
    streams.check_anthropic(events)
    assert events[-1].event == "error"
    assert events[-1].json["error"]["type"] in ("overloaded_error", "api_error")
    with pytest.raises(anthropic.APIStatusError), stack.anthropic.messages.stream(max_tokens=100, **body) as s:
        for _ in s:
            pass


def test_item36_error_shapes_and_status_mapping(stack: Stack) -> None:
    def post(model: str) -> httpx.Response:
        return stack.http.post(
            "/v1/messages", json={"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
        )

    expected = {
        route("openai_chat", "fail-400"): (400, "invalid_request_error"),
        route("openai_chat", "fail-429"): (429, "rate_limit_error"),
        route("openai_chat", "fail-500"): (500, "api_error"),
        route("openai_responses", "fail-503"): (503, "api_error"),
        "no-such-route": (404, "not_found_error"),
    }
    for model, (status, kind) in expected.items():
        resp = post(model)
        assert resp.status_code == status, model
        body = resp.json()
        assert body["type"] == "error" and body["error"]["type"] == kind and body["error"]["message"]
    # A real Anthropic upstream's errors come back byte-for-byte (Claude Code matches on wording).
    for fault in ("fail-400", "fail-429", "fail-503"):
        resp = post(route("anthropic_messages", fault))
        sent = httpx.post(
            f"http://127.0.0.1:{stack.fake.port}/v1/messages",
            json={"model": fault, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        if resp.status_code < 500 and resp.status_code != 429:
            assert resp.content == sent.content
        assert resp.json()["error"]["type"] == sent.json()["error"]["type"]
    resp = stack.http.post("/v1/messages", content=b"{nope", headers={"content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"


def test_item37_default_max_tokens_and_temperature_clamp(stack: Stack) -> None:
    stack.openai.chat.completions.create(
        model=route("anthropic_messages"), messages=[{"role": "user", "content": "x"}], temperature=1.7
    )
    sent = stack.last("/messages")
    assert sent["max_tokens"] == DEFAULT_MAX_TOKENS == 16384
    assert sent["temperature"] == 1


def test_item38_tool_messages_of_one_turn_become_one_user_message_in_order(stack: Stack) -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_b", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_b", "content": "B"},
        {"role": "tool", "tool_call_id": "call_a", "content": "A"},
    ]
    stack.openai.chat.completions.create(model=route("anthropic_messages"), messages=messages, tools=CHAT_TOOLS)
    last = stack.last("/messages")["messages"][-1]
    assert last["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in last["content"]] == [
        ("tool_result", "call_b", "B"),
        ("tool_result", "call_a", "A"),
    ]


def test_item39_tool_use_ids_produced_by_translation_are_valid(stack: Stack) -> None:
    messages = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call.1:x/y", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call.1:x/y", "content": "done"},
    ]
    stack.openai.chat.completions.create(model=route("anthropic_messages"), messages=messages, tools=CHAT_TOOLS)
    sent = stack.last("/messages")["messages"]
    use, result = sent[1]["content"][0], sent[2]["content"][0]
    assert TOOL_ID.match(use["id"]) and use["id"] == result["tool_use_id"]
    odd = ChatResponse(id="r", content=[ToolCallPart(id="chatcmpl-tool-1.2:3", name="lookup")], stop_reason="tool_use")
    assert TOOL_ID.match(codec("anthropic_messages").encode_response(odd, model="m")["content"][0]["id"])
    events = messages_stream(
        stack,
        {"model": route("openai_chat"), "messages": [{"role": "user", "content": "please use a tool"}], "tools": TOOLS},
    )
    ids = [
        e.json["content_block"]["id"]
        for e in events
        if e.event == "content_block_start" and e.json["content_block"]["type"] == "tool_use"
    ]
    assert ids and all(TOOL_ID.match(i) for i in ids)


def test_item40_parallel_and_forced_tool_choice_map_both_ways(stack: Stack) -> None:
    cases = [
        ({"tool_choice": "required", "parallel_tool_calls": False}, {"type": "any", "disable_parallel_tool_use": True}),
        ({"tool_choice": {"type": "function", "function": {"name": "lookup"}}}, {"type": "tool", "name": "lookup"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
    ]
    for chat_fields, anthropic_choice in cases:
        stack.openai.chat.completions.create(
            model=route("anthropic_messages"),
            messages=[{"role": "user", "content": "x"}],
            tools=CHAT_TOOLS,
            **chat_fields,
        )
        assert stack.last("/messages")["tool_choice"] == anthropic_choice
        stack.anthropic.messages.create(
            model=route("openai_chat"),
            max_tokens=50,
            messages=[{"role": "user", "content": "x"}],
            tools=TOOLS,
            tool_choice=anthropic_choice,  # type: ignore[arg-type]
        )
        sent = stack.last("/chat/completions")
        expected_choice = chat_fields.get("tool_choice", "auto")
        assert sent["tool_choice"] == expected_choice
        assert sent.get("parallel_tool_calls") is chat_fields.get("parallel_tool_calls")


def test_item41_foreign_thinking_is_removed_and_thinking_disabled_for_the_open_loop(stack: Stack) -> None:
    """Claude-Code-like loop: a turn served by vLLM, its tool result answered by Claude."""
    diagnostics.reset()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    history: list[dict[str, Any]] = [{"role": "user", "content": "please use a tool"}]
    first = stack.anthropic.messages.create(
        model=route("openai_chat"),
        max_tokens=3000,
        thinking=thinking,
        messages=history,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert reasoning.is_token(first.content[0].signature)
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[1].id, "content": "3 cats"}]},
    ]
    # The fake Anthropic upstream rejects unsigned/foreign thinking and a tool turn that does not
    # start with thinking while thinking is on, exactly like the real API.
    second = stack.anthropic.messages.create(
        model=route("anthropic_messages"),
        max_tokens=3000,
        thinking=thinking,
        messages=history,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert second.content[-1].text == "[m-anth] tools said: 3 cats"
    sent = stack.last("/messages")
    assert "thinking" not in sent
    assert all(b["type"] != "thinking" for m in sent["messages"] for b in m["content"] if isinstance(b, dict))
    assert diagnostics.counts()["anthropic_messages.thinking_disabled_open_tool_loop"] >= 1
    # Anthropic's own thinking goes back to Anthropic byte-identical.
    third = stack.anthropic.messages.create(
        model=route("anthropic_messages"),
        max_tokens=3000,
        thinking=thinking,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "please use a tool"}],
        tools=TOOLS,
    )
    replay = [
        {"role": "user", "content": "please use a tool"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in third.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": third.content[-1].id, "content": "ok"}]},
    ]
    stack.anthropic.messages.create(
        model=route("anthropic_messages"),
        max_tokens=3000,
        thinking=thinking,
        messages=replay,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert stack.last("/messages")["messages"][1]["content"][0] == replay[1]["content"][0]
    assert stack.last("/messages")["thinking"] == thinking


def test_item42_cache_control_reaches_anthropic_and_cache_usage_reaches_the_client(stack: Stack) -> None:
    marker = {"type": "ephemeral"}
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "long system prompt", "cache_control": marker}]},
        {"role": "user", "content": [{"type": "text", "text": "question", "cache_control": marker}]},
    ]
    model = stack.upstream.model(MODELS["anthropic_messages"])
    model.cache_read_tokens, model.cache_write_tokens = 4, 2
    try:
        completion = stack.openai.chat.completions.create(model=route("anthropic_messages"), messages=messages)
        sent = stack.last("/messages")
        assert sent["system"] == [{"type": "text", "text": "long system prompt", "cache_control": marker}]
        assert sent["messages"][0]["content"][0]["cache_control"] == marker
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        assert completion.usage.prompt_tokens_details.cached_tokens == 4
        message = stack.anthropic.messages.create(
            model=route("anthropic_messages"), max_tokens=50, messages=[{"role": "user", "content": "long " * 40}]
        )
        assert (message.usage.cache_read_input_tokens, message.usage.cache_creation_input_tokens) == (4, 2)
    finally:
        model.cache_read_tokens, model.cache_write_tokens = 0, 0
    many = [{"type": "text", "text": f"part {i}", "cache_control": marker} for i in range(6)]
    stack.openai.chat.completions.create(
        model=route("anthropic_messages"),
        messages=[{"role": "user", "content": many}],  # type: ignore[misc,list-item]
    )
    assert json.dumps(stack.last("/messages")).count("cache_control") == 4


def test_item43_count_tokens_uses_the_upstream_counter_or_a_documented_estimate(stack: Stack) -> None:
    body = {"model": route("openai_chat"), "messages": [{"role": "user", "content": "count these words please"}]}
    resp = stack.http.post("/v1/messages/count_tokens", json=body)
    tokenize = stack.last("/tokenize")
    assert "messages" in tokenize and tokenize["add_generation_prompt"] is True
    direct = httpx.post(f"http://127.0.0.1:{stack.fake.port}/tokenize", json=tokenize, timeout=10).json()["count"]
    assert resp.json() == {"input_tokens": direct}
    assert resp.headers["x-switchyard-token-count"] == "upstream"
    resp = stack.http.post("/v1/messages/count_tokens", json={**body, "model": route("anthropic_messages")})
    assert resp.json()["input_tokens"] > 0 and stack.last("/messages/count_tokens")["model"] == "m-anth"
    resp = stack.http.post("/v1/messages/count_tokens", json={**body, "model": route("openai_responses")})
    assert resp.json()["input_tokens"] > 0 and stack.last("/responses/input_tokens")["model"] == "m-resp"
    resp = stack.http.post("/v1/messages/count_tokens", json={**body, "model": route("openai_chat", "fail-500")})
    assert resp.headers["x-switchyard-token-count"] == "estimate" and resp.json()["input_tokens"] > 0


def test_item44_models_list_includes_claude_ids_with_a_context_window(stack: Stack) -> None:
    data = stack.http.get("/v1/models").json()["data"]
    claude = [m for m in data if m["id"].startswith("claude")]
    assert claude and all(m["context_window"] > 0 for m in claude)
