"""Instructions per proxied request, counted by callgrind: a measure that load does not move.

On a shared machine wall-clock and CPU time swing by 2x from run to run; the number of
instructions the proxy executes does not. This driver runs ``switchyard serve`` (the command the
shared harness in ``../shared/bench`` runs: passthrough routes to an OpenAI Chat upstream, the
default log level) under ``valgrind --tool=callgrind``, sends it N sequential requests (c=1,
one keep-alive connection) to the lean upstream of ``benchmarks/rawhttp.py`` (canned answers,
the SSE stream of 50 events arriving in one piece, as nginx's static file does), stops it with
SIGINT and reads the instruction total. Two runs with different N, subtracted, give
instructions per request without start-up and shutdown::

    python benchmarks/hot_path_instructions.py                        # json + sse, N = 200 and 1200
    python benchmarks/hot_path_instructions.py --modes json --requests 100 600
    python benchmarks/hot_path_instructions.py --src /tmp/base        # another tree (A/B)
    python benchmarks/hot_path_instructions.py --keep /tmp/cg         # keep the callgrind files
    python benchmarks/hot_path_instructions.py --import-only          # `import switchyard.server.app`
    python benchmarks/hot_path_instructions.py --modes sse-drip --requests 20 60   # events 2 ms apart

``sse-drip`` is the same stream with its events 2 ms apart (:data:`DRIP_S`), an event per upstream
read as a model server streams: what each event costs on its own (timers, task steps, writes).

``agent-1``, ``agent-50`` and ``agent-200`` send the agent-shaped Chat bodies of
``benchmarks/agent_sized.py`` (20 tool schemas, 1/50/200 turns: about 21, 81 and 261 KiB, the
newest tool result new text every request) to a passthrough route; ``agent-stage-N`` the same
bodies to a stage-router route (``compat: nvidia``); ``agent-anth-stage-N`` the same conversations
as Claude Code sends them (Anthropic Messages to ``/v1/messages``, ``benchmarks/anthropic_agent.py``)::

    python benchmarks/hot_path_instructions.py --modes agent-1 agent-200 agent-stage-200 --requests 20 80
    python benchmarks/hot_path_instructions.py --modes agent-anth-stage-200 --requests 20 80

``--import-only`` counts the instructions of ``python -c "import switchyard.server.app"`` and
of ``python -c pass`` (the interpreter's own start-up), with byte code already compiled.
Results and the command go to ``benchmarks/results/hot_path_instructions-<time>[-label].json``;
see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import rawhttp  # noqa: E402

ROUTE = "bench"
SSE_CONTENT_EVENTS = 46  # + role, finish, usage and [DONE]: 50 events, as in ../shared/bench
DRIP_S = 0.002  # ``sse-drip``: the gap between two events (../shared/bench's sse-d50 has 2 ms)

# The shared harness's request: a system prompt and a user turn (~0.9 KB).
_SYSTEM = (
    "You are a careful senior software engineer helping a colleague. Answer concisely, cite the "
    "files you rely on, prefer small reversible changes, and say explicitly when you are unsure. "
    "When you propose code, keep it minimal and explain the trade-offs in one or two sentences. "
    "Never invent APIs; if a function might not exist, say so and suggest how to check. Use the "
    "project's existing style and naming. Keep answers under 200 words unless asked for more detail."
)
_USER = (
    "Our request router adds noticeable latency under load. Given a proxy that parses each JSON "
    "request, picks a backend by model name and forwards the body, what are the three most likely "
    "sources of overhead and how would you measure each one on a two-core machine?"
)


MODES = [
    "json",
    "sse",
    "sse-drip",
    *(f"agent-{k}{n}" for k in ("", "stage-", "anth-stage-") for n in (1, 50, 200)),
]


def _post(port: int, data: bytes, path: str = "/v1/chat/completions") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "content-type: application/json\r\nauthorization: Bearer sk-bench\r\n"
        f"user-agent: hot-path-bench\r\naccept: */*\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def mode_requests(port: int, mode: str) -> list[bytes]:
    """The requests of ``mode``, sent in turn."""
    if mode.startswith("agent-"):
        import agent_sized

        *_, turns = mode.split("-")
        route = agent_sized.ROUTES["stage" if "stage-" in mode else "passthrough"]
        bodies = agent_sized.agent_bodies(int(turns), route)
        if mode.startswith("agent-anth-"):
            # The same conversations as Claude Code sends them (Anthropic Messages, its cache breakpoint).
            import anthropic_agent

            return [
                _post(port, json.dumps(anthropic_agent.as_anthropic(json.loads(b))).encode(), "/v1/messages")
                for b in bodies
            ]
        return [_post(port, body) for body in bodies]
    return [request_bytes(port, mode != "json")]


def request_bytes(port: int, stream: bool) -> bytes:
    """One POST /v1/chat/completions as a client sends it."""
    body: dict[str, Any] = {
        "model": ROUTE,
        "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER}],
        "temperature": 0.2,
        "max_tokens": 256,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return _post(port, json.dumps(body).encode())


def _read_response(sock: socket.socket, buf: bytearray) -> int:
    """Reads one HTTP/1.1 response (content-length or chunked) from ``sock``; returns its status."""

    def fill() -> None:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("proxy closed the connection")
        buf.extend(data)

    while (end := buf.find(b"\r\n\r\n")) < 0:
        fill()
    head = bytes(buf[:end]).lower()
    del buf[: end + 4]
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head:
        while True:
            while (eol := buf.find(b"\r\n")) < 0:
                fill()
            size = int(bytes(buf[:eol]).split(b";")[0], 16)
            while len(buf) < eol + 2 + size + 2:
                fill()
            del buf[: eol + 2 + size + 2]
            if size == 0:
                return status
    match = re.search(rb"content-length:\s*(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(buf) < length:
        fill()
    del buf[:length]
    return status


def _config(workdir: Path, upstream_port: int) -> Path:
    """The YAML that ../shared/bench/targets/ours.py writes for one passthrough route."""
    path = workdir / "bench.yaml"
    path.write_text(
        "llm_clients:\n"
        f"  c0: {{format: openai_chat, base_url: http://127.0.0.1:{upstream_port}/v1}}\n"
        "targets:\n"
        "  t0: {client: c0, model: gpt-4o-mini}\n"
        "  t1: {client: c0, model: gpt-4o-mini-efficient}\n"
        "routes:\n"
        f"  {ROUTE}: {{type: passthrough, target: t0}}\n"
        "  agent: {type: passthrough, target: t0}\n"
        "  agent-stage: {type: stage_router, capable: t0, efficient: t1, picker: efficient_first,"
        " confidence_threshold: 0.5, compat: nvidia}\n"
    )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Upstream:
    """The lean upstream on its own event loop thread (not traced: only the proxy is)."""

    def __init__(self, drip_s: float | None = None) -> None:
        self.port = _free_port()
        self._drip_s = drip_s
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("upstream did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        serving = rawhttp.serve_upstream("127.0.0.1", self.port, SSE_CONTENT_EVENTS, drip_s=self._drip_s)
        self._loop.run_until_complete(serving)
        self._ready.set()
        self._loop.run_forever()


def _total_ir(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {path}")


def count(src: Path, mode: str, n: int, upstream: Upstream, out: Path, warmup: int) -> int:
    """Instructions of one proxy process that served ``warmup + n`` requests of ``mode``."""
    workdir = Path(tempfile.mkdtemp(prefix="hotpath-"))
    cfg = _config(workdir, upstream.port)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    argv += ["-m", "switchyard", "serve", "-c", str(cfg), "--port", str(port)]
    # cwd outside any tree: ``-m`` puts the working directory ahead of PYTHONPATH.
    proc = subprocess.Popen(argv, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Under valgrind start-up takes tens of seconds; on a machine shared with other jobs,
        # many minutes (SWITCHYARD_BENCH_START_S raises the wait).
        deadline = time.monotonic() + float(os.environ.get("SWITCHYARD_BENCH_START_S", "600"))
        while True:  # connection refused costs the proxy nothing: it is not listening yet
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=3600)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"proxy did not start (exit {proc.returncode})") from None
                time.sleep(0.2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        requests = mode_requests(port, mode)
        buf = bytearray()
        with sock:
            for i in range(warmup + n):
                sock.sendall(requests[i % len(requests)])
                status = _read_response(sock, buf)
                if status != 200:
                    raise RuntimeError(f"proxy answered {status}")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=3600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _total_ir(out)


def count_import(src: Path, out: Path) -> dict[str, int]:
    """Instructions of ``import switchyard.server.app`` and of a bare interpreter."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    # Compiled byte code, as an installed package has (PYTHONDONTWRITEBYTECODE would otherwise
    # make every run compile the sources).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "switchyard")], check=True, env=env)
    result = {}
    for name, code in (("python_c_pass", "pass"), ("import_server_app", "import switchyard.server.app")):
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code]
        # cwd outside any tree: ``-c`` puts the working directory ahead of PYTHONPATH.
        subprocess.run(argv, env=env, cwd=out.parent, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result[name] = _total_ir(out)
    result["import_only"] = result["import_server_app"] - result["python_c_pass"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", default=["json", "sse"], choices=MODES)
    parser.add_argument("--requests", nargs=2, type=int, default=[200, 1200], metavar=("N1", "N2"))
    parser.add_argument("--warmup", type=int, default=20, help="requests before the N counted (default 20)")
    parser.add_argument("--src", type=Path, default=ROOT, help="tree with the switchyard package (default: this one)")
    parser.add_argument("--keep", type=Path, help="folder to keep the callgrind output files in")
    parser.add_argument("--import-only", action="store_true", help="count `import switchyard.server.app` only")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    keep = args.keep or Path(tempfile.mkdtemp(prefix="hotpath-cg-"))
    keep.mkdir(parents=True, exist_ok=True)
    # Absolute: the proxy runs in a temporary folder, where a relative ``--src .`` would name
    # nothing and the venv's installed switchyard would be measured instead.
    args.src = args.src.resolve()
    result: dict[str, Any] = {"command": " ".join(sys.argv), "src": str(args.src)}
    if args.import_only:
        result["import"] = count_import(args.src, keep / "import.out")
        print(json.dumps(result["import"], indent=2))
    else:
        env = {**os.environ, "PYTHONPATH": str(args.src)}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.src / "switchyard")], check=True, env=env)
        upstreams = {"plain": Upstream(), "drip": Upstream(DRIP_S) if "sse-drip" in args.modes else None}
        n1, n2 = args.requests
        for mode in args.modes:
            upstream = upstreams["drip" if mode == "sse-drip" else "plain"]
            assert upstream is not None
            ir1 = count(args.src, mode, n1, upstream, keep / f"{mode}-{n1}.out", args.warmup)
            ir2 = count(args.src, mode, n2, upstream, keep / f"{mode}-{n2}.out", args.warmup)
            per = (ir2 - ir1) / (n2 - n1)
            result[mode] = {f"ir_{n1}": ir1, f"ir_{n2}": ir2, "ir_per_request": round(per)}
            print(f"{mode}: {per:,.0f} instructions per request ({n1}: {ir1:,}, {n2}: {ir2:,})", flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"hot_path_instructions-{stamp}{'-' + args.label if args.label else ''}.json"
    (HERE / "results" / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote benchmarks/results/{name}")


if __name__ == "__main__":
    main()
