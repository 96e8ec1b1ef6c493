"""``TurnWriter`` (server/connections.py): what one loop turn writes leaves in one send."""

from __future__ import annotations

import asyncio
from typing import Any

from switchyard.server.connections import TurnWriter


class Recorder:
    """Just the transport calls TurnWriter makes, recorded."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.vectored: list[list[bytes]] = []
        self.closed = False
        self.aborted = False
        self.extra = {"peername": ("127.0.0.1", 1)}

    def write(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def writelines(self, pieces: list[bytes]) -> None:
        self.vectored.append(list(pieces))
        self.sent.append(b"".join(pieces))  # one send (uvloop: one writev)

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)


def test_writes_of_one_turn_leave_together_at_its_end() -> None:
    async def main() -> tuple[list[bytes], list[bytes]]:
        raw = Recorder()
        writer = TurnWriter(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        writer.write(b"{}")
        during = list(raw.sent)
        await asyncio.sleep(0)
        return during, raw.sent

    during, after = asyncio.run(main())
    assert during == [] and after == [b"HTTP/1.1 200 OK\r\n\r\n{}"]


def test_flush_sends_now_and_close_sends_before_closing() -> None:
    async def main() -> Recorder:
        raw = Recorder()
        writer = TurnWriter(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"a")
        writer.flush()
        assert raw.sent == [b"a"]
        writer.write(b"b")
        writer.close()
        assert raw.sent == [b"a", b"b"] and raw.closed
        await asyncio.sleep(0)  # the turn's own flush finds nothing left
        return raw

    assert asyncio.run(main()).sent == [b"a", b"b"]


def test_abort_drops_what_is_pending_and_the_rest_is_the_transports() -> None:
    async def main() -> Recorder:
        raw = Recorder()
        writer = TurnWriter(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"never sent")
        writer.abort()
        await asyncio.sleep(0)
        assert writer.is_closing() and writer.get_extra_info("peername") == ("127.0.0.1", 1)
        return raw

    raw = asyncio.run(main())
    assert raw.sent == [] and raw.aborted


def test_a_large_body_leaves_with_its_head_in_one_vectored_send() -> None:
    async def main() -> Recorder:
        raw = Recorder()
        writer = TurnWriter(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        writer.write(b"x" * 8192)
        await asyncio.sleep(0)
        return raw

    raw = asyncio.run(main())
    # Not joined first (no copy of the body), and still one send.
    assert raw.vectored == [[b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 8192]]
    assert raw.sent == [b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 8192]
