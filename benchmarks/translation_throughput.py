"""Translation cost per stream event and per request, for all nine caller/upstream pairs.

Measures the pure codec path (no network): an upstream SSE stream of 2,000 text deltas plus a
tool call is parsed, decoded, re-encoded for the caller and framed; and a 40-message agent
request is decoded from the caller's format and encoded for the upstream. Also the cost of the
wrapper the engine puts around every proxied stream (``engine.stream_out.encode_stream``; the
keep-alive pings moved to the server's writer, ``server/stream_write.py``).

    .venv/bin/python benchmarks/translation_throughput.py
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from switchyard.engine.stream_out import encode_stream
from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import Usage
from switchyard.protocol.stream import MessageStart, MessageStop, StreamEvent, TextDelta, ToolCallDelta, UsageDelta
from switchyard.protocol.tools import ToolDefinition
from switchyard.wire import SSEParser, codec
from switchyard.wire.base import WireFormat

FORMATS = [f.value for f in WireFormat]
N = 2000


def events() -> list[StreamEvent]:
    out: list[StreamEvent] = [MessageStart(id="r1", model="m")]
    out += [TextDelta(text=f"word{i} ") for i in range(N)]
    out += [ToolCallDelta(index=0, id="call_1", name="lookup", arguments='{"query": ')]
    out += [ToolCallDelta(index=0, arguments='"cats"}')]
    out += [UsageDelta(usage=Usage(input_tokens=1000, output_tokens=N)), MessageStop(stop_reason="tool_use")]
    return out


def request() -> ChatRequest:
    msgs = [Message.of("system", "You are an agent. " * 50)]
    for i in range(13):
        msgs.append(Message.of("user", f"step {i}: " + "context " * 40))
        msgs.append(
            Message(role="assistant", content=[ToolCallPart(id=f"c{i}", name="run", arguments='{"cmd": "ls"}')])
        )
        msgs.append(
            Message(role="tool", content=[ToolResultPart(call_id=f"c{i}", content=[TextPart(text="ok " * 30)])])
        )
    tools = [
        ToolDefinition(name=f"t{i}", parameters={"type": "object", "properties": {"x": {"type": "string"}}})
        for i in range(10)
    ]
    return ChatRequest(model="m", messages=msgs, tools=tools, max_tokens=1000)


def stream_pair(upstream: str, caller: str, raw: bytes) -> float:
    start = time.perf_counter()
    parser, decoder = SSEParser(), codec(upstream).stream_decoder()
    encoder = codec(caller).stream_encoder(model="m", include_usage=True)
    out = 0
    for i in range(0, len(raw), 512):
        for sse in parser.feed(raw[i : i + 512]):
            for ev in decoder.feed(sse):
                out += len(encoder.encode(ev))
    for sse in parser.finish():
        for ev in decoder.feed(sse):
            out += len(encoder.encode(ev))
    out += len(encoder.finish())
    return (time.perf_counter() - start) / (N + 5) * 1e6


class _Events:
    def __init__(self, items: list[StreamEvent]) -> None:
        self._it = iter(items)

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        return None


async def wrapper_cost() -> float:
    encoder = codec("openai_chat").stream_encoder(model="m", include_usage=False)
    chunks: AsyncIterator[bytes] = encode_stream(encoder, _Events(events()))
    start = time.perf_counter()
    async for _ in chunks:
        pass
    return (time.perf_counter() - start) / (N + 5) * 1e6


def main() -> None:
    evs = events()
    print(f"stream translation, µs per event ({N + 5} events; rows: upstream, columns: caller)")
    print("upstream \\ caller".ljust(20) + "".join(c.ljust(20) for c in FORMATS))
    for upstream in FORMATS:
        enc = codec(upstream).stream_encoder(model="m", include_usage=True)
        raw = b"".join(enc.encode(e) for e in evs) + enc.finish()
        cells = [min(stream_pair(upstream, caller, raw) for _ in range(5)) for caller in FORMATS]
        print(upstream.ljust(20) + "".join(f"{c:.1f}".ljust(20) for c in cells))
    req = request()
    print("\nrequest translation (40 messages, 10 tools), µs per request (rows: caller, columns: upstream)")
    print("caller \\ upstream".ljust(20) + "".join(c.ljust(20) for c in FORMATS))
    for caller in FORMATS:
        body = json.loads(json.dumps(codec(caller).encode_request(req, model="m", stream=False)))
        cells = []
        for upstream in FORMATS:
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(50):
                    codec(upstream).encode_request(codec(caller).decode_request(body), model="m", stream=False)
                best = min(best, (time.perf_counter() - start) / 50 * 1e6)
            cells.append(best)
        print(caller.ljust(20) + "".join(f"{c:.0f}".ljust(20) for c in cells))
    wrapped = min(asyncio.run(wrapper_cost()) for _ in range(3))
    print(f"\nengine stream wrapper (Chat encoder included), µs per event: {wrapped:.1f}")


if __name__ == "__main__":
    main()
