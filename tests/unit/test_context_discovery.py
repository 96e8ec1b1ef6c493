"""Reading the served context window: the model-list client and the start-up discovery."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from switchyard.clients.models import ModelListError, fetch_models, served_window
from switchyard.config import load_config
from switchyard.config.discovery import probe_context_windows
from switchyard.config.schema import LlmClientConfig


def test_fetch_models_sends_auth_and_reads_data() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"object": "list", "data": [{"id": "m", "max_model_len": 4096}, "junk"]})

    entries = fetch_models("http://up/v1/", api_key="k", headers={"x-a": "1"}, transport=httpx.MockTransport(handler))
    assert entries == [{"id": "m", "max_model_len": 4096}]
    assert str(seen[0].url) == "http://up/v1/models"
    assert seen[0].headers["authorization"] == "Bearer k"
    assert seen[0].headers["x-a"] == "1"


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (httpx.Response(500, json={"error": {}}), "HTTP 500"),
        (httpx.Response(200, content=b"<html>"), "did not answer JSON"),
        (httpx.Response(200, json={"models": []}), "did not answer a model list"),
    ],
)
def test_fetch_models_errors(response: httpx.Response, text: str) -> None:
    with pytest.raises(ModelListError, match=text):
        fetch_models("http://up/v1", transport=httpx.MockTransport(lambda request: response))


def test_fetch_models_transport_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ModelListError, match="ConnectError"):
        fetch_models("http://up/v1", transport=httpx.MockTransport(handler))


def test_served_window_matches_id_then_root() -> None:
    entries = [
        {"id": "nemotron-3.5-lightning", "root": "nvidia/ckpt", "max_model_len": 65536},
        {"id": "other", "max_model_len": True},
    ]
    assert served_window(entries, "nemotron-3.5-lightning") == 65536
    assert served_window(entries, "nvidia/ckpt") == 65536
    assert served_window(entries, "other") is None  # a boolean is not a window
    assert served_window(entries, "missing") is None


def _config() -> dict[str, Any]:
    return {
        "llm_clients": {
            "a": {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "A_KEY"},
            "anth": {"format": "anthropic_messages", "base_url": "https://api.anthropic.com"},
        },
        "targets": {
            "one": {"client": "a", "preset": "nemotron-3.5-lightning", "price": {}},
            "two": {"client": "a", "model": "ckpt-root", "probe_context_window": True},
            "pinned": {"client": "a", "preset": "nemotron-3.5-lightning", "price": {}, "context_window": 1000},
            "absent": {"client": "a", "model": "not-served", "probe_context_window": True},
            "plain": {"client": "a", "model": "x"},
            "claude": {"client": "anth", "model": "c", "probe_context_window": True},
        },
    }


def test_discovery_probes_once_per_client_and_logs_misses(caplog: pytest.LogCaptureFixture) -> None:
    loaded = load_config(_config(), env={"A_KEY": "secret"})
    calls: list[tuple[str, str | None, float]] = []

    def fetch(cfg: LlmClientConfig, key: str | None, timeout_s: float) -> list[dict[str, Any]]:
        calls.append((cfg.base_url, key, timeout_s))
        return [
            {"id": "nemotron-3.5-lightning", "max_model_len": 262144},
            {"id": "served", "root": "ckpt-root", "max_model_len": 8192},
        ]

    with caplog.at_level(logging.WARNING, logger="switchyard.config"):
        found = probe_context_windows(loaded, env={"A_KEY": "secret"}, timeout_s=0.5, fetch=fetch)
    assert found == {"one": 262144, "two": 8192}
    assert calls == [("http://127.0.0.1:8000/v1", "secret", 0.5)]
    assert loaded.served_context_windows == found
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "targets.absent" in messages and "served: nemotron-3.5-lightning, served" in messages
    assert "targets.claude" in messages and "OpenAI-compatible" in messages
    assert "targets.plain" not in messages and "targets.pinned" not in messages
    # Idempotent: known windows are not asked for again.
    assert probe_context_windows(loaded, env={"A_KEY": "secret"}, fetch=fetch) == {}
    assert len(calls) == 2  # only `absent` was retried


def test_discovery_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    loaded = load_config(_config(), env={"A_KEY": "secret"})

    def fetch(cfg: LlmClientConfig, key: str | None, timeout_s: float) -> list[dict[str, Any]]:
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="switchyard.config"):
        assert probe_context_windows(loaded, env={}, fetch=fetch) == {}
    assert "could not read the served context window (boom)" in caplog.text
