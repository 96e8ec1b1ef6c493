"""Verification-gated answers through the proxy, with the real ``openai`` SDK (issue 27).

The simulated efficient model answers a "sloppy" request with a tool call that lacks the
arguments its schema requires; the capable (frontier) model calls the tool properly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import serve_fake
from switchyard.testing.simulated import SimulatedUpstream

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
]
SLOPPY = [{"role": "user", "content": "sloppy: use a tool to read setup.py"}]
CAREFUL = [{"role": "user", "content": "use a tool to read setup.py"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    server = serve_fake(SimulatedUpstream(latency_scale=0))
    try:
        yield server
    finally:
        server.stop()


def _config(port: int) -> dict[str, Any]:
    route = {"type": "passthrough", "target": "efficient"}
    tiers = {"efficient": "efficient", "capable": "capable"}
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "nemotron-3.5-lightning", "price": {"output_per_mtok": 0.4}},
            "capable": {"client": "local", "model": "frontier-large", "price": {"output_per_mtok": 75}},
        },
        "routes": {
            "active": {**route, "verify": {**tiers, "mode": "active"}},
            "shadow": {**route, "verify": {**tiers, "mode": "shadow"}},
            "evaluate": {**route, "verify": {**tiers, "mode": "evaluate"}},
            "staged": {
                "type": "stage_router",
                "capable": "capable",
                "efficient": "efficient",
                "verify": {"checks": ["tool_arguments"]},
            },
        },
    }


@pytest.fixture(scope="module")
def proxy(upstream: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    with recording_proxy(_config(upstream.port)) as served:
        yield served


def _ask(server: ServerThread, route: str, messages: list[dict[str, Any]]) -> Any:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        return client.chat.completions.with_raw_response.create(model=route, messages=messages, tools=TOOLS)  # type: ignore[arg-type]


@pytest.mark.parametrize("route", ["active", "staged"])
def test_a_malformed_tool_call_is_caught_and_the_capable_answer_served(proxy: Any, route: str) -> None:
    server, records = proxy
    raw = _ask(server, route, SLOPPY)
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    [call] = raw.parse().choices[0].message.tool_calls
    assert call.function.name == "read_file" and "path" in json.loads(call.function.arguments)
    verify = records[-1].details["verify"]
    assert verify["passed"] is False and verify["target"] == "efficient" and verify["served"] == "capable"
    assert verify["failed"]["check"] == "tool_arguments" and "'path'" in verify["failed"]["reason"]
    assert verify["capable"] == {"target": "capable", "passed": True}
    assert records[-1].router_cost.calls == 1  # the discarded efficient answer is routing overhead


def test_a_good_answer_is_released_unchanged(proxy: Any) -> None:
    server, records = proxy
    raw = _ask(server, "active", CAREFUL)
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    assert records[-1].details["verify"]["passed"] is True
    assert records[-1].router_cost.calls == 0


def test_active_mode_buffers_a_stream_and_streams_the_capable_answer(proxy: Any) -> None:
    server, records = proxy
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        stream = client.chat.completions.create(model="active", messages=SLOPPY, tools=TOOLS, stream=True)  # type: ignore[arg-type]
        args = "".join(
            tc.function.arguments or ""
            for chunk in stream
            for choice in chunk.choices
            for tc in choice.delta.tool_calls or []
            if tc.function is not None
        )
    assert "path" in json.loads(args)
    assert records[-1].selected == "capable" and records[-1].details["verify"]["served"] == "capable"


def test_shadow_mode_records_and_serves_the_efficient_answer(proxy: Any) -> None:
    server, records = proxy
    raw = _ask(server, "shadow", SLOPPY)
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    assert json.loads(raw.parse().choices[0].message.tool_calls[0].function.arguments) == {}
    verify = records[-1].details["verify"]
    assert verify["passed"] is False and "capable" not in verify
    assert records[-1].router_cost.calls == 0


def test_shadow_mode_checks_a_stream_at_its_end_without_buffering(proxy: Any) -> None:
    server, records = proxy
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        stream = client.chat.completions.create(model="shadow", messages=SLOPPY, tools=TOOLS, stream=True)  # type: ignore[arg-type]
        for _ in stream:
            pass
    verify = records[-1].details["verify"]
    assert verify["streamed"] is True and verify["passed"] is False
    assert records[-1].selected == "efficient"


def test_evaluate_mode_asks_the_capable_model_but_keeps_the_efficient_answer(proxy: Any) -> None:
    server, records = proxy
    raw = _ask(server, "evaluate", SLOPPY)
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    verify = records[-1].details["verify"]
    assert verify["capable"] == {"target": "capable", "passed": True} and "served" not in verify
    assert records[-1].router_cost.calls == 1 and records[-1].router_cost.cost_usd > 0
