"""What a hostile upstream or a caller that never reads costs the proxy (docs/security.md,
"Hostile network"): memory and upstream bytes, not speed.

    PYTHONPATH=. .venv/bin/python benchmarks/hostile_upstream.py [--no-write-deadline]

1. A caller that never reads a 64 MiB stream (64 KiB receive buffer): how much of the stream the
   proxy takes from the upstream, its peak RSS growth, and whether the upstream write ends
   (``server.client_timeouts.write_s`` = 1 s here).
2. A gzip bomb (32 MiB of JSON in ~32 KiB on the wire) answering a JSON request: the reply's
   status and size, and the peak RSS growth.

Uses the raw-socket upstream of the tests (``tests/_raw_upstream.py``), on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _raw_upstream import RawUpstream, http_response

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread

TOTAL = 64 * 1024 * 1024


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _endless(_: bytes) -> Iterator[bytes]:
    yield http_response(200, {"content-type": "text/event-stream"}, length=False)
    delta = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    delta["choices"] = [{"index": 0, "delta": {"content": "a" * 16384}, "finish_reason": None}]  # type: ignore[assignment]
    event = f"data: {json.dumps(delta)}\n\n".encode()
    for _ in range(TOTAL // len(event) + 1):
        yield event


def _make_bomb() -> bytes:
    message = {"role": "assistant", "content": "a" * (32 * 1024 * 1024)}
    answer = {"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": message}]}
    packed = gzip.compress(json.dumps(answer).encode(), compresslevel=9)
    return http_response(200, {"content-type": "application/json", "content-encoding": "gzip"}, packed)


_BOMB: list[bytes] = []  # built once, before the RSS baseline (building it costs memory too)


def _bomb(_: bytes) -> bytes:
    return _BOMB[0]


def _config(base_url: str) -> dict[str, object]:
    return {
        "llm_clients": {"up": {"base_url": base_url, "max_retries": 0}},
        "targets": {"t": {"client": "up", "model": "m"}},
        "routes": {"r": {"type": "passthrough", "target": "t"}},
        **({"server": {"client_timeouts": {"write_s": 1.0}}} if "--no-write-deadline" not in sys.argv else {}),
    }


def slow_reader() -> str:
    with RawUpstream(_endless) as upstream:
        sy = Switchyard.from_config(_config(upstream.base_url))
        with ServerThread(sy) as server, socket.socket() as caller:
            caller.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            caller.connect(("127.0.0.1", server.port))
            body = json.dumps({"model": "r", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
            head = "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            base = _peak_mib()
            caller.sendall(f"{head}content-length: {len(body)}\r\n\r\n{body}".encode())
            started = time.monotonic()
            ended = upstream.finished.wait(timeout=30)
            took = time.monotonic() - started
            grown = _peak_mib() - base
        sy.close()
    return (
        f"slow reader: upstream write ended={ended} after {took:.1f}s; proxy took {upstream.sent / 2**20:.1f} "
        f"of {TOTAL / 2**20:.0f} MiB; peak RSS +{grown:.1f} MiB"
    )


async def gzip_bomb() -> str:
    """Peak Python allocations while the proxy handles the bomb (tracemalloc: the bomb itself is
    built before tracing starts, so only what the proxy allocates counts)."""
    import tracemalloc

    if not _BOMB:
        _BOMB.append(_make_bomb())
    with RawUpstream(_bomb) as upstream:
        sy = Switchyard.from_config(_config(upstream.base_url))
        body = json.dumps({"model": "r", "messages": [{"role": "user", "content": "hi"}]}).encode()
        tracemalloc.start()
        reply = await sy.dispatch("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        await sy.aclose()
    wire = len(_BOMB[0]) / 1024
    size = len(reply.body) / 2**20
    shown = f"status {reply.status}, reply {size:.2f} MiB, peak allocated {peak:.1f}"
    return f"gzip bomb ({wire:.0f} KiB on the wire): {shown}"


if __name__ == "__main__":
    # Each scenario in a process of its own: peak RSS (ru_maxrss) never goes down.
    if "slow" in sys.argv:
        print(slow_reader())
    elif "bomb" in sys.argv:
        print(asyncio.run(gzip_bomb()), "MiB")
    else:
        for scenario in ("slow", "bomb"):
            subprocess.run([sys.executable, __file__, scenario, *sys.argv[1:]], check=True)
