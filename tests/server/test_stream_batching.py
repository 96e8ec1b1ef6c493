"""The proxy writes what a stream has ready as one body message: events that arrive together
leave together; events that arrive apart leave apart; failures and disconnects end it as before."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from switchyard.engine.reply import Reply
from switchyard.server.app import SwitchyardApp


class _Sy:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    async def dispatch(self, method: str, path: str, body: bytes, headers: Any, **_: Any) -> Reply:
        return self.reply


async def _chunks(script: list[bytes | float | Exception], closed: list[bool]) -> AsyncIterator[bytes]:
    try:
        for step in script:
            if isinstance(step, float):
                await asyncio.sleep(step)
            elif isinstance(step, Exception):
                raise step
            else:
                yield step
    finally:
        closed.append(True)


async def _serve(
    reply: Reply, disconnect_after: float | None = None, *, blocked: asyncio.Future[None] | None = None
) -> list[dict[str, Any]]:
    """The messages the app sends for ``reply``; with ``blocked``, every body write waits on it
    (a caller that does not read) under a 50 ms write deadline."""
    app = SwitchyardApp(_Sy(reply))  # type: ignore[arg-type]
    if blocked is not None:
        app.write_s = 0.05
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await asyncio.sleep(3600 if disconnect_after is None else disconnect_after)
        return {"type": "http.disconnect"}

    loop = asyncio.get_running_loop()
    turn = [0]

    def count() -> None:  # one step per loop turn: which turn each message was sent in
        turn[0] += 1
        if not finished:
            loop.call_soon(count)

    finished = False
    loop.call_soon(count)

    async def send(message: dict[str, Any]) -> None:
        if blocked is not None and message["type"] == "http.response.body":
            await blocked
        sent.append({**message, "turn": turn[0]})

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"content-type", b"application/json")],
    }
    try:
        await asyncio.wait_for(app(scope, receive, send), 5)
    finally:
        finished = True
    return sent


def _bodies(sent: list[dict[str, Any]]) -> list[bytes]:
    return [m["body"] for m in sent if m["type"] == "http.response.body" and m.get("body")]


async def test_ready_events_leave_together_and_dripping_ones_apart() -> None:
    closed: list[bool] = []
    script: list[bytes | float | Exception] = [b"a\n\n", b"b\n\n", b"c\n\n", 0.05, b"d\n\n", 0.05, b"e\n\n"]
    sent = await _serve(Reply(200, stream=_chunks(script, closed)), None)
    assert _bodies(sent) == [b"a\n\nb\n\nc\n\n", b"d\n\n", b"e\n\n"]
    # The head left with the first events, in the same loop turn; a dripping event is written as
    # it comes, and the body's end follows the last one in the same loop turn, so the connection
    # (which sends what a turn wrote at once) sends them together.
    assert sent[0]["type"] == "http.response.start" and sent[0]["turn"] == sent[1]["turn"]
    assert [(m["body"], m["more_body"]) for m in sent[-2:]] == [(b"e\n\n", True), (b"", False)]
    assert sent[-1]["turn"] == sent[-2]["turn"]
    assert [m.get("more_body") for m in sent[1:]] == [True, True, True, False]
    assert closed == [True]


async def test_a_stream_that_ends_with_its_first_read_is_one_body_message() -> None:
    closed: list[bool] = []
    sent = await _serve(Reply(200, stream=_chunks([b"a\n\n", b"b\n\n"], closed)), None)
    # The head, then every byte and the body's end in one message.
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert (sent[1]["body"], sent[1]["more_body"]) == (b"a\n\nb\n\n", False)
    assert closed == [True]


async def test_a_failing_stream_ends_without_a_clean_finish() -> None:
    closed: list[bool] = []
    script: list[bytes | float | Exception] = [b"a\n\n", 0.02, RuntimeError("boom")]
    sent = await _serve(Reply(200, stream=_chunks(script, closed)), None)
    assert _bodies(sent) == [b"a\n\n"]
    assert not any(m.get("more_body") is False for m in sent)  # no end-of-body: the caller sees a cut
    assert closed == [True]


async def test_a_caller_that_leaves_stops_the_stream() -> None:
    closed: list[bool] = []
    script: list[bytes | float | Exception] = [b"a\n\n", 10.0, b"never\n\n"]
    sent = await _serve(Reply(200, stream=_chunks(script, closed)), 0.05)
    assert _bodies(sent) == [b"a\n\n"]
    assert closed == [True]


async def test_a_timeout_inside_the_stream_ends_its_own_wait() -> None:
    # The first steps of a stream are run by hand; one that enters a timeout scope and waits must
    # still be timed out in the task that goes on with it (the httpx path reads this way).
    closed: list[bool] = []

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"a\n\n"
            try:
                async with asyncio.timeout(0.05):
                    await asyncio.sleep(3600)
            except TimeoutError:
                yield b"timed out\n\n"
        finally:
            closed.append(True)

    sent = await _serve(Reply(200, stream=stream()), None)
    assert _bodies(sent) == [b"a\n\n", b"timed out\n\n"]
    assert sent[-1]["more_body"] is False and closed == [True]


async def test_a_caller_that_does_not_read_the_first_events_stops_the_stream_there() -> None:
    # The write of the first read's events waits while the stream is inside its next step (run
    # by hand, now waiting for the upstream): past the write deadline the stream is cancelled in
    # that step, so its clean-up runs and the upstream read stops.
    closed: list[bool] = []
    script: list[bytes | float | Exception] = [b"a\n\n", b"b\n\n", 3600.0, b"never\n\n"]
    blocked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    sent = await _serve(Reply(200, stream=_chunks(script, closed)), None, blocked=blocked)
    assert [m["type"] for m in sent] == ["http.response.start"]  # no body was ever taken
    assert closed == [True]
