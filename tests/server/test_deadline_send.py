"""The stream's bounded write (switchyard.server.stream_write.deadline_send): a write the
connection takes at once costs no timer; one that waits for the caller to read finishes under
the write deadline, or drops the connection when the deadline passes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from switchyard.server.stream_write import Stalled, WriterState, deadline_send


class Conn:
    """An ASGI ``send`` whose writes wait on ``gate`` while it is set (flow control)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.gate: asyncio.Future[None] | None = None
        self.aborted = 0
        self.cancelled = 0

    async def send(self, message: dict[str, Any]) -> None:
        if self.gate is not None:
            try:
                await self.gate
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        self.sent.append(message["body"])

    def abort(self) -> None:
        self.aborted += 1


def _body(data: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": True}


async def test_a_write_taken_at_once_sets_no_timer() -> None:
    conn = Conn()
    loop = asyncio.get_running_loop()
    write = deadline_send(conn.send, 5.0, WriterState(last=loop.time()), conn.abort)
    timers = len(getattr(loop, "_scheduled", []))
    await write(_body(b"a"))
    assert conn.sent == [b"a"]
    assert len(getattr(loop, "_scheduled", [])) == timers  # nothing left scheduled, nothing set


async def _waiting(data: bytes) -> tuple[Conn, asyncio.Future[None]]:
    """A write of ``data`` (30 s deadline) that now waits for the reader."""
    conn = Conn()
    conn.gate = asyncio.get_running_loop().create_future()
    write = deadline_send(conn.send, 30.0, WriterState(last=0.0), conn.abort)
    task = asyncio.ensure_future(write(_body(data)))
    await asyncio.sleep(0)
    assert not task.done() and conn.sent == []
    return conn, task


async def test_a_write_that_waits_for_the_reader_completes_when_it_reads() -> None:
    conn, task = await _waiting(b"b")
    assert conn.gate is not None
    conn.gate.set_result(None)
    await task
    assert conn.sent == [b"b"] and conn.aborted == 0


async def test_a_write_the_reader_never_takes_is_stalled_and_the_connection_dropped() -> None:
    conn = Conn()
    conn.gate = asyncio.get_running_loop().create_future()
    state = WriterState(last=0.0)
    write = deadline_send(conn.send, 0.05, state, conn.abort)
    with pytest.raises(Stalled):
        await write(_body(b"c"))
    assert state.stalled and conn.aborted == 1 and conn.cancelled == 1  # the send saw the cancellation
    with pytest.raises(Stalled):
        await write(_body(b"d"))  # nothing more is written to a stalled caller
    assert conn.sent == []


async def test_a_waiting_write_cancelled_from_outside_passes_the_cancellation_on() -> None:
    conn, task = await _waiting(b"e")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.cancelled == 1 and conn.aborted == 0


async def test_a_send_that_returns_a_future_is_awaited_under_the_deadline() -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    aborted: list[int] = []
    write = deadline_send(lambda message: done, 0.05, WriterState(last=0.0), lambda: aborted.append(1))
    with pytest.raises(Stalled):
        await write(_body(b"f"))
    assert aborted == [1]
