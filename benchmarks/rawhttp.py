"""A lean HTTP/1.1 upstream and load client for the benchmarks (asyncio, keep-alive, no framework).

Both sides are deliberately minimal so that what the benchmark measures is the proxy: the
upstream answers from canned bytes without parsing JSON, and the client writes pre-built
request bytes and reads responses with as little work as HTTP/1.1 allows.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

# -- canned upstream answers -----------------------------------------------------------------------

_TEXT = "Here is the plan: read the failing test, find the off-by-one in the loop bound, fix it, rerun. " * 3


def completion_body() -> bytes:
    """A chat.completion with ~300 characters of text and usage."""
    return orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _TEXT},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 75, "total_tokens": 1575},
        }
    )


def sse_events(n: int) -> list[bytes]:
    """A streamed answer: role chunk, ``n`` content chunks, finish, usage, ``[DONE]``."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return b"data: " + orjson.dumps(body) + b"\n\n"

    words = _TEXT.split(" ")
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": words[i % len(words)] + " "}) for i in range(n)]
    events.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 1500, "completion_tokens": n, "total_tokens": 1500 + n}
    events.append(
        b"data: "
        + orjson.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "bench",
                "choices": [],
                "usage": usage,
            }
        )
        + b"\n\n"
    )
    events.append(b"data: [DONE]\n\n")
    return events


def anthropic_message_body() -> bytes:
    """An Anthropic Messages answer with the same text and usage as :func:`completion_body`."""
    return orjson.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "bench",
            "content": [{"type": "text", "text": _TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1500, "output_tokens": 75},
        }
    )


def anthropic_sse_events(n: int) -> list[bytes]:
    """A streamed Anthropic answer: message_start, one text block of ``n`` deltas, message_delta
    with usage, message_stop."""

    def event(name: str, data: dict[str, object]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"

    start = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "bench", "content": []}
    start |= {"stop_reason": None, "usage": {"input_tokens": 1500, "output_tokens": 1}}
    words = _TEXT.split(" ")
    events = [event("message_start", {"message": start})]
    events.append(event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
    events += [
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": words[i % len(words)] + " "}})
        for i in range(n)
    ]
    events.append(event("content_block_stop", {"index": 0}))
    events.append(event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}))
    events.append(event("message_stop", {}))
    return events


# -- upstream server -------------------------------------------------------------------------------


class UpstreamProtocol(asyncio.Protocol):
    """Answers every POST with the canned completion, or the canned stream when the body asks
    for one (``"stream":true`` anywhere in it). Keep-alive; one request at a time per connection."""

    def __init__(self, json_response: bytes, sse_response: bytes, drip_s: float | None = None) -> None:
        self._buf = b""
        self._json = json_response
        self._sse = sse_response
        self._drip_s = drip_s
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self._buf[:end].lower()
            length = 0
            pos = head.find(b"content-length:")
            if pos >= 0:
                length = int(head[pos + 15 : head.find(b"\r\n", pos) if head.find(b"\r\n", pos) > 0 else None])
            total = end + 4 + length
            if len(self._buf) < total:
                return
            body = self._buf[end + 4 : total]
            self._buf = self._buf[total:]
            assert self._transport is not None
            streamed = b'"stream":true' in body or b'"stream": true' in body
            if streamed and self._drip_s is not None:
                self._drip(_pieces(self._sse))
            else:
                self._transport.write(self._sse if streamed else self._json)

    def _drip(self, pieces: list[bytes]) -> None:
        """Writes the stream's head with its first event, then an event every ``drip_s`` seconds
        (the last with the body's end), as a model server streams its tokens."""
        assert self._transport is not None and self._drip_s is not None
        if self._transport.is_closing():
            return
        self._transport.write(pieces[0])
        if len(pieces) > 1:
            asyncio.get_running_loop().call_later(self._drip_s, self._drip, pieces[1:])


def _pieces(sse_response: bytes) -> list[bytes]:
    """``sse_response`` (see :func:`upstream_responses`) cut after the head's first chunk, then
    after each chunk; the last piece ends with the chunked body's end."""
    cuts, pos = [], sse_response.find(b"\r\n\r\n") + 4
    while True:
        size_end = sse_response.find(b"\r\n", pos)
        size = int(sse_response[pos:size_end], 16)
        if size == 0:
            break
        pos = size_end + 2 + size + 2
        cuts.append(pos)
    cuts[-1] = len(sse_response)
    return [sse_response[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]


def upstream_responses(sse_n: int, api: str = "openai") -> tuple[bytes, bytes]:
    """The raw HTTP responses: JSON (content-length) and SSE (chunked, one chunk per event), as
    an OpenAI Chat Completions upstream answers (``api="openai"``) or an Anthropic one."""
    anthropic = api == "anthropic"
    body = anthropic_message_body() if anthropic else completion_body()
    json_resp = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    chunks = b"".join(
        f"{len(e):x}".encode() + b"\r\n" + e + b"\r\n"
        for e in (anthropic_sse_events if anthropic else sse_events)(sse_n)
    )
    sse_resp = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    return json_resp, sse_resp


async def serve_upstream(
    host: str, port: int, sse_n: int, api: str = "openai", drip_s: float | None = None
) -> asyncio.AbstractServer:
    """Starts the lean upstream (answers in ``api``'s format, see :func:`upstream_responses`);
    with ``drip_s``, a stream's events come ``drip_s`` seconds apart instead of in one piece."""
    json_resp, sse_resp = upstream_responses(sse_n, api)
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: UpstreamProtocol(json_resp, sse_resp, drip_s), host, port, backlog=1024)


# -- load client -----------------------------------------------------------------------------------


@dataclass
class Sample:
    """Timings of one request, in seconds from the write of the request."""

    first_byte: float
    last_byte: float
    status: int


@dataclass
class Run:
    """All samples of one scenario and its wall time."""

    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    errors: int = 0


def request_bytes(host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A complete keep-alive POST (with ``headers`` added, e.g. ``anthropic-version``)."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"accept: */*\r\n{extra}content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> Sample:
    start = time.perf_counter()
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    first = 0.0
    if b"transfer-encoding: chunked" in lower:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.strip().split(b";")[0], 16)
            if not first:
                first = time.perf_counter() - start
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
    else:
        pos = lower.find(b"content-length:")
        length = int(lower[pos + 15 : lower.find(b"\r\n", pos)])
        await reader.readexactly(length)
        first = time.perf_counter() - start
    return Sample(first, time.perf_counter() - start, status)


async def load(
    host: str,
    port: int,
    path: str,
    body: bytes | Sequence[bytes],
    *,
    concurrency: int,
    requests: int,
    warmup: int,
    headers: dict[str, str] | None = None,
) -> Run:
    """Sends ``warmup`` then ``requests`` POSTs over ``concurrency`` keep-alive connections
    (``body`` a list: the bodies in turn, e.g. a conversation whose newest tool result varies)."""
    bodies = [body] if isinstance(body, bytes) else list(body)
    reqs = itertools.cycle([request_bytes(host, port, path, b, headers) for b in bodies])
    conns = [await asyncio.open_connection(host, port) for _ in range(concurrency)]
    run = Run()

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int, keep: bool) -> None:
        for _ in range(n):
            sample = await _one(reader, writer, next(reqs))
            if sample.status != 200:
                run.errors += 1
            if keep:
                run.samples.append(sample)

    per_warm = max(1, warmup // concurrency)
    await asyncio.gather(*(worker(r, w, per_warm, False) for r, w in conns))
    per = max(1, requests // concurrency)
    started = time.perf_counter()
    await asyncio.gather(*(worker(r, w, per, True) for r, w in conns))
    run.wall_s = time.perf_counter() - started
    for _, writer in conns:
        writer.close()
    return run
