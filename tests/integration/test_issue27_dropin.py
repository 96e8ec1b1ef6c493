"""Target restrictions and verification through the drop-in SDK clients (in-process, no server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import switchyard
from switchyard.testing import serve_fake
from switchyard.testing.simulated import SimulatedUpstream

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    server = serve_fake(SimulatedUpstream(latency_scale=0))
    try:
        yield server
    finally:
        server.stop()


def _config(port: int) -> dict[str, Any]:
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "nemotron-3.5-lightning", "labels": ["onprem"]},
            "capable": {"client": "local", "model": "frontier-large", "labels": ["cloud"]},
        },
        "routes": {
            "agent": {
                "type": "stage_router",
                "capable": "capable",
                "efficient": "efficient",
                "picker": "capable_first",
                "confidence_threshold": 0.5,
                "verify": {"checks": ["tool_arguments"]},
            },
            "cloud_only": {"type": "passthrough", "target": "capable"},
        },
    }


def test_the_openai_dropin_honours_the_header(upstream: Any) -> None:
    config = _config(upstream.port)
    with switchyard.OpenAI(config=config, default_headers={"x-switchyard-require": "onprem"}) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="agent", messages=[{"role": "user", "content": "hello"}]
        )
        assert raw.headers["x-switchyard-selected-model"] == "efficient"  # capable-first, but capable is cloud
        with pytest.raises(openai.PermissionDeniedError) as err:
            client.chat.completions.create(model="cloud_only", messages=[{"role": "user", "content": "hello"}])
    assert "no target of route 'cloud_only'" in str(err.value)


def test_the_anthropic_dropin_gets_its_own_error_shape(upstream: Any) -> None:
    config = _config(upstream.port)
    with (
        switchyard.Anthropic(config=config, default_headers={"x-switchyard-require": "onprem"}) as client,
        pytest.raises(anthropic.PermissionDeniedError) as err,
    ):
        client.messages.create(model="cloud_only", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["error"]["type"] == "permission_error"  # type: ignore[index]


def test_the_openai_dropin_gets_the_verified_answer(upstream: Any) -> None:
    config = _config(upstream.port)
    config["routes"]["agent"]["picker"] = "efficient_first"
    with switchyard.OpenAI(config=config) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="agent",
            messages=[{"role": "user", "content": "sloppy: use a tool to read setup.py"}],
            tools=TOOLS,  # type: ignore[arg-type]
        )
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    [call] = raw.parse().choices[0].message.tool_calls or []
    assert "path" in json.loads(call.function.arguments)  # type: ignore[union-attr]
