"""Item 57: which URL a backend's health probe asks and how answers are read (httpx.MockTransport)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from switchyard.clients.backend import HttpBackend
from switchyard.clients.health import health_url, server_root

Handler = Callable[[httpx.Request], httpx.Response]


def backend(handler: Handler, fmt: str = "openai_chat", base: str = "http://vllm.test:8000/v1") -> HttpBackend:
    return HttpBackend("up", base, fmt, api_key="sk-test", transport=httpx.MockTransport(handler))


def answering(routes: dict[str, int], seen: list[str]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(routes.get(request.url.path, 404), json={})

    return handler


def test_urls() -> None:
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("https://gw.test/vllm/v1") == "https://gw.test/vllm"
    assert health_url("http://h:8000/v1", "/ready") == "http://h:8000/ready"
    assert health_url("http://h:8000/v1", "http://other:9/healthz") == "http://other:9/healthz"


async def test_vllm_health_at_the_server_root() -> None:
    seen: list[str] = []
    up = backend(answering({"/health": 200}, seen))
    probe = await up.probe_health(None, 1.0)
    assert (probe.state, probe.status, probe.url) == ("up", 200, "http://vllm.test:8000/health")
    assert probe.latency_ms is not None and seen == ["http://vllm.test:8000/health"]
    await up.aclose()


async def test_a_503_is_down() -> None:
    up = backend(answering({"/health": 503}, []))
    probe = await up.probe_health(None, 1.0)
    assert (probe.state, probe.status, probe.error) == ("down", 503, "HTTP 503")
    await up.aclose()


async def test_no_health_endpoint_falls_back_to_models_and_remembers() -> None:
    seen: list[str] = []
    up = backend(answering({"/v1/models": 200}, seen))
    assert (await up.probe_health(None, 1.0)).state == "up"
    assert (await up.probe_health(None, 1.0)).url == "http://vllm.test:8000/v1/models"
    assert seen == [
        "http://vllm.test:8000/health",
        "http://vllm.test:8000/v1/models",
        "http://vllm.test:8000/v1/models",  # /health is not asked again
    ]
    await up.aclose()


async def test_anthropic_and_responses_probe_models_with_their_auth() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": []})

    claude = HttpBackend(
        "c", "https://api.anthropic.test", "anthropic_messages", api_key="k", transport=httpx.MockTransport(handler)
    )
    assert (await claude.probe_health(None, 1.0)).url == "https://api.anthropic.test/v1/models"
    assert seen[-1].headers["x-api-key"] == "k"
    responses = backend(handler, "openai_responses", "https://api.openai.test/v1")
    assert (await responses.probe_health(None, 1.0)).url == "https://api.openai.test/v1/models"
    assert seen[-1].headers["authorization"] == "Bearer sk-test"
    await claude.aclose()
    await responses.aclose()


async def test_configured_path_is_the_only_url() -> None:
    seen: list[str] = []
    up = backend(answering({"/ready": 204}, seen))
    assert (await up.probe_health("/ready", 1.0)).state == "up"
    down = backend(answering({}, seen))
    probe = await down.probe_health("/ready", 1.0)
    assert (probe.state, probe.status) == ("down", 404)  # a configured path must exist
    assert seen == ["http://vllm.test:8000/ready", "http://vllm.test:8000/ready"]
    await up.aclose()
    await down.aclose()


@pytest.mark.parametrize(("status", "state"), [(401, "auth_error"), (403, "auth_error"), (500, "down"), (200, "up")])
async def test_status_classes(status: int, state: str) -> None:
    up = backend(lambda _: httpx.Response(status))
    assert (await up.probe_health("/health", 1.0)).state == state
    await up.aclose()


async def test_transport_failures_are_down_never_raised() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    refusing, stalling = backend(refuse), backend(slow)
    refused = await refusing.probe_health(None, 1.0)
    assert refused.state == "down" and "ConnectError" in (refused.error or "")
    timed_out = await stalling.probe_health(None, 0.5)
    assert timed_out.state == "down" and timed_out.error == "no answer within 0.5s"
    await refusing.aclose()
    await stalling.aclose()
