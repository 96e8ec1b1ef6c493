"""Soak: many mixed requests with faults through a real ``switchyard serve``; RSS and descriptors.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/soak.py                 # 100,000 requests
    PYTHONPATH=. .venv/bin/python benchmarks/soak.py --requests 5000 # a quick look

Three parties, all on 127.0.0.1: the fake upstream (``switchyard.testing.FakeUpstream``, on a
thread here), the proxy (``python -m switchyard serve`` in a subprocess, so its memory and file
descriptors are its own) and a raw-socket load client (asyncio, ``--concurrency`` keep-alive
connections). The mix covers the three APIs, JSON and SSE, upstream faults (500 with fallback,
429 asking for an hour, malformed SSE, a reset mid-stream), caller errors (bad JSON,
``"stream": "false"``, text/plain, unknown route, oversized body) and callers that hang up
mid-stream.

The proxy's RSS and open descriptors are read from ``/proc`` at quiet points — every client
connection closed, one second idle — after the warm-up (the first ``--warmup`` requests) and at
the end; the verdict is RSS growth < 10 %, no descriptor leak (the count may move by the load's
concurrency as pooled upstream connections come and go, not with the number of requests) and
no unexpected status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import yaml

from switchyard.testing import FakeModel, FakeUpstream, serve_fake

MSG = [{"role": "user", "content": "Fix the failing test in tests/test_parser.py, then run the suite."}]


def _chat(model: str, stream: bool = False) -> bytes:
    return orjson.dumps({"model": model, "messages": MSG, "stream": stream, "max_tokens": 64})


def _anth(model: str, stream: bool = False) -> bytes:
    return orjson.dumps({"model": model, "messages": MSG, "stream": stream, "max_tokens": 64})


def _resp(model: str, stream: bool = False) -> bytes:
    return orjson.dumps({"model": model, "input": MSG, "stream": stream, "max_output_tokens": 64})


# name: (weight, path, body, content type, expected statuses, hang up after first chunk)
MIX: dict[str, tuple[int, str, bytes, str, tuple[int, ...], bool]] = {
    "chat_json": (28, "/v1/chat/completions", _chat("quick"), "application/json", (200,), False),
    "chat_sse": (14, "/v1/chat/completions", _chat("quick", True), "application/json", (200,), False),
    "anthropic_json": (8, "/v1/messages", _anth("quick"), "application/json", (200,), False),
    "anthropic_sse": (6, "/v1/messages", _anth("quick", True), "application/json", (200,), False),
    "responses_json": (5, "/v1/responses", _resp("quick"), "application/json", (200,), False),
    "responses_sse": (5, "/v1/responses", _resp("quick", True), "application/json", (200,), False),
    "count_tokens": (3, "/v1/messages/count_tokens", _anth("quick"), "application/json", (200,), False),
    "fallback_500": (5, "/v1/chat/completions", _chat("flaky"), "application/json", (200,), False),
    "fallback_429_long": (3, "/v1/chat/completions", _chat("limited", True), "application/json", (200,), False),
    "malformed_sse": (3, "/v1/chat/completions", _chat("garbled", True), "application/json", (200,), False),
    "reset_mid": (2, "/v1/chat/completions", _chat("resets", True), "application/json", (200,), False),
    "hang_up_mid_stream": (4, "/v1/chat/completions", _chat("slow", True), "application/json", (200,), True),
    "bad_json": (3, "/v1/chat/completions", b"{not json", "application/json", (400,), False),
    "stream_string": (
        2,
        "/v1/chat/completions",
        orjson.dumps({"model": "quick", "messages": MSG, "stream": "false"}),
        "application/json",
        (400,),
        False,
    ),
    "text_plain": (2, "/v1/chat/completions", _chat("quick"), "text/plain", (415,), False),
    "unknown_route": (2, "/v1/chat/completions", _chat("nope"), "application/json", (404,), False),
    "too_large": (
        1,
        "/v1/messages",
        b'{"model":"quick","messages":[]' + b" " * 70_000 + b"}",
        "application/json",
        (413,),
        False,
    ),
}


def _config(port: int) -> dict[str, object]:
    client = {
        "base_url": f"http://127.0.0.1:{port}/v1",
        "timeout": {"connect": 1, "read": 2, "total": 5},
        "max_retries": 1,
        "retry": {"initial_delay_s": 0.005, "max_delay_s": 0.01, "jitter": 0, "max_retry_after_s": 0.05},
        "circuit_breaker": {"failures": 0},
        "health_check": {"enabled": False},
    }
    names = {
        "quick": "quick",
        "slow": "slow",
        "backup": "quick",
        "down": "fail-500",
        "long429": "fail-429-long",
        "garbled": "malformed-sse",
        "resets": "reset-mid",
    }
    return {
        "llm_clients": {"up": client},
        "targets": {
            k: {"client": "up", "model": v, "price": {"input_per_mtok": 1, "output_per_mtok": 2}}
            for k, v in names.items()
        },
        "routes": {
            "quick": {"type": "passthrough", "target": "quick"},
            "slow": {"type": "passthrough", "target": "slow"},
            "flaky": {"type": "random", "targets": ["down", "backup"], "weights": [1, 0]},
            "limited": {"type": "random", "targets": ["long429", "backup"], "weights": [1, 0]},
            "garbled": {"type": "passthrough", "target": "garbled"},
            "resets": {"type": "passthrough", "target": "resets"},
        },
        "server": {"limits": {"max_body_bytes": 65536}},
    }


def _proc_stats(pid: int) -> tuple[int, int]:
    """(RSS in KiB, open file descriptors) of a process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _read_response(reader: asyncio.StreamReader, hang_up: bool) -> tuple[int, bool]:
    """Status, and whether the connection may be reused."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if hang_up:
                return status, False
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
    else:
        pos = lower.find(b"content-length:")
        await reader.readexactly(int(lower[pos + 15 : lower.find(b"\r\n", pos)]))
    return status, b"connection: close" not in lower


async def _phase(port: int, kinds: list[str], concurrency: int, tally: Counter[str], bad: Counter[str]) -> None:
    queue = list(reversed(kinds))

    async def worker() -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while queue:
            kind = queue.pop()
            _, path, body, ctype, expected, hang_up = MIX[kind]
            if conn is None:
                conn = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = conn
            writer.write(
                f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: {ctype}\r\n"
                f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            try:
                status, reusable = await asyncio.wait_for(_read_response(reader, hang_up), 30)
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                status, reusable = 0, False
            tally[kind] += 1
            if status not in expected:
                bad[f"{kind}:{status}"] += 1
            if not reusable:
                writer.close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _kinds(n: int, rng: random.Random) -> list[str]:
    names = list(MIX)
    return rng.choices(names, weights=[MIX[k][0] for k in names], k=n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--checkpoints", type=int, default=5, help="RSS/fd readings during the run")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args()

    upstream = FakeUpstream([FakeModel("quick"), FakeModel("slow", per_chunk_s=0.02)])
    upstream.retry_after = "0.01"
    fake = serve_fake(upstream)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="switchyard-soak-"))
    (tmp / "soak.yaml").write_text(yaml.safe_dump(_config(fake.port)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(tmp / "soak.yaml"), "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "error"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rng = random.Random(16)
    tally: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    readings: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("proxy did not start") from None
                time.sleep(0.1)

        def quiet_reading(done: int, label: str) -> dict[str, Any]:
            time.sleep(1.0)  # every client connection closed; let the proxy settle
            rss, fds = _proc_stats(proc.pid)
            row = {"requests": done, "rss_mib": round(rss / 1024, 1), "fds": fds, "label": label}
            readings.append(row)
            print(f"  {label:>10}: {done:>7} requests, RSS {row['rss_mib']} MiB, {fds} fds", flush=True)
            return row

        started = time.monotonic()
        asyncio.run(_phase(port, _kinds(args.warmup, rng), args.concurrency, tally, bad))
        warm = quiet_reading(args.warmup, "warm-up")
        left = args.requests - args.warmup
        step = max(1, left // args.checkpoints)
        done = args.warmup
        while done < args.requests:
            n = min(step, args.requests - done)
            asyncio.run(_phase(port, _kinds(n, rng), args.concurrency, tally, bad))
            done += n
            last = quiet_reading(done, "end" if done >= args.requests else "checkpoint")
        wall = time.monotonic() - started - len(readings)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        fake.stop()

    growth = (last["rss_mib"] - warm["rss_mib"]) / warm["rss_mib"] * 100
    # Idle upstream connections stay pooled (httpx closes expired ones lazily), so the count
    # moves with the pool by up to the load's concurrency; a leak grows with the requests.
    fd_leak = last["fds"] - warm["fds"] > args.concurrency
    result = {
        "requests": done,
        "concurrency": args.concurrency,
        "wall_s": round(wall, 1),
        "requests_per_s": round(done / wall, 1),
        "rss_warm_mib": warm["rss_mib"],
        "rss_end_mib": last["rss_mib"],
        "rss_growth_pct": round(growth, 2),
        "fds_warm": warm["fds"],
        "fds_end": last["fds"],
        "unexpected_statuses": dict(bad),
        "mix": dict(tally),
        "readings": readings,
        "fd_leak": fd_leak,
        "verdict": "pass" if growth < 10 and not fd_leak and not bad else "FAIL",
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("readings", "mix")}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["verdict"] == "pass" else 1


if __name__ == "__main__":
    raise SystemExit(main())
