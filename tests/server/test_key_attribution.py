"""The inbound key travels with its request (issue 44): under ``switchyard serve`` a decision
record reaches its sinks after the reply, often while another request runs (server/later.py),
yet its booking against a daily budget and its ``details.api_key`` are those of the request it
belongs to — over keep-alive and pipelined connections, JSON answers and streams, two keys at
once, with a caller polling ``GET /health`` without a key in between."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.access import Caller
from switchyard.server.app import SwitchyardApp
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

KEYS = {"ann": "sy-ann-attribution-test-key", "bob": "sy-bob-attribution-test-key"}


@pytest.fixture(scope="module")
def upstream_port() -> Iterator[int]:
    fake = serve_fake(FakeUpstream())
    try:
        yield fake.port
    finally:
        fake.stop()


def _config(port: int, budgets: dict[str, float]) -> dict[str, Any]:
    return {
        "llm_clients": {"up": {"base_url": f"http://127.0.0.1:{port}/v1", "max_retries": 0}},
        "targets": {
            "t": {"client": "up", "model": "fake-model", "price": {"input_per_mtok": 1000, "output_per_mtok": 3000}}
        },
        "routes": {"r": {"type": "passthrough", "target": "t"}},
        "server": {
            "api_keys": [
                {"name": name, "key_env": f"SY_TEST_ATTR_{name.upper()}", "budget_usd_per_day": budgets[name]}
                for name in KEYS
            ]
        },
    }


@pytest.fixture
def keyed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, secret in KEYS.items():
        monkeypatch.setenv(f"SY_TEST_ATTR_{name.upper()}", secret)


def _body(who: str, i: int, *, stream: bool, anthropic: bool = False) -> bytes:
    # Prompts of different sizes per key, so one key's cost cannot pass for the other's.
    words = " ".join(f"{who}{j}" for j in range(8 if who == "ann" else 40))
    body: dict[str, Any] = {"model": "r", "stream": stream, "messages": [{"role": "user", "content": f"{i} {words}"}]}
    if anthropic:
        body["max_tokens"] = 64
    return orjson.dumps(body)


def _raw_request(path: str, body: bytes, key: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {key}\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Reader:
    """Reads HTTP/1.1 answers off a socket, one after another (content-length or chunked)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        assert data, "the proxy closed the connection"
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        status = int(self._line().split()[1])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(self._line().split(b";")[0], 16):
                body += self._take(size)
                self._take(2)
            self._line()  # the empty trailer
            return status, headers, body
        return status, headers, self._take(int(headers.get("content-length", "0")))


Sent = tuple[str, int, str]
"""(the key that sent a request, the status it got, the request id the proxy answered with)."""


def _keep_alive(root: str, who: str, sent: list[Sent], start: threading.Barrier) -> None:
    """Six requests on one kept-alive connection: JSON and streams, Chat and Messages."""
    headers = {"authorization": f"Bearer {KEYS[who]}", "content-type": "application/json"}
    with httpx.Client(base_url=root, timeout=15, limits=httpx.Limits(max_connections=1)) as client:
        start.wait(15)
        for i in range(6):
            stream, anthropic = bool(i % 2), i % 3 == 2
            path = "/v1/messages" if anthropic else "/v1/chat/completions"
            body = _body(who, i, stream=stream, anthropic=anthropic)
            with client.stream("POST", path, content=body, headers=headers) as resp:
                resp.read()
                sent.append((who, resp.status_code, resp.headers.get("x-switchyard-request-id", "")))


def _pipelined(port: int, who: str, sent: list[Sent], start: threading.Barrier) -> None:
    """Four requests written at once on one connection (HTTP/1.1 pipelining), then read in order."""
    batch = b"".join(
        _raw_request("/v1/chat/completions", _body(who, 10 + i, stream=bool(i % 2)), KEYS[who]) for i in range(4)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        start.wait(15)
        sock.sendall(batch)
        reader = _Reader(sock)
        for _ in range(4):
            status, headers, _ = reader.answer()
            sent.append((who, status, headers.get("x-switchyard-request-id", "")))


def _spent(sy: Switchyard, name: str, days: set[str]) -> float:
    async def read() -> float:
        total = 0.0
        for day in days:
            value = await sy.state_store.get(f"switchyard:budget:{name}:{day}")
            total += float((value or {}).get("usd", 0.0))
        return total

    return asyncio.run(read())


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


@pytest.mark.usefixtures("keyed_env")
def test_two_keys_at_once_are_each_charged_and_named_for_their_own_requests(upstream_port: int) -> None:
    sy = Switchyard.from_config(_config(upstream_port, {"ann": 1e6, "bob": 1e6}))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    sent: list[Sent] = []
    days = {_today()}
    try:
        with ServerThread(sy, records_after_reply=True) as server:
            start = threading.Barrier(5)
            done = threading.Event()
            polls: list[int] = []

            def poll_health() -> None:  # a caller without a key, between everyone's requests
                with httpx.Client(base_url=server.root_url, timeout=15) as client:
                    start.wait(15)
                    while not done.is_set():
                        polls.append(client.get("/health").status_code)

            drivers = [
                threading.Thread(target=_keep_alive, args=(server.root_url, who, sent, start)) for who in KEYS
            ] + [threading.Thread(target=_pipelined, args=(server.port, who, sent, start)) for who in KEYS]
            poller = threading.Thread(target=poll_health)
            for thread in (*drivers, poller):
                thread.start()
            for thread in drivers:
                thread.join(30)
            done.set()
            poller.join(30)
            assert polls and set(polls) == {200}
            assert len(sent) == 2 * (6 + 4) and {s[1] for s in sent} == {200}, sent
            wait_until(lambda: len(records) == len(sent), what="every request's record")
            days.add(_today())
            by_id = {r.request_id: r for r in records}
            assert len(by_id) == len(records)  # one record per request, none twice
            for who, _, request_id in sent:
                record = by_id[request_id]
                assert record.details.get("api_key") == who, (who, record.details)
                assert record.caller is not None and record.caller.key == who
            for who in KEYS:
                own = sum(r.total_cost_usd for r in records if r.details.get("api_key") == who)
                assert own > 0
                # Every cent of this key's requests booked to it, and none of the other key's.
                wait_until(lambda w=who, o=own: abs(_spent(sy, w, days) - o) < 1e-9, what=f"{who}'s spend booked")
    finally:
        sy.close()
    ann = [r.total_cost_usd for r in records if r.details["api_key"] == "ann"]
    bob = [r.total_cost_usd for r in records if r.details["api_key"] == "bob"]
    assert len(ann) == len(bob) == 10 and max(ann) < min(bob)  # bob's prompts are the longer ones


@pytest.mark.usefixtures("keyed_env")
@pytest.mark.parametrize("how", ["keep-alive", "pipelined"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_daily_budget_stops_a_client_that_keeps_its_connection(upstream_port: int, how: str, stream: bool) -> None:
    # A budget smaller than one answer: the first is served, every later one on the same
    # connection is refused once the first answer's record is booked — which happens while the
    # next request is already being admitted (server/later.py).
    sy = Switchyard.from_config(_config(upstream_port, {"ann": 1e-9, "bob": 1e6}))
    statuses: list[int] = []
    try:
        with ServerThread(sy, records_after_reply=True) as server:
            if how == "keep-alive":
                headers = {"authorization": f"Bearer {KEYS['ann']}", "content-type": "application/json"}
                with httpx.Client(base_url=server.root_url, timeout=15) as client:
                    for i in range(6):
                        body = _body("ann", i, stream=stream)
                        with client.stream("POST", "/v1/chat/completions", content=body, headers=headers) as resp:
                            resp.read()
                            statuses.append(resp.status_code)
            else:
                # Written one after another on one connection, each once the previous answer is
                # read: the proxy handles a pipelined connection's requests one at a time.
                with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
                    reader = _Reader(sock)
                    for i in range(6):
                        sock.sendall(_raw_request("/v1/chat/completions", _body("ann", i, stream=stream), KEYS["ann"]))
                        statuses.append(reader.answer()[0])
    finally:
        sy.close()
    assert statuses == [200] + [429] * 5


async def _asgi_post(app: SwitchyardApp, key: str, *, stream: bool) -> int:
    """One chat request through the ASGI app with ``key``; its status."""
    body = _body("ann", 0, stream=stream)
    asked: list[bool] = []
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        if asked:  # the app watching for a disconnect: the caller stays
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")]
    headers.append((b"authorization", f"Bearer {key}".encode()))
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}
    await asyncio.create_task(app(scope, receive, send))  # its own task, as a server runs each request
    return statuses[0]


@pytest.mark.usefixtures("keyed_env")
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_records_handed_out_at_shutdown_are_booked_to_their_keys(
    upstream_port: int, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switchyard.server import later

    monkeypatch.setattr(later, "IDLE_S", 3600.0)  # only the shutdown hands them out
    sy = Switchyard.from_config(_config(upstream_port, {"ann": 1e6, "bob": 1e6}))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    app = SwitchyardApp(sy)
    assert await _asgi_post(app, KEYS["ann"], stream=stream) == 200
    assert await _asgi_post(app, KEYS["bob"], stream=stream) == 200
    assert len(records) == 1 and len(app.later.pending) == 1  # bob's answer handed ann's out; his waits
    shutdown = [{"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, Any]:
        return shutdown.pop()

    async def send(message: dict[str, Any]) -> None:
        pass

    await asyncio.create_task(app._lifespan(receive, send))  # the shutdown runs in no request's context
    assert [r.details["api_key"] for r in records] == ["ann", "bob"]
    days = {_today()}
    for record in records:
        spent = 0.0
        for day in days:
            value = await sy.state_store.get(f"switchyard:budget:{record.details['api_key']}:{day}")
            spent += float((value or {}).get("usd", 0.0))
        assert spent == pytest.approx(record.total_cost_usd, abs=1e-12)


async def test_settling_waits_for_the_spend_still_being_written() -> None:
    # A store that takes its time (Redis over a network): the app's shutdown awaits this, so the
    # booking is written before the router, and its store, close.
    from switchyard.server.auth import Budgets
    from switchyard.state.memory import MemoryStore

    opened = asyncio.Event()

    class SlowStore(MemoryStore):
        async def update(self, key: str, fn: Any, *, ttl_s: float | None = None) -> Any:
            await opened.wait()
            return await super().update(key, fn, ttl_s=ttl_s)

    store = SlowStore()
    budgets = Budgets(store, {"ann": 1.0}, refresh_s=0)
    record = DecisionRecord(request_id="r", route="r", router="passthrough", cost_usd=0.25)
    record.bind(Caller("ann", "ann"))
    budgets.record(record)
    settling = asyncio.create_task(budgets.settle())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not settling.done()  # the write is still on its way
    opened.set()
    await settling
    assert (await store.get(f"switchyard:budget:ann:{_today()}") or {}).get("usd") == pytest.approx(0.25)


@pytest.mark.usefixtures("keyed_env")
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_answer_is_kept_for_booking_before_its_caller_reads_its_end(upstream_port: int, stream: bool) -> None:
    # The caller may send its next request on the same connection the moment it reads the end
    # of this answer; by then this answer's record must be where that request's budget check
    # hands records out (later.py) — also for a stream, whose clean-up after its end may wait.
    sy = Switchyard.from_config(_config(upstream_port, {"ann": 1e6, "bob": 1e6}))
    app = SwitchyardApp(sy)
    kept_at_end: list[int] = []
    body = _body("ann", 0, stream=stream)
    asked: list[bool] = []

    async def receive() -> dict[str, Any]:
        if asked:
            await asyncio.Event().wait()
        asked.append(True)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            # The first moment the server could read the caller's next request: the loop's next turn.
            asyncio.get_running_loop().call_soon(lambda: kept_at_end.append(len(app.later.pending)))

    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")]
    headers.append((b"authorization", f"Bearer {KEYS['ann']}".encode()))
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}
    try:
        await asyncio.create_task(app(scope, receive, send))
    finally:
        app.later.flush()
        await sy.aclose()
    assert kept_at_end == [1]
