"""``format: litellm`` through the proxy: LiteLLM pointed at the local fake upstream as an
OpenAI-compatible provider, behind the same IR, fallback, retries and accounting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytest.importorskip("litellm", reason="the litellm extra is not installed")
pytestmark = pytest.mark.integration

MESSAGES: Any = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ServerThread, list[DecisionRecord], Any]]:
    fake = serve_fake(FakeUpstream())
    base = f"http://127.0.0.1:{fake.port}/v1"
    lite = {
        "format": "litellm",
        "base_url": base,
        "api_key_env": "SWITCHYARD_TEST_LITELLM_KEY",
        "timeout": {"connect": 1, "read": 2, "total": 5},
        "max_retries": 1,
        "retry": {"initial_delay_s": 0.02, "max_delay_s": 0.05, "jitter": 0},
        "circuit_breaker": {"failures": 0},
    }
    config = {
        "llm_clients": {"lite": lite, "direct": {"base_url": base}},
        "targets": {
            "lite": {
                "client": "lite",
                "model": "openai/fake-capable",
                "price": {"input_per_mtok": 1000, "output_per_mtok": 2000},
            },
            "lite_down": {"client": "lite", "model": "openai/fail-500"},
            "lite_auth": {"client": "lite", "model": "openai/fail-401"},
            "lite_overflow": {"client": "lite", "model": "openai/overflow-400", "context_window": 4096},
            "lite_reset": {"client": "lite", "model": "openai/reset-mid"},
            "backup": {"client": "direct", "model": "fake-backup", "context_window": 131072},
        },
        "routes": {
            "lite": {"type": "passthrough", "target": "lite"},
            "down": {"type": "passthrough", "target": "lite_down", "fallbacks": ["backup"]},
            "auth": {"type": "passthrough", "target": "lite_auth", "fallbacks": ["backup"]},
            "overflow": {"type": "passthrough", "target": "lite_overflow", "fallbacks": ["backup"]},
            "reset": {"type": "passthrough", "target": "lite_reset"},
        },
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SWITCHYARD_TEST_LITELLM_KEY", "sk-local")
        sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as proxy:
            yield proxy, records, fake.app
    finally:
        sy.close()
        fake.stop()


def sdk(served: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=served[0].base_url, api_key="k", max_retries=0, timeout=30)


def test_json_answer_and_accounting(served: Any) -> None:
    with sdk(served) as client:
        done = client.chat.completions.create(model="lite", messages=MESSAGES)
    assert done.choices[0].message.content == "[fake-capable] hello there"
    record = served[1][-1]
    assert record.selected == "lite" and record.input_tokens > 0 and record.output_tokens > 0
    assert record.cost_usd == pytest.approx((record.input_tokens * 1000 + record.output_tokens * 2000) / 1e6)
    sent = served[2].bodies("fake-capable")[-1]
    assert sent["messages"] == MESSAGES


def test_stream(served: Any) -> None:
    with sdk(served) as client:
        chunks = list(
            client.chat.completions.create(
                model="lite", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "[fake-capable] hello there"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_litellm_never_retries_on_its_own(served: Any) -> None:
    served[2].reset()
    with sdk(served) as client:
        done = client.chat.completions.create(model="down", messages=MESSAGES)
    # The reply names the requested route (reply_model: requested); the record names the target.
    assert done.model == "down"
    assert served[1][-1].selected_model == "fake-backup"
    # max_retries: 1 → exactly two upstream calls; LiteLLM and the OpenAI SDK inside it add none.
    assert served[2].count("fail-500") == 2
    assert [(a.target, a.error_class) for a in served[1][-1].attempts] == [
        ("lite_down", "server_error"),
        ("lite_down", "server_error"),
        ("backup", None),
    ]


def test_auth_error_is_not_a_fallback(served: Any) -> None:
    with sdk(served) as client, pytest.raises(openai.AuthenticationError) as err:
        client.chat.completions.create(model="auth", messages=MESSAGES)
    assert "invalid api key" in err.value.message


def test_context_overflow_falls_back_to_a_larger_window(served: Any) -> None:
    with sdk(served) as client:
        done = client.chat.completions.create(model="overflow", messages=MESSAGES)
    assert done.model == "overflow"
    assert served[1][-1].selected_model == "fake-backup"
    assert served[1][-1].attempts[0].error_class == "context_overflow"


def test_mid_stream_failure_ends_with_an_error_event(served: Any) -> None:
    text = ""
    with sdk(served) as client, pytest.raises(openai.APIError):
        for chunk in client.chat.completions.create(model="reset", messages=MESSAGES, stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
    assert text and text != "[reset-mid] hello there"
