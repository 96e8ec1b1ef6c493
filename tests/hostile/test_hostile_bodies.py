"""Hostile answer bodies from an upstream (issue 23): a stream request answered with a truncated
or badly chunked non-SSE body, and a gzip bomb. Each fails like any broken answer — classified,
and the next candidate answers in the caller's API shape."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from _raw_upstream import RawUpstream, http_response

from switchyard.api import Switchyard
from switchyard.clients.backend import HttpBackend
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.targets import TargetInfo
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
BOMB_BYTES = 32 * 1024 * 1024


def truncated_chunked(_: bytes) -> bytes:
    """A chunked JSON body that promises 0x400 bytes, sends 10, and hangs up."""
    head = http_response(200, {"content-type": "application/json", "transfer-encoding": "chunked"}, length=False)
    return head + b"400\r\n" + b'{"id":"chat'


def bad_chunk_size(_: bytes) -> bytes:
    """A chunk-size line that is no hex number."""
    head = http_response(200, {"content-type": "application/json", "transfer-encoding": "chunked"}, length=False)
    return head + b"zz\r\n" + orjson.dumps(ANSWER) + b"\r\n0\r\n\r\n"


def gzip_bomb(_: bytes) -> bytes:
    """A valid chat completion whose content is 32 MiB of one letter, gzipped to ~32 KiB."""
    big = dict(
        ANSWER, choices=[{**ANSWER["choices"][0], "message": {"role": "assistant", "content": "a" * BOMB_BYTES}}]
    )
    packed = gzip.compress(orjson.dumps(big), compresslevel=9)
    assert len(packed) < 200 * 1024
    return http_response(200, {"content-type": "application/json", "content-encoding": "gzip"}, packed)


@pytest.fixture(scope="module")
def backup() -> Iterator[Any]:
    server = serve_fake(FakeUpstream([FakeModel("backup")]))
    try:
        yield server
    finally:
        server.stop()


def config(hostile: RawUpstream, backup_port: int) -> dict[str, Any]:
    plain = {"max_retries": 0, "timeout": {"connect": 2, "read": 5, "total": 10}}
    return {
        "llm_clients": {
            "hostile": {"base_url": hostile.base_url, **plain},
            "fake": {"base_url": f"http://127.0.0.1:{backup_port}/v1", **plain},
        },
        "targets": {"primary": {"client": "hostile", "model": "m"}, "backup": {"client": "fake", "model": "backup"}},
        "routes": {"r": {"type": "passthrough", "target": "primary", "fallbacks": ["backup"]}},
    }


async def ask(
    respond: Any, backup: Any, *, stream: bool, path: str = "/v1/chat/completions"
) -> tuple[Any, list[DecisionRecord]]:
    with RawUpstream(respond) as hostile:
        sy = Switchyard.from_config(config(hostile, backup.port))
        records: list[DecisionRecord] = []
        sy.on_decision(records.append)
        try:
            if path == "/v1/messages":
                body: dict[str, Any] = {"model": "r", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
            else:
                body = {"model": "r", "messages": [{"role": "user", "content": "hi"}]}
            reply = await sy.dispatch(
                "POST", path, orjson.dumps({**body, "stream": stream}), {"content-type": "application/json"}
            )
            payload = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
        finally:
            await sy.aclose()
    return (reply.status, payload), records


@pytest.mark.parametrize("respond", [truncated_chunked, bad_chunk_size], ids=["truncated", "bad-chunk-size"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_a_broken_non_sse_answer_to_a_stream_falls_back(respond: Any, path: str, backup: Any) -> None:
    (status, payload), records = await ask(respond, backup, stream=True, path=path)
    assert status == 200, payload
    assert b"internal error" not in payload
    # The caller's own stream shape, from the backup.
    assert (b"message_start" in payload) if path == "/v1/messages" else (b"chat.completion.chunk" in payload)
    record = records[-1]
    assert record.selected == "backup"
    first = record.attempts[0]
    assert first.target == "primary" and not first.ok
    assert first.error_class in ("connection", "protocol")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_gzip_bomb_is_capped_classified_and_falls_back(stream: bool, backup: Any) -> None:
    (status, payload), records = await ask(gzip_bomb, backup, stream=stream)
    assert status == 200
    assert len(payload) < 1024 * 1024  # the 32 MiB answer was never relayed
    record = records[-1]
    assert record.selected == "backup"
    first = record.attempts[0]
    assert first.target == "primary" and first.error_class == "protocol"
    assert "max_response_bytes" in (first.error or "")


async def test_the_httpx_path_caps_a_bomb_too() -> None:

    raw = gzip_bomb(b"")
    packed = raw.partition(b"\r\n\r\n")[2]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "application/json", "content-encoding": "gzip"}, content=packed
        )

    backend = HttpBackend("b", "http://bomb.test/v1", transport=httpx.MockTransport(handler))
    request = ChatRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    )
    with pytest.raises(UpstreamProtocolError, match="max_response_bytes"):
        await backend.complete(request, TargetInfo(name="t", model="m"), CallOptions())
    await backend.aclose()
