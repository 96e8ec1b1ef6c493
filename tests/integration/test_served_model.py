"""The decision record names the model the upstream says it served, beside the router's
choice, and flags a mismatch (record and ``/metrics``); dated snapshots are no mismatch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.engine.served_model import same_model
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("chosen", "served", "same"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),
        ("claude-sonnet-4-5", "claude-sonnet-4-5@20250929", True),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022", True),
        ("nvidia/Nemotron-Lightning", "Nemotron-Lightning", True),
        ("GPT-4o", "gpt-4o", True),
        ("m", "", True),
        ("gpt-4o", "gpt-4o-mini", False),
        ("gpt-4o", "gpt-3.5-turbo", False),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-latest-x", False),
        ("claude-opus-4-8", "claude-haiku-4-5-20251001", False),
    ],
)
def test_the_aliasing_rule(chosen: str, served: str, same: bool) -> None:
    assert same_model(chosen, served) is same


def _config(port: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    return {
        "llm_clients": {
            "vllm": {"format": "openai_chat", "base_url": f"{base}/v1"},
            "claude": {"format": "anthropic_messages", "base_url": base},
            "gpt": {"format": "openai_responses", "base_url": f"{base}/v1"},
        },
        "targets": {
            "swapped-chat": {"client": "vllm", "model": "served-swapped-chat"},
            "swapped-claude": {"client": "claude", "model": "served-swapped-claude"},
            "swapped-gpt": {"client": "gpt", "model": "served-swapped-gpt"},
            "dated": {"client": "claude", "model": "served-dated"},
        },
        "routes": {
            "chat": {"type": "passthrough", "target": "swapped-chat"},
            "claude": {"type": "passthrough", "target": "swapped-claude"},
            "gpt": {"type": "passthrough", "target": "swapped-gpt"},
            "dated": {"type": "passthrough", "target": "dated"},
        },
    }


@pytest.fixture(scope="module")
def proxy(module_upstream: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    fake = module_upstream.app
    for name in ("served-swapped-chat", "served-swapped-claude", "served-swapped-gpt"):
        fake.models[name] = FakeModel(name, answers_as="default-model")
    fake.models["served-dated"] = FakeModel("served-dated", answers_as="served-dated-20250929")
    sy = Switchyard.from_config(_config(module_upstream.port))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    with ServerThread(sy) as server:
        yield server, records


def _ask(server: ServerThread, route: str, stream: bool) -> None:
    root = server.base_url.removesuffix("/v1")
    msgs = [{"role": "user", "content": "hi"}]
    with httpx.stream(
        "POST", root + "/v1/messages", json={"model": route, "max_tokens": 64, "messages": msgs, "stream": stream}
    ) as reply:
        reply.read()
        assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("route", ["chat", "claude", "gpt"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_substituted_model_is_recorded_and_flagged(
    proxy: tuple[ServerThread, list[DecisionRecord]], route: str, stream: bool
) -> None:
    server, records = proxy
    seen = len(records)
    _ask(server, route, stream)
    record = records[seen]
    assert record.selected_model == f"served-swapped-{route}"
    assert record.served_model == "default-model" and record.model_mismatch is True


def test_a_dated_snapshot_is_no_mismatch_and_metrics_count_mismatches(
    proxy: tuple[ServerThread, list[DecisionRecord]],
) -> None:
    server, records = proxy
    seen = len(records)
    _ask(server, "dated", False)
    assert records[seen].served_model == "served-dated-20250929" and records[seen].model_mismatch is False
    _ask(server, "claude", False)
    metrics = httpx.get(server.root_url + "/metrics", timeout=10).text
    line = next(m for m in metrics.splitlines() if m.startswith("switchyard_model_mismatches_total{"))
    assert 'route="claude"' in metrics and 'target="swapped-claude"' in metrics and float(line.split()[-1]) >= 1
    assert 'switchyard_model_mismatches_total{route="dated"' not in metrics
