"""What HttpBackend puts on the wire, checked with httpx.MockTransport (no network)."""

from __future__ import annotations

import json

import httpx
import pytest

from switchyard.clients.backend import HttpBackend, Timeouts
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamConnectionError, UpstreamStatusError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo

TARGET = TargetInfo(
    name="t", model="up-model", extra_body={"chat_template_kwargs": {"enable_thinking": False}, "top_k": 5}
)
REQUEST = ChatRequest(model="route", messages=[Message.of("user", "x")])
ANSWER = {"id": "c", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}


def backend(handler: object, **kwargs: object) -> HttpBackend:
    return HttpBackend(
        "up",
        "http://upstream.test/v1/",
        api_key="sk-test",
        headers={"x-team": "a"},
        timeouts=Timeouts(connect=3, read=7, total=None),
        transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


async def test_request_line_headers_body_and_timeouts() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    be = backend(handler)
    options = CallOptions(
        headers={"anthropic-beta": "b1", "x-forward-me": "yes", "Content-Length": "999", "host": "evil"}
    )
    response = await be.complete(REQUEST, TARGET, options)
    assert response.text == "hi"
    (req,) = seen
    assert req.method == "POST" and str(req.url) == "http://upstream.test/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["x-team"] == "a" and req.headers["x-forward-me"] == "yes"
    assert "anthropic-beta" not in req.headers, "Anthropic's beta flags only go to Anthropic upstreams"
    assert req.headers["host"] == "upstream.test"  # hop-by-hop caller headers are not forwarded
    assert int(req.headers["content-length"]) == len(req.content)
    assert "user-agent" in req.headers
    # Waiting for a pooled connection is bounded by connect (and the attempt's deadline), not read.
    assert req.extensions["timeout"] == {"connect": 3, "read": 7, "write": 7, "pool": 3}
    body = json.loads(req.content)
    assert body["model"] == "up-model"
    # extra_body is shallow-merged; the request's own keys would win.
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 5
    await be.aclose()


async def test_raw_body_replay_keeps_caller_fields_over_extra_body() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=ANSWER)

    raw = {"model": "route", "messages": [{"role": "user", "content": "x"}], "top_k": 1, "logit_bias": {"1": 2}}
    be = backend(handler)
    await be.complete(REQUEST, TARGET, CallOptions(raw_body=raw, raw_format="openai_chat"))
    assert seen[0] == {**raw, "model": "up-model", "chat_template_kwargs": {"enable_thinking": False}}
    await be.aclose()


@pytest.mark.parametrize(("status", "fallback_ok"), [(400, False), (401, False), (429, True), (500, True), (503, True)])
async def test_error_statuses_are_typed(status: int, fallback_ok: bool) -> None:
    be = backend(lambda request: httpx.Response(status, json={"error": {"message": "nope", "type": "x"}}))
    with pytest.raises(UpstreamStatusError) as err:
        await be.complete(REQUEST, TARGET, CallOptions())
    assert err.value.upstream_status == status and err.value.fallback_ok is fallback_ok
    assert err.value.target == "t" and err.value.message == "nope"
    await be.aclose()


async def test_transport_failures_are_connection_errors() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    be = backend(handler)
    with pytest.raises(UpstreamConnectionError, match="refused"):
        await be.complete(REQUEST, TARGET, CallOptions())
    with pytest.raises(UpstreamConnectionError):
        await be.open_stream(REQUEST, TARGET, CallOptions())
    await be.aclose()


async def test_stream_request_asks_for_usage() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        chunk = b'{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}'
        body = b"data: " + chunk + b"\n\ndata: [DONE]\n\n"
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    be = backend(handler)
    events = [e async for e in await be.open_stream(REQUEST, TARGET, CallOptions())]
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}
    assert [e.type for e in events] == ["message_start", "text_delta", "message_stop"]
    await be.aclose()


async def test_environment_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    # Requests go below the client, but still through the transport the client would pick.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    be = HttpBackend("up", "http://upstream.test/v1")
    assert be._pool is None  # answer calls stay on httpx, which honours the proxy
    client = be._client
    assert be._transport is not client._transport  # the proxy mount, not the direct transport
    await be.aclose()
