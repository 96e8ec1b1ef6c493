"""switchyard.OpenAI / AsyncOpenAI: the real openai SDK routed in-process over a real fake upstream."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

import switchyard
from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.testing import FakeModel, Turn

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
PER_CHUNK_S = 0.04
SLOW_TEXT = "one two three four five six"


def _two_calls(body: dict[str, Any], model: FakeModel) -> Turn:
    return Turn(tool_calls=[("lookup", {"query": "cats"}), ("lookup", {"query": "dogs and more dogs"})])


@pytest.fixture(scope="module")
def dropin_config(module_upstream: Any, module_config: dict[str, Any]) -> dict[str, Any]:
    app = module_upstream.app
    app.models["fake-slow"] = FakeModel("fake-slow", per_chunk_s=PER_CHUNK_S, brain=lambda b, m: Turn(text=SLOW_TEXT))
    app.models["fake-parallel"] = FakeModel("fake-parallel", brain=_two_calls)
    app.models["fake-slow-tool"] = FakeModel(
        "fake-slow-tool",
        per_chunk_s=PER_CHUNK_S,
        brain=lambda b, m: Turn(
            tool_calls=[("lookup", {"query": "the long way round the mountain and back down to the valley"})]
        ),
    )
    config = json.loads(json.dumps(module_config))
    config["targets"]["slow"] = {"client": "local", "model": "fake-slow"}
    config["targets"]["parallel"] = {"client": "local", "model": "fake-parallel"}
    config["routes"]["slow"] = {"type": "passthrough", "target": "slow"}
    config["routes"]["parallel"] = {"type": "passthrough", "target": "parallel"}
    config["targets"]["slow-tool"] = {"client": "local", "model": "fake-slow-tool"}
    config["routes"]["slow-tool"] = {"type": "passthrough", "target": "slow-tool"}
    # The fake upstream's faults are chosen by model name.
    for fault in ("fail-400", "fail-503"):
        config["targets"][fault] = {"client": "local", "model": fault}
        config["routes"][fault] = {"type": "passthrough", "target": fault}
    return config


@pytest.fixture(scope="module")
def router(dropin_config: dict[str, Any]) -> Iterator[tuple[Switchyard, list[DecisionRecord]]]:
    sy = Switchyard.from_config(dropin_config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    yield sy, records
    sy.close()


@pytest.fixture(scope="module")
def client(router: tuple[Switchyard, list[DecisionRecord]]) -> Iterator[Any]:
    c = switchyard.OpenAI(switchyard=router[0])
    yield c
    c.close()


@pytest.fixture
async def aclient(router: tuple[Switchyard, list[DecisionRecord]]) -> AsyncIterator[Any]:
    c = switchyard.AsyncOpenAI(switchyard=router[0])
    yield c
    await c.close()
    await router[0].aclose()


def test_is_the_real_sdk_with_retries_off(client: Any, router: tuple[Switchyard, list[DecisionRecord]]) -> None:
    assert isinstance(client, openai.OpenAI)
    assert client.max_retries == 0
    assert client.switchyard is router[0]
    asynchronous = switchyard.AsyncOpenAI(switchyard=router[0], max_retries=5)
    assert isinstance(asynchronous, openai.AsyncOpenAI) and asynchronous.max_retries == 0


def test_config_path_builds_its_own_router(tmp_path: Any, dropin_config: dict[str, Any]) -> None:
    import yaml

    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(dropin_config))
    with switchyard.OpenAI(config=str(path)) as c:
        assert (
            c.chat.completions.create(model="fast", messages=[{"role": "user", "content": "yo"}])
            .choices[0]
            .message.content
            == "[fake-efficient] yo"
        )
        c.switchyard.close()
    with pytest.raises(TypeError, match="config="):
        switchyard.OpenAI()


def test_json(client: Any, router: tuple[Switchyard, list[DecisionRecord]]) -> None:
    raw = client.chat.completions.with_raw_response.create(model="fast", messages=[{"role": "user", "content": "hi"}])
    completion = raw.parse()
    assert completion.choices[0].message.content == "[fake-efficient] hi"
    assert completion.usage.prompt_tokens > 0
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    assert raw.headers["x-switchyard-route"] == "fast"
    assert raw.headers["x-switchyard-decision-source"] == "passthrough"
    assert float(raw.headers["x-switchyard-overhead-ms"]) >= 0
    record = router[1][-1]
    assert record.route == "fast" and record.inbound_format == "openai_chat" and record.cost_usd > 0


def test_streamed_parallel_tool_calls(client: Any) -> None:
    with client.chat.completions.stream(
        model="parallel", messages=[{"role": "user", "content": "find both"}], tools=TOOLS
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in kinds
    calls = final.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments) for c in calls] == [{"query": "cats"}, {"query": "dogs and more dogs"}]
    assert len({c.id for c in calls}) == 2
    assert final.choices[0].finish_reason == "tool_calls"


def test_stream_chunks_arrive_as_the_upstream_produces_them(client: Any) -> None:
    started = time.perf_counter()
    arrivals: list[tuple[float, str]] = []
    for chunk in client.chat.completions.create(
        model="slow", messages=[{"role": "user", "content": "go"}], stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append((time.perf_counter() - started, chunk.choices[0].delta.content))
    assert "".join(text for _, text in arrivals) == SLOW_TEXT
    _assert_spread([t for t, _ in arrivals])


def test_tool_call_arguments_stream_as_produced(client: Any) -> None:
    started = time.perf_counter()
    pieces: list[tuple[float, str]] = []
    for chunk in client.chat.completions.create(
        model="slow-tool", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True
    ):
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.function and call.function.arguments:
                pieces.append((time.perf_counter() - started, call.function.arguments))
    assert json.loads("".join(p for _, p in pieces)) == {
        "query": "the long way round the mountain and back down to the valley"
    }
    # The fake upstream sends the arguments in 12-character pieces, one every PER_CHUNK_S.
    _assert_spread([t for t, _ in pieces][:6])


def _assert_spread(times: list[float]) -> None:
    # Six words, one every PER_CHUNK_S upstream: buffered delivery would put them all at the end.
    assert len(times) == 6
    # The bounds leave room for a loaded machine bunching a pair of chunks now and then.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert sum(g >= PER_CHUNK_S / 2 for g in gaps) >= 3, gaps
    assert times[-1] - times[0] >= 3 * PER_CHUNK_S


def test_fallback(client: Any, router: tuple[Switchyard, list[DecisionRecord]]) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="resilient", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "[fake-capable] hi"
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    # broken: the first try and its two engine retries (max_retries defaults to 2), then capable.
    assert [(a.target, a.ok) for a in router[1][-1].attempts] == [("broken", False)] * 3 + [("capable", True)]


def test_unknown_route_is_404(client: Any) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "x"}])
    assert err.value.body["code"] == "model_not_found"


def test_upstream_errors_reach_the_sdk_once(client: Any, module_upstream: Any) -> None:
    # The SDK would retry a 503 twice by default; here the engine owns retries, so the upstream
    # sees only the engine's attempts: one for the 400 (never retried), three for the 503 (the
    # first try and the engine's two retries) — not three times as many.
    before = len(module_upstream.app.received)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="fail-400", messages=[{"role": "user", "content": "x"}])
    assert bad.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="fail-503", messages=[{"role": "user", "content": "x"}])
    assert len(module_upstream.app.received) - before == 1 + 3


def test_models_list(client: Any) -> None:
    assert {"fast", "mix", "resilient", "slow", "parallel", "fail-400"} <= {m.id for m in client.models.list()}


async def test_async_json_stream_and_fallback(aclient: Any) -> None:
    completion = await aclient.chat.completions.create(model="mix", messages=[{"role": "user", "content": "a"}])
    assert completion.choices[0].message.content in ("[fake-efficient] a", "[fake-capable] a")
    async with aclient.chat.completions.stream(
        model="fast", messages=[{"role": "user", "content": "please use a tool"}], tools=TOOLS
    ) as stream:
        final = await stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "lookup"
    fell_back = await aclient.chat.completions.create(
        model="resilient", messages=[{"role": "user", "content": "b"}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in fell_back if c.choices])
    assert text == "[fake-capable] b"


async def test_async_stream_is_incremental(aclient: Any) -> None:
    started = time.perf_counter()
    times: list[float] = []
    stream = await aclient.chat.completions.create(
        model="slow", messages=[{"role": "user", "content": "go"}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter() - started)
    _assert_spread(times)


async def test_async_unknown_route(aclient: Any) -> None:
    with pytest.raises(openai.NotFoundError):
        await aclient.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "x"}])


# -- the legacy ``httpx`` family -----------------------------------------------------------------------
# openai 3.x is built on httpx2 but still accepts an ``httpx.Client`` as ``http_client`` at run time
# (older SDK releases only know httpx); the same in-process transport exists for both families.


def test_legacy_httpx_client_with_the_sdk(router: tuple[Switchyard, list[DecisionRecord]]) -> None:
    import httpx

    from switchyard.transport import sync_transport

    http = httpx.Client(transport=sync_transport(router[0], "httpx"))
    with openai.OpenAI(base_url="http://in-process/v1", api_key="x", http_client=http, max_retries=0) as c:
        completion = c.chat.completions.create(model="fast", messages=[{"role": "user", "content": "old"}])
        assert completion.choices[0].message.content == "[fake-efficient] old"
        started = time.perf_counter()
        times = [
            time.perf_counter() - started
            for chunk in c.chat.completions.create(
                model="slow", messages=[{"role": "user", "content": "go"}], stream=True
            )
            if chunk.choices and chunk.choices[0].delta.content
        ]
        _assert_spread(times)


async def test_legacy_httpx_async_client_with_the_sdk(router: tuple[Switchyard, list[DecisionRecord]]) -> None:
    import httpx

    from switchyard.transport import async_transport

    http = httpx.AsyncClient(transport=async_transport(router[0], "httpx"))
    async with openai.AsyncOpenAI(base_url="http://in-process/v1", api_key="x", http_client=http, max_retries=0) as c:
        with pytest.raises(openai.NotFoundError):
            await c.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "x"}])
        async with c.chat.completions.stream(
            model="fast", messages=[{"role": "user", "content": "please use a tool"}], tools=TOOLS
        ) as stream:
            final = await stream.get_final_completion()
        assert final.choices[0].message.tool_calls[0].function.name == "lookup"
    await router[0].aclose()
