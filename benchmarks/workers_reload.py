"""Config reloads under load: ``switchyard serve --workers 2``, c=32, a SIGHUP every few seconds.

Three processes on 127.0.0.1: the lean upstream of benchmarks/rawhttp.py (canned JSON and SSE
answers), ``switchyard serve --workers 2`` (the CLI code path) and this script as the load
client: ``--concurrency`` keep-alive connections sending JSON and streamed requests in turn
(half each) for ``--duration`` seconds, while the config file flips between two valid versions
(one route more or less) and the supervisor gets ``SIGHUP`` ``--every`` seconds after the
previous reload completed (a rolling reload of two workers takes a few seconds itself).

Counted, per response:

* ``failed`` — a status other than 200;
* ``cut`` — a response that started and did not finish (a JSON body short of its
  content-length, a stream without its final ``data: [DONE]``);
* ``closed idle`` — a keep-alive connection closed by a draining worker before any byte of the
  answer to the request just sent; HTTP/1.1 lets a client retry such a request (RFC 9112
  §9.3.1), and this client does, on a new connection. Listed separately, not as failures;
* ``refused`` — a new connection refused or reset (there should never be one: the supervisor
  keeps every listening socket open).

Usage:
    python benchmarks/workers_reload.py                        # 60 s, a reload every 5 s
    python benchmarks/workers_reload.py --duration 20 --every 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from proxy_overhead import BODY, ROUTE, _spawn  # noqa: E402


@dataclass
class Counts:
    ok: int = 0
    failed: int = 0
    cut: int = 0
    closed_idle: int = 0
    refused: int = 0
    statuses: dict[int, int] = field(default_factory=dict)


class _Closed(Exception):
    """The connection closed before any byte of the answer."""


def _config(upstream_port: int, extra_route: bool) -> dict[str, object]:
    routes: dict[str, object] = {ROUTE: {"type": "passthrough", "target": "t"}}
    if extra_route:
        routes["second"] = {"type": "passthrough", "target": "t"}
    return {
        "llm_clients": {"up": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
        "targets": {"t": {"client": "up", "model": ROUTE, "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}}},
        "routes": routes,
        "server": {"drain_s": 20},
    }


def _request(port: int, stream: bool) -> bytes:
    body = orjson.dumps({**BODY, "stream": stream})
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> tuple[int, bool, bool]:
    """(status, complete, connection: close) of one request; raises _Closed before any byte."""
    writer.write(req)
    try:
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
            return 0, False, True
        raise _Closed from exc
    status = int(head[9:12])
    lower = head.lower()
    close = b"connection: close" in lower
    try:
        if b"transfer-encoding: chunked" in lower:
            data = bytearray()
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                data += (await reader.readexactly(size + 2))[:-2]
            complete = status != 200 or data.endswith(b"data: [DONE]\n\n")
        else:
            match = re.search(rb"content-length: *(\d+)", lower)
            await reader.readexactly(int(match.group(1)) if match else 0)
            complete = True
    except (asyncio.IncompleteReadError, ConnectionError):
        return status, False, True
    return status, complete, close


async def _client(port: int, deadline: float, counts: Counts, index: int) -> None:
    requests = [_request(port, stream=False), _request(port, stream=True)]
    n = index
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while time.monotonic() < deadline:
        if conn is None:
            try:
                conn = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                counts.refused += 1
                await asyncio.sleep(0.05)
                continue
        req = requests[n % 2]
        try:
            status, complete, close = await _exchange(*conn, req)
        except _Closed:
            counts.closed_idle += 1
            conn[1].close()
            conn = None
            continue  # the same request again, on a new connection
        n += 1
        counts.statuses[status] = counts.statuses.get(status, 0) + 1
        if not complete:
            counts.cut += 1
        elif status != 200:
            counts.failed += 1
        else:
            counts.ok += 1
        if close or not complete:
            conn[1].close()
            conn = None
    if conn is not None:
        conn[1].close()


async def _load(port: int, duration: float, concurrency: int, counts: Counts) -> None:
    deadline = time.monotonic() + duration
    await asyncio.gather(*(_client(port, deadline, counts, i) for i in range(concurrency)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between reloads")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    upstream, up_port = _spawn("upstream", "--sse-events", "20")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "router.yaml"
        config.write_text(yaml.safe_dump(_config(up_port, extra_route=False)))
        log = Path(tmp) / "serve.log"
        sock_port = _free_port()
        cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(sock_port)]
        cmd += ["--workers", str(args.workers), "--log-level", "warning"]
        with log.open("wb") as out:
            serve = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=out)
        try:
            _wait(lambda: "worker(s) ready" in log.read_text(), 120, "the workers")
            counts = Counts()
            reloads = 0

            async def reloader() -> None:
                nonlocal reloads
                end = time.monotonic() + args.duration - args.every / 2
                while time.monotonic() + args.every < end:
                    await asyncio.sleep(args.every)
                    reloads += 1
                    config.write_text(yaml.safe_dump(_config(up_port, extra_route=reloads % 2 == 1)))
                    serve.send_signal(signal.SIGHUP)
                    # One reload at a time (a SIGHUP during a reload is folded into one more
                    # reload after it): the next comes `every` seconds after this one completed.
                    while log.read_text().count("reload complete") < reloads:
                        if time.monotonic() > end + 120:
                            raise SystemExit("a reload did not complete")
                        await asyncio.sleep(0.05)

            async def run() -> None:
                await asyncio.gather(_load(sock_port, args.duration, args.concurrency, counts), reloader())

            started = time.monotonic()
            asyncio.run(run())
            wall = time.monotonic() - started
            _wait(lambda: log.read_text().count("reload complete") >= reloads, 120, "the last reload")
            text = log.read_text()
        finally:
            serve.terminate()
            serve.wait(timeout=60)
            upstream.terminate()
            upstream.wait(timeout=10)
    done = text.count("reload complete")
    refused = text.count("reload refused")
    total = counts.ok + counts.failed + counts.cut
    print(
        f"{args.workers} workers, c={args.concurrency}, {args.duration:g} s, SIGHUP every {args.every:g} s: "
        f"{reloads} reloads sent, {done} completed, {refused} refused"
    )
    print(
        f"responses {total} ({total / wall:.0f}/s): ok {counts.ok}, failed {counts.failed}, cut {counts.cut}; "
        f"idle keep-alive closes retried {counts.closed_idle}; connections refused {counts.refused}"
    )
    print(json.dumps({"counts": counts.__dict__, "reloads": reloads, "completed": done, "load_avg": os.getloadavg()}))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(done: object, timeout: float, what: str) -> None:
    assert callable(done)
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
