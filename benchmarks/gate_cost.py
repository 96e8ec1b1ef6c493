"""What the proxy's gate costs per request: Host, Origin, content type and API key checks.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/gate_cost.py

Times :meth:`switchyard.server.guard.Gate.admit` in-process on the headers of a typical SDK
request (best of 9 runs of 50,000), without keys (the Host check) and with one key (hashing the
presented key and setting its context). Per-request cost only; the end-to-end proxy numbers are
``benchmarks/proxy_overhead.py``'s.
"""

from __future__ import annotations

import asyncio
import time

from switchyard.config.server import ApiKeyConfig, ServerConfig
from switchyard.server.auth import KeyRing, hash_key
from switchyard.server.guard import Gate

HEADERS = {
    "host": "127.0.0.1:4000",
    "content-type": "application/json",
    "authorization": "Bearer sy-benchmark-key",
    "user-agent": "OpenAI/Python 1.99",
    "accept": "application/json",
}


async def _run(gate: Gate, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await gate.admit("POST", "/v1/chat/completions", HEADERS)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    keys = [ApiKeyConfig(name="bench", hash=hash_key("sy-benchmark-key"))]
    gates = {
        "no keys (Host check)": Gate(ServerConfig(), KeyRing([])),
        "one key": Gate(ServerConfig(api_keys=keys), KeyRing(keys)),
    }
    for name, gate in gates.items():
        best = min(asyncio.run(_run(gate, 50_000)) for _ in range(9))
        print(f"{name:>22}: {best:.2f} µs per request")


if __name__ == "__main__":
    main()
