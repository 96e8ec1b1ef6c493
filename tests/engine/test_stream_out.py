"""The stream writer: keep-alives during upstream silence, clean shutdown, error hand-over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from switchyard.engine.stream_out import encode_stream
from switchyard.protocol.stream import MessageStart, MessageStop, StreamEvent, TextDelta
from switchyard.wire import codec


class Upstream:
    """An event source with scripted pauses that records whether it was closed."""

    def __init__(self, script: list[StreamEvent | float | Exception]) -> None:
        self.script = script
        self.closed = False
        self.gen = self._run()

    async def _run(self) -> AsyncIterator[StreamEvent]:
        try:
            for step in self.script:
                if isinstance(step, float):
                    await asyncio.sleep(step)
                elif isinstance(step, Exception):
                    raise step
                else:
                    yield step
        finally:
            self.closed = True

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self.gen

    async def aclose(self) -> None:
        await self.gen.aclose()


async def _collect(chunks: AsyncIterator[bytes]) -> list[bytes]:
    return [c async for c in chunks]


async def test_events_are_encoded_as_they_come() -> None:
    upstream = Upstream([MessageStart(id="r"), TextDelta(text="a"), 0.05, TextDelta(text="b"), MessageStop()])
    encoder = codec("anthropic_messages").stream_encoder(model="m", include_usage=False)
    out = await _collect(encode_stream(encoder, upstream))
    text = b"".join(out)
    assert text.index(b'"a"') < text.index(b'"b"')
    assert text.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert upstream.closed


async def test_closing_the_writer_stops_the_upstream_read() -> None:
    upstream = Upstream([MessageStart(id="r"), TextDelta(text="a"), 30.0, TextDelta(text="never")])
    encoder = codec("openai_chat").stream_encoder(model="m", include_usage=False)
    chunks = encode_stream(encoder, upstream)
    first = await chunks.__anext__()
    assert b"assistant" in first
    await asyncio.wait_for(chunks.aclose(), 2)  # the caller went away
    assert upstream.closed


async def test_an_unexpected_upstream_failure_reaches_the_writer() -> None:
    upstream = Upstream([MessageStart(id="r"), TextDelta(text="a"), RuntimeError("bug")])
    encoder = codec("openai_responses").stream_encoder(model="m", include_usage=False)
    with pytest.raises(RuntimeError, match="bug"):
        await _collect(encode_stream(encoder, upstream))
    assert upstream.closed


async def test_the_chat_writer_ends_with_done() -> None:
    upstream = Upstream([MessageStart(id="r"), TextDelta(text="a"), MessageStop()])
    encoder = codec("openai_chat").stream_encoder(model="m", include_usage=False)
    out = await _collect(encode_stream(encoder, upstream))
    assert out[-1] == b"data: [DONE]\n\n"
