"""What real coding agents send, through the proxy with the real SDKs (issue 12, protocol side).

Each test reproduces one failure seen with Claude Code, Codex or Hermes Agent against
``switchyard serve`` and checks the fix end to end: SDK → proxy → fake provider (which enforces
the provider's documented rules, see ``docs/fakes.md``) → proxy → SDK.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from _proxy import recording_proxy

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel

BETA = "claude-code-20250219,mid-conversation-system-2026-04-07"


def _config(port: int) -> dict[str, Any]:
    return {
        "llm_clients": {
            "vllm": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
            "claude": {"format": "anthropic_messages", "base_url": f"http://127.0.0.1:{port}"},
            "gpt": {"format": "openai_responses", "base_url": f"http://127.0.0.1:{port}/v1"},
        },
        "targets": {
            "lightning": {"client": "vllm", "model": "fake-lightning"},
            "opus": {"client": "claude", "model": "fake-opus"},
            "codex": {"client": "gpt", "model": "fake-codex"},
            "small": {"client": "vllm", "model": "fake-small-output", "max_output_tokens": 4096},
            "windowed": {"client": "vllm", "model": "fake-windowed", "probe_context_window": True},
        },
        "routes": {
            "to-chat": {"type": "passthrough", "target": "lightning"},
            "to-anthropic": {"type": "passthrough", "target": "opus"},
            "to-responses": {"type": "passthrough", "target": "codex"},
            "upstream-named": {"type": "passthrough", "target": "lightning", "reply_model": "upstream"},
            "to-small": {"type": "passthrough", "target": "small"},
            "to-windowed": {"type": "passthrough", "target": "windowed"},
        },
    }


@pytest.fixture(scope="module")
def proxy(module_upstream: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    fake = module_upstream.app
    fake.models["fake-small-output"] = FakeModel("fake-small-output", max_output_tokens=4096)
    fake.models["fake-windowed"] = FakeModel("fake-windowed", context_window=32768, enforce_window=True)
    with recording_proxy(_config(module_upstream.port)) as served:
        yield served


@pytest.fixture(scope="module")
def oai(proxy: tuple[ServerThread, list[DecisionRecord]]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy[0].base_url, api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def claude(proxy: tuple[ServerThread, list[DecisionRecord]]) -> Iterator[anthropic.Anthropic]:
    root = proxy[0].base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as client:
        yield client


def _skills_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Write hello.txt, then cat it."},
        {"role": "system", "content": [{"type": "text", "text": "<skills>pdf, xlsx</skills>"}]},
    ]


# -- mid-conversation system messages (Claude Code default mode) -----------------------------------


def test_mid_conversation_system_passes_through_to_anthropic(claude: anthropic.Anthropic, module_upstream: Any) -> None:
    reply = claude.messages.create(
        model="to-anthropic",
        max_tokens=256,
        system="You are Claude Code.",
        messages=_skills_conversation(),  # type: ignore[arg-type]
        extra_headers={"anthropic-beta": BETA},
        extra_query={"beta": "true"},
    )
    assert reply.content[0].type == "text"
    sent = module_upstream.app.received[-1]
    assert sent.body["messages"][1] == _skills_conversation()[1]
    assert "mid-conversation-system-2026-04-07" in sent.headers["anthropic-beta"]


def test_mid_conversation_system_without_beta_is_the_providers_400(
    claude: anthropic.Anthropic, module_upstream: Any
) -> None:
    # The router forwards; the provider (here its fake) is the one to say no.
    with pytest.raises(anthropic.BadRequestError, match="role"):
        claude.messages.create(
            model="to-anthropic",
            max_tokens=256,
            messages=_skills_conversation(),  # type: ignore[arg-type]
        )
    assert module_upstream.app.received[-1].body["messages"][1]["role"] == "system"


@pytest.mark.parametrize("route", ["to-chat", "to-responses"])
def test_mid_conversation_system_is_translated(claude: anthropic.Anthropic, module_upstream: Any, route: str) -> None:
    reply = claude.messages.create(
        model=route,
        max_tokens=256,
        system="You are Claude Code.",
        messages=_skills_conversation(),  # type: ignore[arg-type]
        extra_headers={"anthropic-beta": BETA},
    )
    assert reply.content[0].type == "text"
    sent = module_upstream.app.received[-1].body
    if route == "to-chat":
        # Chat templates (vLLM) take system text only at the start: merged, in order.
        assert sent["messages"][0] == {
            "role": "system",
            "content": "You are Claude Code.\n\n<skills>pdf, xlsx</skills>",
        }
        assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    else:
        assert sent["instructions"] == "You are Claude Code."
        assert sent["input"][-1] == {"type": "message", "role": "developer", "content": "<skills>pdf, xlsx</skills>"}
    assert "anthropic-beta" not in module_upstream.app.received[-1].headers


# -- usage on a translated Chat stream (Hermes Agent) ---------------------------------------------


def test_translated_chat_stream_reports_prompt_tokens(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="to-anthropic",
        messages=[{"role": "user", "content": "a question long enough to count a few prompt tokens"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [chunk.usage for chunk in stream if chunk.usage is not None]
    assert len(usage) == 1
    assert usage[0].prompt_tokens > 0
    assert usage[0].completion_tokens > 0
    assert usage[0].total_tokens == usage[0].prompt_tokens + usage[0].completion_tokens


# -- empty tool_calls arrays (Hermes Agent) ---------------------------------------------------------


def test_empty_tool_calls_never_reach_a_chat_upstream(oai: openai.OpenAI, module_upstream: Any) -> None:
    reply = oai.chat.completions.create(
        model="to-chat",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Let me start.", "tool_calls": []},
            {"role": "user", "content": "go on"},
        ],
    )
    assert reply.choices[0].message.content
    sent = module_upstream.app.received[-1].body
    assert "tool_calls" not in sent["messages"][1]


# -- the reply's model (Claude Code keeps signed thinking only when it matches) -------------------


def test_reply_names_the_requested_model(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(
        model="to-anthropic", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().model == "to-anthropic"
    assert raw.headers["x-switchyard-selected-model"] == "opus"
    with claude.messages.stream(model="to-chat", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_message()
    assert final.model == "to-chat"


def test_route_may_name_the_upstream_model(oai: openai.OpenAI) -> None:
    assert oai.chat.completions.create(model="upstream-named", messages=[{"role": "user", "content": "hi"}]).model == (
        "fake-lightning"
    )


# -- probes: HEAD /, GET /, GET /v1/models/{id} ---------------------------------------------------


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_root_answers_200(proxy: tuple[ServerThread, list[DecisionRecord]], method: str) -> None:
    root = proxy[0].base_url.removesuffix("/v1")
    assert httpx.request(method, root + "/").status_code == 200


def test_model_lookup(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    model = oai.models.retrieve("to-chat")
    assert model.id == "to-chat"
    info = claude.models.retrieve("to-anthropic")
    assert info.id == "to-anthropic" and info.type == "model"
    with pytest.raises(openai.NotFoundError) as err:
        oai.models.retrieve("no-such-model")
    assert err.value.code == "model_not_found"
    with pytest.raises(anthropic.NotFoundError):
        claude.models.retrieve("no-such-model")


def test_model_list_in_the_callers_shape(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    # Anthropic's List Models: ModelInfo entries, first_id/last_id/has_more, limit/after_id/
    # before_id (platform.claude.com/docs/en/api/models-list); the SDK pages with after_id.
    openai_ids = [m.id for m in oai.models.list()]
    assert len(openai_ids) >= 3
    assert [m.id for m in claude.models.list(limit=1)] == openai_ids  # auto-paging, one per page
    first = claude.models.list(limit=2)
    assert [m.id for m in first.data] == openai_ids[:2] and first.has_more is True
    assert first.data[0].type == "model" and first.data[0].display_name
    before = claude.models.list(limit=1, before_id=openai_ids[2])
    assert [m.id for m in before.data] == [openai_ids[1]] and before.has_more is True
    with pytest.raises(anthropic.BadRequestError, match="limit"):
        claude.models.list(limit=0)
    with pytest.raises(anthropic.BadRequestError, match="after_id"):
        claude.models.list(after_id="no-such-model")


# -- output limits (Hermes Agent asks for 65,536-128,000 tokens) ------------------------------------


def test_cap_above_the_targets_output_limit_is_clamped(oai: openai.OpenAI, module_upstream: Any) -> None:
    reply = oai.chat.completions.create(
        model="to-small", messages=[{"role": "user", "content": "hi"}], max_tokens=128000
    )
    assert reply.choices[0].message.content
    assert module_upstream.app.received[-1].body["max_tokens"] == 4096


def test_cap_above_the_discovered_window_is_clamped(claude: anthropic.Anthropic, module_upstream: Any) -> None:
    # Translated (Anthropic → Chat): the cap travels as max_completion_tokens; the window was read
    # from the fake vLLM's /v1/models (max_model_len) at start-up.
    with claude.messages.stream(
        model="to-windowed", max_tokens=65536, messages=[{"role": "user", "content": "x " * 2000}]
    ) as stream:
        reply = stream.get_final_message()
    assert reply.content[0].type == "text"
    sent = module_upstream.app.received[-1].body["max_completion_tokens"]
    assert 16 <= sent < 32768 - 1000


# -- session identity for agents that send none (Hermes Agent, Qwen Code) -------------------------


def test_agent_without_session_identity_gets_a_derived_session(
    oai: openai.OpenAI, proxy: tuple[ServerThread, list[DecisionRecord]]
) -> None:
    opening = [{"role": "system", "content": "You are Hermes Agent."}, {"role": "user", "content": "write a file"}]
    oai.chat.completions.create(model="to-chat", messages=opening)  # type: ignore[arg-type]
    first = proxy[1][-1]
    follow_up = [*opening, {"role": "assistant", "content": "done"}, {"role": "user", "content": "now read it"}]
    oai.chat.completions.create(model="to-chat", messages=follow_up)  # type: ignore[arg-type]
    second = proxy[1][-1]
    assert first.session_source == second.session_source == "derived"
    assert first.session_id is not None and first.session_id == second.session_id
    assert second.to_dict()["session_source"] == "derived"


def test_derived_sessions_can_be_turned_off(module_upstream: Any) -> None:
    config = {**_config(module_upstream.port), "session": {"derive": False}}
    with (
        recording_proxy(config) as (server, records),
        openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0) as client,
    ):
        client.chat.completions.create(model="to-chat", messages=[{"role": "user", "content": "hi"}])
    assert records[-1].session_id is None and records[-1].session_source is None


# -- a tool turn written by another tier reaches Claude with thinking on ---------------------------


def test_tool_turn_without_thinking_is_not_replayed_with_thinking_on(
    claude: anthropic.Anthropic, module_upstream: Any
) -> None:
    # Claude Code on a staged route: the efficient tier wrote the tool call (no signed thinking),
    # the capable tier (Anthropic) gets the history with thinking on. Forwarded verbatim,
    # Anthropic would refuse it; re-encoded, thinking is off for this one call.
    reply = claude.messages.create(
        model="to-anthropic",
        max_tokens=4096,
        thinking={"type": "adaptive"},  # type: ignore[typeddict-item]
        messages=[
            {"role": "user", "content": "write hello.txt"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"path": "hello.txt"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
        ],
        tools=[{"name": "Write", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
    )
    assert reply.content
    assert "thinking" not in module_upstream.app.received[-1].body


async def test_model_lookup_with_a_default_route(module_upstream: Any) -> None:
    config = {**_config(module_upstream.port), "default_route": "to-chat"}
    sy = Switchyard.from_config(config)
    try:
        reply = await sy.dispatch("GET", "/v1/models/nvidia/some-upstream-id", b"", {})
        entry = orjson.loads(reply.body)
        assert reply.status == 200
        assert entry["id"] == "nvidia/some-upstream-id" and entry["alias_of"] == "to-chat"
        head = await sy.dispatch("HEAD", "/", b"", {})
        assert head.status == 200
    finally:
        await sy.aclose()


async def test_model_lookup_respects_an_inbound_keys_routes(module_upstream: Any) -> None:
    from switchyard.protocol.access import allowed_routes

    sy = Switchyard.from_config(_config(module_upstream.port))
    try:
        token = allowed_routes.set(frozenset({"to-chat"}))
        try:
            assert (await sy.dispatch("GET", "/v1/models/to-chat", b"", {})).status == 200
            assert (await sy.dispatch("GET", "/v1/models/to-anthropic", b"", {})).status == 404
        finally:
            allowed_routes.reset(token)
    finally:
        await sy.aclose()


async def test_a_limited_key_sees_its_routes_aliases_and_not_the_other_routes_names(module_upstream: Any) -> None:
    from switchyard.protocol.access import allowed_routes

    config = _config(module_upstream.port)
    config["routes"]["to-chat"] = {**config["routes"]["to-chat"], "aliases": ["chat-alias"]}
    sy = Switchyard.from_config(config)
    try:
        token = allowed_routes.set(frozenset({"to-chat"}))
        try:
            listed = orjson.loads((await sy.dispatch("GET", "/v1/models", b"", {})).body)
            assert sorted(m["id"] for m in listed["data"]) == ["chat-alias", "to-chat"]
            missing = await sy.dispatch("GET", "/v1/models/nope", b"", {})
            assert missing.status == 404
            assert b"to-chat" in missing.body and b"to-anthropic" not in missing.body
            body = orjson.dumps({"model": "nope", "messages": [{"role": "user", "content": "hi"}]})
            unrouted = await sy.dispatch("POST", "/v1/chat/completions", body, {})
            assert unrouted.status == 404
            assert b"to-chat" in unrouted.body and b"to-anthropic" not in unrouted.body
        finally:
            allowed_routes.reset(token)
    finally:
        await sy.aclose()
