"""What ``POST /v1/decision`` adds over ``GET /health``: p50 at c=1, for a passthrough and a stage route.

One ``switchyard serve`` process on 127.0.0.1 (the CLI code path, logging at WARNING) and this
script as the client, one keep-alive connection. ``/health`` is the floor every request pays
(HTTP parsing, the gate, dispatch, a small JSON answer); the decision's extra is reading and
decoding the agent-like body of benchmarks/proxy_overhead.py, session identity, the router and
its decision record. No upstream is called (a decision makes no answer call; the stage route
asks no judge), so the config points at a closed port.

The three requests are measured in interleaved blocks (health, passthrough, stage, health, …),
so that a machine whose load changes during the run shifts all three alike; the p50 of each is
over every block.

Usage:
    python benchmarks/decision_endpoint.py                 # 10 blocks of 300 requests each
    python benchmarks/decision_endpoint.py --blocks 3 --per-block 200   # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
sys.path.insert(0, str(HERE))

from proxy_overhead import BODY  # noqa: E402

CONFIG = {
    "llm_clients": {"local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
    "targets": {
        "efficient": {"client": "local", "model": "bench-efficient"},
        "capable": {"client": "local", "model": "bench-capable"},
    },
    "routes": {
        "fast": {"type": "passthrough", "target": "efficient", "fallbacks": ["capable"]},
        "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": 2},
    },
}


def _request(port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{extra}"
    if body:
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> float:
    start = time.perf_counter()
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    if head[9:12] != b"200":
        raise RuntimeError(f"not 200: {head[:200]!r}")
    lower = head.lower()
    pos = lower.find(b"content-length:")
    await reader.readexactly(int(lower[pos + 15 : lower.find(b"\r\n", pos)]))
    return time.perf_counter() - start


async def measure(port: int, blocks: int, per_block: int) -> dict[str, list[float]]:
    body = orjson.dumps({**BODY, "model": "fast"})
    stage = orjson.dumps({**BODY, "model": "agent"})
    requests = {
        "health": _request(port, "GET", "/health"),
        "decision passthrough": _request(port, "POST", "/v1/decision", body),
        "decision stage_router": _request(
            port, "POST", "/v1/decision", stage, {"x-switchyard-session-id": "bench-session"}
        ),
    }
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out: dict[str, list[float]] = {name: [] for name in requests}
    for req in requests.values():  # warm-up
        for _ in range(100):
            await _one(reader, writer, req)
    for _ in range(blocks):
        for name, req in requests.items():
            out[name] += [await _one(reader, writer, req) for _ in range(per_block)]
    writer.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--per-block", type=int, default=300)
    parser.add_argument("--port", type=int, default=0, help="proxy port (default: a free one)")
    args = parser.parse_args()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", args.port))
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
            samples = asyncio.run(measure(port, args.blocks, args.per_block))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    p50 = {name: statistics.median(v) * 1000 for name, v in samples.items()}
    floor = p50["health"]
    print(f"c=1, {args.blocks} blocks x {args.per_block} requests, body {len(orjson.dumps(BODY))} bytes")
    print(f"{'request':<24}{'p50 ms':>10}{'added over /health':>22}")
    for name, value in p50.items():
        added = "" if name == "health" else f"{value - floor:+.3f} ms"
        print(f"{name:<24}{value:>10.3f}{added:>22}")
    print(json.dumps({"p50_ms": p50, "load_avg": os.getloadavg(), "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
