"""An upstream that quotes the credential the proxy sent, and URLs with credentials in reports
(issue 23, hostile network): the proxy's own secrets never reach the caller, the record or a log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import orjson
import pytest
from _raw_upstream import RawUpstream, http_response

from switchyard.api import Switchyard
from switchyard.clients.backend import HttpBackend
from switchyard.engine.records import DecisionRecord

pytestmark = pytest.mark.integration

KEY = "sk-proxy-own-key-0123456789"
HEADER_SECRET = "gw-token-abcdefghijkl"
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def quoting(request: bytes) -> bytes:
    """A 401 that quotes every header it was sent, as some gateways' error pages do."""
    head = request.partition(b"\r\n\r\n")[0].decode("latin-1")
    error = {"error": {"message": f"invalid credentials in: {head}", "type": "invalid_request_error"}}
    return http_response(401, {"content-type": "application/json"}, orjson.dumps(error))


@pytest.fixture
def upstream() -> Iterator[RawUpstream]:
    with RawUpstream(quoting) as raw:
        yield raw


def config(base_url: str) -> dict[str, object]:
    return {
        "llm_clients": {
            "gw": {
                "base_url": base_url,
                "api_key_env": "SY_TEST_HOSTILE_KEY",
                "headers": {"x-gateway-token": HEADER_SECRET},
                "max_retries": 0,
            }
        },
        "targets": {"t": {"client": "gw", "model": "m"}},
        "routes": {"r": {"type": "passthrough", "target": "t"}},
    }


async def test_an_error_quoting_the_proxys_key_reaches_nobody(
    upstream: RawUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SY_TEST_HOSTILE_KEY", KEY)
    caplog.set_level(logging.INFO)
    sy = Switchyard.from_config(config(upstream.base_url))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        for stream in (False, True):
            body = orjson.dumps({**orjson.loads(BODY), "model": "r", "stream": stream})
            reply = await sy.dispatch("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
            assert reply.status == 401, reply.body
            sent = upstream.requests[-1]
            assert KEY.encode() in sent and HEADER_SECRET.encode() in sent  # the upstream did get them
            text = reply.body.decode()
            assert "invalid credentials" in text and "[redacted]" in text
            assert KEY not in text and HEADER_SECRET not in text
        for record in records:
            assert KEY not in record.to_json().decode() and HEADER_SECRET not in record.to_json().decode()
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert KEY not in logged and HEADER_SECRET not in logged
    finally:
        await sy.aclose()


async def test_probe_urls_and_errors_drop_credentials() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}")

    backend = HttpBackend(
        "b", "http://user:pa55word-in-url@vllm.test:8000/v1", api_key="sk-x", transport=httpx.MockTransport(refuse)
    )
    probe = await backend.probe_health(None, 1.0)
    assert probe.state == "down"
    assert "pa55word" not in str(probe.url) and "pa55word" not in str(probe.error)
    assert probe.url == "http://***@vllm.test:8000/health"
    await backend.aclose()
