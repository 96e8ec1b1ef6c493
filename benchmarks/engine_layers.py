"""CPU per proxied JSON request, split into the HTTP round trip and the engine above it.

The shared harness (``../shared/bench``) sees one number per request: the whole process's CPU.
This driver takes the server out and asks, in one process, what the engine adds to the upstream
call it makes. It runs, interleaved, for the body the harness sends (``--body``, default the
harness's own ``body-json.json`` shape):

* ``pool``: the floor. The body is parsed, its ``model`` replaced, it is serialised and POSTed
  through the engine's own lean HTTP/1.1 pool, and the answer is parsed. Every relay does at
  least this.
* ``dispatch``: :meth:`Switchyard.dispatch <switchyard.api.Switchyard.dispatch>` of the same
  request on a passthrough route (what ``switchyard serve`` calls per request), with the proxy's
  decision-record sinks (metrics, the USD ledger) attached as ``serve`` attaches them, and the
  record released after the reply as the server releases it.

``dispatch - pool`` is what routing, validation, the session id, reliability bookkeeping, the
decision record and its sinks cost per request: the part of the proxy that a leaner engine can
cut. The upstream is :mod:`benchmarks.rawhttp`'s lean server in a child process (pinned to
another CPU when there are two), so its CPU is not counted::

    python benchmarks/engine_layers.py                      # 5000 calls x 4 rounds
    python benchmarks/engine_layers.py --calls 2000 --rounds 6 --cpu 1

CPU time is ``time.process_time()`` of this process, so a busy machine moves it less than wall
time, but it still moves: compare the two rows of one run, not runs of different days. Results
and the command go to ``benchmarks/results/engine_layers-<time>.json``; see docs/benchmarks.md.
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

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

_BODY = {
    "model": "bench-json",
    "messages": [
        {
            "role": "system",
            "content": "You are a careful senior software engineer helping a colleague. " * 7,
        },
        {"role": "user", "content": "Our request router adds noticeable latency; where should we look first? " * 3},
    ],
    "temperature": 0.2,
    "max_tokens": 256,
    "stream": False,
}
"""The shape of ``../shared/bench``'s JSON body: a system prompt of about 460 characters and a
user message of about 260."""

_UPSTREAM = """
import asyncio, sys
sys.path.insert(0, {here!r})
import rawhttp
async def main():
    await rawhttp.serve_upstream("127.0.0.1", {port}, 50)
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

_CONFIG = """
llm_clients:
  c0: {{format: openai_chat, base_url: "http://127.0.0.1:{port}/v1"}}
targets:
  t0: {{client: c0, model: bench}}
routes:
  bench-json: {{type: passthrough, target: t0}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_upstream(port: int, cpu: int | None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-c", _UPSTREAM.format(here=str(HERE), port=port)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise SystemExit("the lean upstream did not start")
    return proc


async def _measure(config: Path, body: bytes, port: int, calls: int, rounds: int) -> dict[str, list[float]]:
    import orjson

    from switchyard import Switchyard
    from switchyard.clients.h1 import H1Pool
    from switchyard.server.app import SwitchyardApp

    sy = Switchyard.from_config(config)
    SwitchyardApp(sy)  # attaches the proxy's sinks (metrics, budgets) as ``serve`` does
    headers = {
        "host": "127.0.0.1:4000",
        "content-type": "application/json",
        "authorization": "Bearer sk-bench",
        "content-length": str(len(body)),
    }
    pool = H1Pool(f"http://127.0.0.1:{port}/v1/chat/completions", {"content-type": "application/json"})

    async def relay() -> None:
        request = orjson.loads(body)
        request["model"] = "bench"
        answer = await pool.post(orjson.dumps(request), read_timeout=30.0)
        orjson.loads(answer.content)

    async def dispatch() -> None:
        reply = await sy.dispatch("POST", "/v1/chat/completions", body, headers, hold_record=True)
        if reply.status != 200:
            raise SystemExit(f"dispatch answered {reply.status}: {reply.body[:200]!r}")
        reply.released()

    kinds = {"pool": relay, "dispatch": dispatch}
    for call in kinds.values():  # warm-up: connections, the engine, caches
        for _ in range(300):
            await call()
    found: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(rounds):
        for name, call in kinds.items():
            started = time.process_time()
            for _ in range(calls):
                await call()
            found[name].append((time.process_time() - started) / calls * 1e6)
    await pool.aclose()
    await sy.aclose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000, help="calls per round and kind (default 5000)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each kind once per round (default 4)")
    parser.add_argument("--body", type=Path, help="a Chat Completions JSON body (default: the harness's shape)")
    parser.add_argument(
        "--cpu", type=int, help="pin this process to this CPU (the upstream goes to another; default: no pinning)"
    )
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    body = args.body.read_bytes() if args.body else json.dumps(_BODY).encode()
    upstream_cpu = None
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
        others = sorted(set(range(os.cpu_count() or 1)) - {args.cpu})
        upstream_cpu = others[0] if others else None
    port = _free_port()
    upstream = _start_upstream(port, upstream_cpu)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "layers.yaml"
            config.write_text(_CONFIG.format(port=port))
            try:
                import uvloop

                found = uvloop.run(_measure(config, body, port, args.calls, args.rounds))
            except ImportError:
                found = asyncio.run(_measure(config, body, port, args.calls, args.rounds))
    finally:
        upstream.kill()
        upstream.wait()
    summary = {name: {"min_us": min(v), "median_us": statistics.median(v), "rounds_us": v} for name, v in found.items()}
    engine = [d - p for d, p in zip(found["dispatch"], found["pool"], strict=True)]
    summary["engine"] = {"min_us": min(engine), "median_us": statistics.median(engine), "rounds_us": engine}
    for name, row in summary.items():
        rounds = " / ".join(f"{x:.0f}" for x in row["rounds_us"])
        print(f"{name:9} median {row['median_us']:6.1f} us CPU per call   (rounds: {rounds})")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"engine_layers-{time.strftime('%Y%m%d-%H%M%S')}.json"
    command = " ".join(["python", "benchmarks/engine_layers.py", *sys.argv[1:]])
    out.write_text(json.dumps({"command": command, "body_bytes": len(body), "results": summary}, indent=1) + "\n")
    print(f"wrote {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
