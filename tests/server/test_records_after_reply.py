"""Under ``switchyard serve`` an answer's decision record reaches the sinks after the reply's last
byte is sent (``records_after_reply``), when the server next waits (``server/later.py``): as the
next proxied call waits for its upstream, before a view or the dashboard reads the sinks, at
shutdown, or after ``IDLE_S`` when nothing comes. With it off — :class:`ServerThread`'s default —
it is out before the reply completes. The record is never lost and never written twice: not for a
JSON answer, not for a stream, not when the caller leaves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from _configs import skeleton_config
from _waits import eventually

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.app import SwitchyardApp
from switchyard.testing import FakeUpstream, serve_fake


@pytest.fixture(scope="module")
def upstream_port() -> Iterator[int]:
    fake = serve_fake(FakeUpstream())
    try:
        yield fake.port
    finally:
        fake.stop()


def _router(port: int) -> tuple[Switchyard, list[DecisionRecord]]:
    sy = Switchyard.from_config(skeleton_config(port))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    return sy, records


async def _post(
    app: SwitchyardApp,
    records: list[DecisionRecord],
    *,
    stream: bool,
    method: str = "POST",
    path: str = "",
    key: str = "",
) -> list[tuple[str, bool, int]]:
    """POSTs a chat request through the ASGI app (or ``method``s ``path``); returns each message
    sent to the caller as (type, more_body, records emitted when it was sent)."""
    body = {"model": "fast", "messages": [{"role": "user", "content": "hello"}], "stream": stream}
    seen: list[tuple[str, bool, int]] = []
    asked: list[bool] = []

    async def receive() -> dict[str, Any]:
        if asked:  # the app watching for a disconnect: the caller stays
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": orjson.dumps(body), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        seen.append((message["type"], bool(message.get("more_body", False)), len(records)))
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    statuses: list[int] = []
    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")]
    if key:
        headers.append((b"authorization", f"Bearer {key}".encode()))
    scope = {"type": "http", "method": method, "path": path or "/v1/chat/completions", "headers": headers}
    await app(scope, receive, send)
    seen.append(("status", False, statuses[0]))
    return seen


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_record_follows_the_last_byte_when_nothing_else_comes(upstream_port: int, stream: bool) -> None:
    sy, records = _router(upstream_port)
    try:
        app = SwitchyardApp(sy)
        seen = await _post(app, records, stream=stream)
        last = [m for m in seen if m[0] == "http.response.body" and not m[1]]
        assert len(last) == 1
        assert last[0][2] == 0  # not yet out when the caller got its last byte
        assert len(app.later.pending) == 1  # kept for the next quiet moment
        await eventually(lambda: records, what="the record handed out while the server is idle")
    finally:
        await sy.aclose()
    assert len(records) == 1 and records[0].status == 200
    assert records[0].stream is stream
    assert not app.later.pending


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_next_call_hands_the_record_out_while_it_waits_for_its_upstream(
    upstream_port: int, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switchyard.server import later

    monkeypatch.setattr(later, "IDLE_S", 3600.0)  # only the next call can hand it out here
    sy, records = _router(upstream_port)
    try:
        app = SwitchyardApp(sy)
        await _post(app, records, stream=stream)
        assert not records
        seen = await _post(app, records, stream=stream)
    finally:
        await sy.aclose()
    assert seen[0][2] == 1  # the first call's record was out before the second's answer began
    assert len(records) == 1  # ... and the second's is kept in turn
    assert len(app.later.pending) == 1
    app.later.flush()
    assert len(records) == 2 and records[0].request_id != records[1].request_id


@pytest.mark.parametrize("path", ["/v1/stats", "/metrics", "/health"])
async def test_a_view_sees_every_answered_call(upstream_port: int, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from switchyard.server import later

    monkeypatch.setattr(later, "IDLE_S", 3600.0)
    sy, records = _router(upstream_port)
    try:
        app = SwitchyardApp(sy)
        await _post(app, records, stream=False)
        assert not records
        seen = await _post(app, records, stream=False, method="GET", path=path)
    finally:
        await sy.aclose()
    assert seen[0][0] == "http.response.start" and seen[0][2] == 1  # out before the view was read


async def test_shutdown_hands_out_what_is_kept(upstream_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from switchyard.server import later

    monkeypatch.setattr(later, "IDLE_S", 3600.0)
    sy, records = _router(upstream_port)
    app = SwitchyardApp(sy)
    await _post(app, records, stream=True)
    assert not records
    messages = [{"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, Any]:
        return messages.pop()

    async def send(message: dict[str, Any]) -> None:
        pass

    await app._lifespan(receive, send)
    assert len(records) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_with_it_off_the_record_is_out_before_the_reply_completes(upstream_port: int, stream: bool) -> None:
    sy, records = _router(upstream_port)
    try:
        seen = await _post(SwitchyardApp(sy, records_after_reply=False), records, stream=stream)
    finally:
        await sy.aclose()
    last = [m for m in seen if m[0] == "http.response.body" and not m[1]]
    assert last[0][2] == 1
    assert len(records) == 1


async def test_a_caller_that_leaves_mid_stream_is_still_recorded_once(upstream_port: int) -> None:
    sy, records = _router(upstream_port)
    body = {"model": "fast", "messages": [{"role": "user", "content": "hello"}], "stream": True}
    gone: list[bool] = []

    async def receive() -> dict[str, Any]:
        if not gone:
            gone.append(True)
            return {"type": "http.request", "body": orjson.dumps(body), "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("caller gone")  # the write fails: the stream is abandoned

    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")]
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}
    try:
        await SwitchyardApp(sy)(scope, receive, send)
    finally:
        await sy.aclose()
    assert len(records) == 1


async def test_an_answer_that_cannot_be_encoded_still_has_its_record(
    upstream_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in encoding the answer turns the reply into a 500; the held record goes out anyway,
    once, and says what happened."""
    from switchyard.wire.openai_chat.plain_answer import PlainAnswer

    def broken(self: PlainAnswer, **_: Any) -> Any:
        raise RuntimeError("encoder bug")

    monkeypatch.setattr(PlainAnswer, "encode", broken)
    sy, records = _router(upstream_port)
    try:
        seen = await _post(SwitchyardApp(sy), records, stream=False)
    finally:
        await sy.aclose()
    assert ("http.response.start", False, 1) in seen  # the 500, sent after the record
    assert len(records) == 1
    assert records[0].status == 500 and "could not be encoded (RuntimeError)" in (records[0].error or "")


async def test_a_budget_check_counts_the_call_just_answered(
    upstream_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key's daily budget is read from the records: the one kept for later goes out before the
    next call of that key is admitted, so the budget stops that call, not the one after."""
    from switchyard.server import later
    from switchyard.server.auth import hash_key

    monkeypatch.setattr(later, "IDLE_S", 3600.0)
    config = skeleton_config(upstream_port)
    config["server"] = {
        "api_keys": [{"name": "thrifty", "hash": hash_key("sy-test-thrifty"), "budget_usd_per_day": 0.0000001}]
    }
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        app = SwitchyardApp(sy)
        first = await _post(app, records, stream=False, key="sy-test-thrifty")
        second = await _post(app, records, stream=False, key="sy-test-thrifty")
    finally:
        await sy.aclose()
    assert first[-1] == ("status", False, 200)
    assert second[-1] == ("status", False, 429)


def test_a_new_loop_gets_its_own_hand_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop that closed with a hand-out due (its timer never fired) leaves none due in the next
    one: the records kept there go out by a timer of the running loop, in order."""
    from switchyard.engine.reply import Reply
    from switchyard.server import later

    kept = later.LaterRecords()
    out: list[int] = []

    async def keep(n: int) -> None:
        kept.keep(Reply(200, release=lambda: out.append(n)))

    monkeypatch.setattr(later, "IDLE_S", 3600.0)
    asyncio.run(keep(1))  # its loop closes with the record kept
    assert out == []
    monkeypatch.setattr(later, "IDLE_S", 0.001)

    async def again() -> None:
        await keep(2)
        await eventually(lambda: len(out) == 2, what="both records handed out under the new loop")

    asyncio.run(again())
    assert out == [1, 2]
