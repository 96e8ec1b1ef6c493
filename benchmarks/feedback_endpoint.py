"""What ``POST /v1/feedback`` adds over ``GET /health`` (p50 at c=1), and the RSS that 10,000
(then 20,000) reports leave in a real ``switchyard serve`` (issue 48's targets: ≤ 1 ms added,
≤ +20 MB after 10,000 posts).

One ``switchyard serve`` process on 127.0.0.1 (memory state backend, the default
``feedback.max_entries`` of 10,000), this script as the client on one keep-alive connection. A
``POST /v1/decision`` first makes one known session (no upstream is called), so the timed reports
include both answers: a matched report on that session (200, each one replacing the last) and an
unmatched one on a new id each time (202, each one a new entry in the bounded store).

RSS is the server's ``VmRSS`` (``/proc/<pid>/status``): after a warm-up, after 10,000 reports on
distinct ids, and after 10,000 more (the store is full by then: the oldest are evicted).

Usage:
    python benchmarks/feedback_endpoint.py                       # 5 blocks of 300, then 20,000 posts
    python benchmarks/feedback_endpoint.py --blocks 3 --per-block 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CONFIG = {
    "llm_clients": {"local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
    "targets": {
        "efficient": {"client": "local", "model": "bench-efficient"},
        "capable": {"client": "local", "model": "bench-capable"},
    },
    "routes": {"agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient"}},
    "feedback": {},  # on (off without a feedback: section or an experiment: block)
}


def _request(port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{extra}"
    if body:
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes, ok: bytes) -> float:
    start = time.perf_counter()
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    if head[9:12] != ok:
        raise RuntimeError(f"not {ok.decode()}: {head[:200]!r}")
    lower = head.lower()
    pos = lower.find(b"content-length:")
    await reader.readexactly(int(lower[pos + 15 : lower.find(b"\r\n", pos)]))
    return time.perf_counter() - start


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def report(self, port: int) -> bytes:
        self.n += 1
        body = orjson.dumps({"session_id": f"unknown-{self.n:08d}", "resolved": self.n % 2 == 0, "labels": ["bench"]})
        return _request(port, "POST", "/v1/feedback", body)


async def measure(port: int, pid: int, blocks: int, per_block: int) -> dict[str, object]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    chat = {"model": "agent", "messages": [{"role": "user", "content": "fix the failing test"}]}
    session = {"x-switchyard-session-id": "bench-session"}
    await _one(reader, writer, _request(port, "POST", "/v1/decision", orjson.dumps(chat), session), b"200")
    health = _request(port, "GET", "/health")
    matched = _request(port, "POST", "/v1/feedback", orjson.dumps({"session_id": "bench-session", "score": 0.5}))
    ids = _Ids()
    for _ in range(200):  # warm-up
        await _one(reader, writer, health, b"200")
        await _one(reader, writer, matched, b"200")
        await _one(reader, writer, ids.report(port), b"202")
    times: dict[str, list[float]] = {"health": [], "feedback matched": [], "feedback unmatched": []}
    for _ in range(blocks):
        times["health"] += [await _one(reader, writer, health, b"200") for _ in range(per_block)]
        times["feedback matched"] += [await _one(reader, writer, matched, b"200") for _ in range(per_block)]
        times["feedback unmatched"] += [await _one(reader, writer, ids.report(port), b"202") for _ in range(per_block)]
    rss = {"after warm-up": _rss_mb(pid)}
    start = ids.n
    for target in (10_000, 20_000):
        while ids.n - start < target:
            await _one(reader, writer, ids.report(port), b"202")
        rss[f"after {target:,} more posts"] = _rss_mb(pid)
    writer.close()
    return {"times": times, "rss": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--per-block", type=int, default=300)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "router.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(port)]
        proc = subprocess.Popen([*cmd, "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit("the proxy did not start") from None
                    time.sleep(0.1)
            # The server may run under a launcher: its RSS is the serving process's own.
            result = asyncio.run(measure(port, proc.pid, args.blocks, args.per_block))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    times: dict[str, list[float]] = result["times"]  # type: ignore[assignment]
    rss: dict[str, float] = result["rss"]  # type: ignore[assignment]
    p50 = {name: statistics.median(v) * 1000 for name, v in times.items()}
    print(f"c=1, {args.blocks} blocks x {args.per_block} requests per kind")
    print(f"{'request':<22}{'p50 ms':>10}{'added over /health':>22}")
    for name, value in p50.items():
        added = "" if name == "health" else f"{value - p50['health']:+.3f} ms"
        print(f"{name:<22}{value:>10.3f}{added:>22}")
    base = rss["after warm-up"]
    for name, value in rss.items():
        print(f"RSS {name:<26}{value:>8.1f} MB  ({value - base:+.1f} MB)")
    print(json.dumps({"p50_ms": p50, "rss_mb": rss, "load_avg": os.getloadavg(), "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
