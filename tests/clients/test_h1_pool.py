"""The lean HTTP/1.1 pool behind HttpBackend's answer calls (switchyard.clients.h1): what reaches
the upstream, how responses are read, and that failures look exactly like httpx's did."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import orjson
import pytest
from _waits import eventually

from switchyard.clients.backend import HttpBackend
from switchyard.clients.h1 import MAX_BUFFER, ConnectError, H1Pool, TransportError
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamConnectionError, UpstreamStatusError, UpstreamTimeoutError
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.stream import TextDelta
from switchyard.protocol.targets import TargetInfo

Answer = Callable[[bytes, bytes], bytes | None]  # (head, body) -> raw response, or None: say nothing

_JSON = orjson.dumps(
    {"id": "c", "model": "m", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
)


def json_response(body: bytes = _JSON, extra: str = "", status: str = "200 OK") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )


class Upstream(asyncio.Protocol):
    """An HTTP/1.1 server answering each request with ``answer(head, body)``; records requests."""

    answer: Answer = staticmethod(lambda head, body: json_response())
    requests: list[tuple[bytes, bytes]] = []
    connections = 0
    close_after = False
    open: list[asyncio.Transport] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        type(self).connections += 1
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        type(self).open.append(self.transport)
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end]
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            type(self).requests.append((head, body))
            raw = type(self).answer(head, body)
            if raw is not None:
                self.transport.write(raw)
            if type(self).close_after:
                self.transport.close()


@pytest.fixture
async def upstream() -> AsyncIterator[int]:
    Upstream.answer = staticmethod(lambda head, body: json_response())
    Upstream.requests = []
    Upstream.connections = 0
    Upstream.close_after = False
    Upstream.open = []
    server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for transport in Upstream.open:
            transport.close()
        await asyncio.sleep(0)


TARGET = TargetInfo(name="t", model="m")
REQUEST = ChatRequest(messages=[Message.of("user", "x")])


def backend(port: int, **kw: object) -> HttpBackend:
    be = HttpBackend("up", f"http://127.0.0.1:{port}/v1", api_key="sk-test", **kw)  # type: ignore[arg-type]
    assert be._pool is not None, "a plain http upstream uses the lean pool"
    return be


async def test_request_bytes_match_the_httpx_path(upstream: int) -> None:
    be = backend(upstream)
    options = CallOptions(headers={"anthropic-beta": "x", "x-extra": "1", "connection": "close"})
    response = await be.complete(REQUEST, TARGET, options)
    await be.aclose()
    assert response.content[0].text == "hi"  # type: ignore[union-attr]
    head, body = Upstream.requests[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    assert headers["host"] == f"127.0.0.1:{upstream}"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"
    assert headers["accept-encoding"] == "gzip, deflate"
    assert headers["user-agent"].startswith("switchyard/")  # the client that actually sends it
    assert headers["x-extra"] == "1"
    assert "anthropic-beta" not in headers  # Anthropic flags only go to Anthropic upstreams
    assert headers["connection"] == "keep-alive"  # a caller's hop-by-hop header is not forwarded
    assert int(headers["content-length"]) == len(body)
    assert orjson.loads(body)["model"] == "m"


async def test_connections_are_reused_and_a_closed_one_is_replaced(upstream: int) -> None:
    be = backend(upstream)
    for _ in range(5):
        await be.complete(REQUEST, TARGET, CallOptions())
    assert Upstream.connections == 1
    Upstream.close_after = True  # the server closes after answering
    await be.complete(REQUEST, TARGET, CallOptions())
    await eventually(lambda: not be._pool._open, what="the pool saw the server close it")
    Upstream.close_after = False
    await be.complete(REQUEST, TARGET, CallOptions())
    assert Upstream.connections == 2
    await be.aclose()


async def test_gzip_body_is_decoded(upstream: int) -> None:
    packed = gzip.compress(_JSON)
    Upstream.answer = staticmethod(lambda head, body: json_response(packed, "content-encoding: gzip\r\n"))
    be = backend(upstream)
    response = await be.complete(REQUEST, TARGET, CallOptions())
    await be.aclose()
    assert response.content[0].text == "hi"  # type: ignore[union-attr]


async def test_error_status_keeps_body_and_retry_after(upstream: int) -> None:
    err = orjson.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}})
    Upstream.answer = staticmethod(lambda head, body: json_response(err, "retry-after: 7\r\n", "429 Too Many Requests"))
    be = backend(upstream)
    with pytest.raises(UpstreamStatusError) as info:
        await be.complete(REQUEST, TARGET, CallOptions())
    await be.aclose()
    assert info.value.status == 429
    assert info.value.headers.get("retry-after") == "7"
    assert b"slow down" in info.value.body


async def test_silence_is_a_read_timeout(upstream: int) -> None:
    Upstream.answer = staticmethod(lambda head, body: None)
    be = backend(upstream)
    with pytest.raises(UpstreamTimeoutError, match="ReadTimeout"):
        await be.complete(REQUEST, TARGET, CallOptions(timeout={"read": 0.1}))
    await be.aclose()


async def test_refused_connection_is_a_connection_error() -> None:
    server = await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    be = backend(port)
    with pytest.raises(UpstreamConnectionError, match="ConnectError"):
        await be.complete(REQUEST, TARGET, CallOptions())
    await be.aclose()


async def test_disconnect_before_answering_is_a_protocol_error(upstream: int) -> None:
    Upstream.answer = staticmethod(lambda head, body: None)
    Upstream.close_after = True
    be = backend(upstream)
    with pytest.raises(UpstreamConnectionError, match="RemoteProtocolError"):
        await be.complete(REQUEST, TARGET, CallOptions())
    await be.aclose()


def _sse(texts: list[str]) -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": t}) for t in texts]
    events += [chunk({}, "stop"), b"data: [DONE]"]
    payload = b"".join(e + b"\n\n" for e in events)
    body = b"".join(
        f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in [payload[i : i + 97] for i in range(0, len(payload), 97)]
    )
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + body
        + b"0\r\n\r\n"
    )


async def test_stream_split_across_chunks_reaches_every_event(upstream: int) -> None:
    texts = [f"w{i} " for i in range(40)]
    Upstream.answer = staticmethod(lambda head, body: _sse(texts))
    be = backend(upstream)
    for _ in range(3):
        events = await be.open_stream(REQUEST.model_copy(update={"stream": True}), TARGET, CallOptions())
        got = "".join(e.text for e in [e async for e in events] if isinstance(e, TextDelta))
        assert got == "".join(texts)
    assert Upstream.connections == 1  # streams leave their connection pooled
    await be.aclose()


async def test_large_body_pauses_reading_and_arrives_whole(upstream: int) -> None:
    big = b"x" * (MAX_BUFFER * 3)
    Upstream.answer = staticmethod(lambda head, body: json_response(big))
    pool = H1Pool(f"http://127.0.0.1:{upstream}/v1/chat/completions", {"content-type": "application/json"})
    resp = await pool.post(b"{}", stream=True)
    await asyncio.sleep(0.1)  # let the socket fill the buffer past the limit
    assert resp.buffered < len(big)  # paused: at most the limit plus one socket read (≤ 256 KiB)
    assert resp.buffered <= MAX_BUFFER + 256 * 1024
    got = b"".join([c async for c in resp.aiter_bytes()])
    assert got == big
    await pool.aclose()


async def test_cancelled_request_does_not_reuse_its_connection(upstream: int) -> None:
    Upstream.answer = staticmethod(lambda head, body: None)
    pool = H1Pool(f"http://127.0.0.1:{upstream}/v1/chat/completions", {})
    task = asyncio.ensure_future(pool.post(b"{}"))
    await eventually(lambda: len(Upstream.requests) == 1, what="the request was sent")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    Upstream.answer = staticmethod(lambda head, body: json_response())
    resp = await pool.post(b"{}")
    assert resp.status_code == 200
    assert Upstream.connections == 2
    await pool.aclose()


async def test_pool_limit_makes_requests_wait(upstream: int) -> None:
    pool = H1Pool(f"http://127.0.0.1:{upstream}/v1/chat/completions", {}, max_connections=2)
    results = await asyncio.gather(*(pool.post(b"{}") for _ in range(10)))
    assert [r.status_code for r in results] == [200] * 10
    assert Upstream.connections <= 2
    await pool.aclose()


def test_injected_transport_or_opt_out_stays_on_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    mock = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    assert HttpBackend("up", "http://127.0.0.1:1/v1", transport=mock)._pool is None
    monkeypatch.setenv("SWITCHYARD_HTTP_CLIENT", "httpx")
    assert HttpBackend("up", "http://127.0.0.1:1/v1")._pool is None
    monkeypatch.delenv("SWITCHYARD_HTTP_CLIENT")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert HttpBackend("up", "http://example.test/v1")._pool is None


async def test_an_extra_response_closes_the_connection(upstream: int) -> None:
    # A server that answers one request twice: the second answer must not be taken for the
    # next request's, and the connection is not reused.
    Upstream.answer = staticmethod(lambda head, body: json_response() + json_response(b'{"second": true}'))
    pool = H1Pool(f"http://127.0.0.1:{upstream}/v1/chat/completions", {})
    first = await pool.post(b"{}")
    assert first.content == _JSON
    Upstream.answer = staticmethod(lambda head, body: json_response(b'{"third": true}'))
    second = await pool.post(b"{}")
    assert second.content == b'{"third": true}'
    assert Upstream.connections == 2
    await pool.aclose()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a certificate")
async def test_tls_upstream_verifies_its_certificate(tmp_path: Path, upstream: int) -> None:
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    make_cert = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt)]
    subprocess.run(
        [*make_cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(crt, key)
    server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        trusting = H1Pool(
            f"https://localhost:{port}/v1/chat/completions", {}, ssl_context=ssl.create_default_context(cafile=crt)
        )
        assert (await trusting.post(b"{}")).content == _JSON
        await trusting.aclose()
        default = H1Pool(f"https://localhost:{port}/v1/chat/completions", {})  # httpx's CA bundle
        with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await default.post(b"{}")
        await default.aclose()
    finally:
        server.close()


async def test_a_header_that_cannot_be_sent_fails_without_costing_a_connection(upstream: int) -> None:
    pool = H1Pool(f"http://127.0.0.1:{upstream}/v1/chat/completions", {}, max_connections=1)
    with pytest.raises(TransportError, match="x-bad"):
        await pool.post(b"{}", extra_headers={"x-bad": "1\r\nx-injected: 1"})
    with pytest.raises(UnicodeEncodeError):
        await pool.post(b"{}", extra_headers={"x-wide": "\u2603"})
    # The only connection slot is still free, and nothing was injected upstream.
    response = await pool.post(b"{}", extra_headers={"x-ok": "1"}, pool_timeout=1.0)
    assert response.status_code == 200
    assert len(Upstream.requests) == 1
    assert b"x-injected" not in Upstream.requests[0][0]
    await pool.aclose()


_MESSAGE = orjson.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
)


def _header_values(head: bytes, name: str) -> list[str]:
    lines = head.decode().split("\r\n")[1:]
    return [v.strip() for k, v in (line.split(":", 1) for line in lines) if k.lower() == name]


def _anthropic_backend(port: int) -> HttpBackend:
    be = HttpBackend("claude", f"http://127.0.0.1:{port}", "anthropic_messages", api_key="sk-ant")
    assert be._pool is not None

    async def no_httpx(*args: object, **kwargs: object) -> None:
        raise AssertionError("an answer call went through httpx instead of the lean pool")

    be._send = no_httpx  # type: ignore[method-assign]
    return be


async def test_anthropic_callers_version_and_beta_go_through_the_pool_once(upstream: int) -> None:
    # Claude Code and the Anthropic SDKs send anthropic-version on every request; the engine
    # forwards it. The caller's value replaces the backend's default, through the pool.
    Upstream.answer = staticmethod(lambda head, body: json_response(_MESSAGE))
    be = _anthropic_backend(upstream)
    options = CallOptions(headers={"Anthropic-Version": "2024-01-01", "anthropic-beta": "tools-2024"})
    for _ in range(2):
        response = await be.complete(REQUEST, TARGET, options)
        assert response.content[0].text == "hi"  # type: ignore[union-attr]
    assert be._http is None, "the httpx client was never built"
    assert Upstream.connections == 1  # both requests on one pooled connection
    for head, _ in Upstream.requests:
        assert head.startswith(b"POST /v1/messages HTTP/1.1\r\n")
        assert _header_values(head, "anthropic-version") == ["2024-01-01"]
        assert _header_values(head, "anthropic-beta") == ["tools-2024"]
        assert _header_values(head, "x-api-key") == ["sk-ant"]
    await be.aclose()


async def test_anthropic_default_version_is_sent_when_the_caller_sends_none(upstream: int) -> None:
    Upstream.answer = staticmethod(lambda head, body: json_response(_MESSAGE))
    be = _anthropic_backend(upstream)
    await be.complete(REQUEST, TARGET, CallOptions())
    await be.complete(REQUEST, TARGET, CallOptions(headers={"anthropic-beta": "b1"}))
    await be.aclose()
    assert be._http is None
    (plain, _), (beta, _) = Upstream.requests
    assert _header_values(plain, "anthropic-version") == ["2023-06-01"]
    assert _header_values(plain, "anthropic-beta") == []
    assert _header_values(beta, "anthropic-version") == ["2023-06-01"]
    assert _header_values(beta, "anthropic-beta") == ["b1"]


async def test_pool_request_headers_replace_defaults_and_fixed_headers_case_insensitively(upstream: int) -> None:
    pool = H1Pool(
        f"http://127.0.0.1:{upstream}/v1/messages",
        {"User-Agent": "switchyard/x", "accept": "*/*"},
        defaults={"Anthropic-Version": "2023-06-01"},
    )
    await pool.post(b"{}")
    await pool.post(b"{}", extra_headers={"ANTHROPIC-VERSION": "v2", "user-agent": "mine", "Host": "evil"})
    await pool.post(b"{}", extra_headers={"x-other": "1"})  # the prefix is intact afterwards
    await pool.aclose()
    first, second, third = (head for head, _ in Upstream.requests)
    assert _header_values(first, "anthropic-version") == ["2023-06-01"]
    assert _header_values(second, "anthropic-version") == ["v2"]
    assert _header_values(second, "user-agent") == ["mine"]
    assert _header_values(second, "accept") == ["*/*"]
    assert _header_values(second, "host") == [f"127.0.0.1:{upstream}"]  # the pool's own, kept
    assert _header_values(third, "user-agent") == ["switchyard/x"]
    assert _header_values(third, "anthropic-version") == ["2023-06-01"]
    assert _header_values(third, "x-other") == ["1"]
