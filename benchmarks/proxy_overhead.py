"""What the proxy adds: latency (p50/p99), requests/s and proxy CPU per request.

Three processes on 127.0.0.1: a lean upstream (benchmarks/rawhttp.py, canned answers, no JSON
parsing), the Switchyard proxy (``switchyard serve`` code path: uvicorn, uvloop/httptools when
installed, one passthrough route, logging at WARNING), and this script as the load client. Every
scenario runs twice, straight against the upstream ("direct") and through the proxy; the
difference is the proxy's cost. Proxy CPU is read from /proc for the proxy process.

Usage:
    python benchmarks/proxy_overhead.py                      # full run, table + JSON in results/
    python benchmarks/proxy_overhead.py --quick              # a smoke run
    python benchmarks/proxy_overhead.py --pin                # pin processes to separate cores
    python benchmarks/proxy_overhead.py --profile out.prof   # also cProfile the proxy (slower)
    python benchmarks/proxy_overhead.py --api anthropic      # Anthropic client and upstream, as
                                                             # Claude Code (anthropic-version/-beta)
    git archive BASE_REV switchyard | tar -x -C /tmp/base && \
    python benchmarks/proxy_overhead.py --baseline-src /tmp/base # A/B against an older commit

See docs/benchmarks.md for the numbers and what they mean.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rawhttp  # noqa: E402

ROUTE = "bench"

# An agent-like request: system prompt, a few turns with a tool call and its result, two tools.
_SYSTEM = "You are a careful coding agent. Work in small steps, run the tests, explain briefly. " * 12
BODY: dict[str, Any] = {
    "model": ROUTE,
    "messages": [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": "The test test_parse_dates fails on leap years. Find and fix the bug."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run_shell", "arguments": '{"cmd": "pytest -x tests/test_dates.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "E   AssertionError: 2024-02-29 != 2024-03-01\n" * 8},
        {"role": "assistant", "content": "The loop bound skips February 29th; let me look at the parser."},
        {"role": "user", "content": "Go ahead."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "run_shell",
                "description": "Run a shell command in the repository and return its output.",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "edit_file",
                "description": "Replace a span of a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
                    "required": ["path", "old", "new"],
                },
            },
        },
    ],
    "temperature": 0.2,
    "max_tokens": 1024,
}

# The same conversation in Anthropic Messages form, sent the way Claude Code and the Anthropic
# SDKs send it: with ``anthropic-version`` (every request) and ``anthropic-beta``.
ANTHROPIC_BODY: dict[str, Any] = {
    "model": ROUTE,
    "system": _SYSTEM,
    "messages": [
        {"role": "user", "content": BODY["messages"][1]["content"]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "run_shell",
                    "input": {"cmd": "pytest -x tests/test_dates.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": BODY["messages"][3]["content"]}],
        },
        {"role": "assistant", "content": BODY["messages"][4]["content"]},
        {"role": "user", "content": "Go ahead."},
    ],
    "tools": [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in BODY["tools"]
    ],
    "temperature": 0.2,
    "max_tokens": 1024,
}
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}


# -- child processes ---------------------------------------------------------------------------------


def _pin(cpus: str | None) -> None:
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def _fast_loop() -> None:
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


def role_upstream(args: argparse.Namespace) -> None:
    _pin(args.cpus)
    _fast_loop()

    async def main() -> None:
        server = await rawhttp.serve_upstream("127.0.0.1", 0, args.sse_events, args.api)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def role_proxy(args: argparse.Namespace) -> None:
    _pin(args.cpus)
    import logging

    if args.http_lib == "httpx2":
        # Experiment only: httpx2 has httpx's interface; aliasing it shows what its connection
        # pool would change without touching switchyard/clients.
        import httpx2

        sys.modules["httpx"] = httpx2

    import uvicorn

    from switchyard._listen import bind
    from switchyard.api import Switchyard
    from switchyard.server.app import create_app

    logging.basicConfig(level=logging.WARNING)
    fmt = "anthropic_messages" if args.api == "anthropic" else "openai_chat"
    config = {
        "llm_clients": {"up": {"format": fmt, "base_url": f"http://127.0.0.1:{args.upstream_port}/v1"}},
        "targets": {"t": {"client": "up", "model": ROUTE, "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}}},
        "routes": {ROUTE: {"type": "passthrough", "target": "t"}},
    }
    sy = Switchyard.from_config(config)
    sock = bind("127.0.0.1", 0)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    # The same server settings as ``switchyard serve`` (see switchyard/server/runner.py).
    server = uvicorn.Server(
        uvicorn.Config(create_app(sy), log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=30)
    )
    if args.profile:
        import cProfile
        import signal

        profiler = cProfile.Profile(time.process_time)  # CPU, not wall: the machine may be busy

        def stop(*_: Any) -> None:
            profiler.disable()
            profiler.dump_stats(args.profile)
            os._exit(0)

        signal.signal(signal.SIGTERM, stop)
        profiler.enable()
    server.run(sockets=[sock])


def _spawn(role: str, *extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--role", role, *extra], stdout=subprocess.PIPE, text=True, cwd=HERE.parent, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{role} did not start: {line!r}")
    return proc, int(line.split()[1])


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- measurement -----------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stats(run: rawhttp.Run) -> dict[str, float]:
    last = [s.last_byte * 1e3 for s in run.samples]
    first = [s.first_byte * 1e3 for s in run.samples]
    return {
        "n": len(run.samples),
        "errors": run.errors,
        "rps": len(run.samples) / run.wall_s,
        "p50_ms": statistics.median(last),
        "p99_ms": _pct(last, 0.99),
        "mean_ms": statistics.fmean(last),
        "ttfb_p50_ms": statistics.median(first),
        "ttfb_p99_ms": _pct(first, 0.99),
    }


async def _scenario(port: int, body: bytes, concurrency: int, requests: int, api: str = "openai") -> rawhttp.Run:
    anthropic = api == "anthropic"
    return await rawhttp.load(
        "127.0.0.1",
        port,
        "/v1/messages" if anthropic else "/v1/chat/completions",
        body,
        concurrency=concurrency,
        requests=requests,
        warmup=0,
        headers=ANTHROPIC_HEADERS if anthropic else None,
    )


def _spawn_proxies(args: argparse.Namespace, up_port: int, pin: bool) -> dict[str, tuple[subprocess.Popen[str], int]]:
    proxy_args = ["--upstream-port", str(up_port), "--http-lib", args.http_lib, "--api", args.api]
    proxy_args += ["--cpus", "1"] if pin else []
    if args.profile:
        proxy_args += ["--profile", args.profile]
    proxies = {"proxy": _spawn("proxy", *proxy_args)}
    if args.baseline_src:
        # The same proxy code path, importing switchyard from another source tree (e.g. an
        # export of an older commit): both builds run interleaved, under the same conditions.
        env = {**os.environ, "PYTHONPATH": str(Path(args.baseline_src).resolve())}
        plain = [a for a in proxy_args if a not in ("--profile", args.profile)]
        proxies["baseline"] = _spawn("proxy", *plain, env=env)
    return proxies


def measure(args: argparse.Namespace) -> dict[str, Any]:
    cpus = os.cpu_count() or 1
    pin = args.pin and cpus >= 4
    upstream, up_port = _spawn(
        "upstream", "--sse-events", str(args.sse_events), "--api", args.api, *(["--cpus", "2"] if pin else [])
    )
    procs: list[subprocess.Popen[str]] = [upstream]
    results: list[dict[str, Any]] = []
    try:
        proxies = _spawn_proxies(args, up_port, pin)
        procs += [proc for proc, _ in proxies.values()]
        if pin:
            _pin(",".join(str(c) for c in range(3, cpus)))
        _fast_loop()
        ports = {"direct": up_port, **{name: port for name, (_, port) in proxies.items()}}
        for mode in args.modes:
            base = ANTHROPIC_BODY if args.api == "anthropic" else BODY
            body = json.dumps({**base, "stream": mode == "sse"}).encode()
            for concurrency in args.concurrency:
                n = args.requests if concurrency == 1 else args.requests * 2
                per_round = max(concurrency, n // args.rounds)
                for port in ports.values():  # warm up connections, pools and caches
                    asyncio.run(_scenario(port, body, concurrency, max(concurrency, per_round // 5), args.api))
                runs = {who: rawhttp.Run() for who in ports}
                cpu: dict[str, list[float]] = {who: [] for who in proxies}
                for _ in range(args.rounds):
                    # Interleaved rounds: a burst of load on the machine hits every build alike.
                    for who, port in ports.items():
                        pid = proxies[who][0].pid if who in proxies else None
                        cpu0 = None if pid is None else _cpu_seconds(pid)
                        run = asyncio.run(_scenario(port, body, concurrency, per_round, args.api))
                        cpu1 = None if pid is None else _cpu_seconds(pid)
                        runs[who].samples += run.samples
                        runs[who].wall_s += run.wall_s
                        runs[who].errors += run.errors
                        if cpu0 is not None and cpu1 is not None:
                            cpu[who].append((cpu1 - cpu0) / len(run.samples) * 1e6)
                d = _stats(runs["direct"])
                for who in proxies:
                    p = _stats(runs[who])
                    row: dict[str, Any] = {
                        "build": who,
                        "mode": mode,
                        "concurrency": concurrency,
                        "direct": d,
                        "proxy": p,
                        "added_p50_ms": p["p50_ms"] - d["p50_ms"],
                        "added_p99_ms": p["p99_ms"] - d["p99_ms"],
                        "added_ttfb_p50_ms": p["ttfb_p50_ms"] - d["ttfb_p50_ms"],
                        "proxy_cpu_us_per_req": statistics.median(cpu[who]) if cpu[who] else None,
                        "proxy_cpu_us_per_req_min": min(cpu[who]) if cpu[who] else None,
                    }
                    results.append(row)
                    print(_row(row), flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {
        "machine": _machine(pin),
        "settings": _settings(args, len(json.dumps(ANTHROPIC_BODY if args.api == "anthropic" else BODY))),
        "results": results,
    }


def _machine(pinned: bool) -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mods = {}
    for name in ("uvloop", "httptools", "uvicorn", "httpx", "pydantic", "orjson"):
        try:
            mods[name] = __import__(name).__version__
        except (ImportError, AttributeError):
            mods[name] = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE, timeout=10
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "pinned": pinned,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "packages": mods,
        "commit": commit,
    }


def _settings(args: argparse.Namespace, body_bytes: int) -> dict[str, Any]:
    return {
        "requests_c1": args.requests,
        "requests_c32": args.requests * 2,
        "sse_events": args.sse_events,
        "rounds": args.rounds,
        "proxy_http_lib": args.http_lib,
        "api": args.api,
        "request_body_bytes": body_bytes,
        "command": " ".join(["python", "benchmarks/proxy_overhead.py", *sys.argv[1:]]),
    }


_HEADER = (
    f"{'build':<8} {'mode':<5} {'conc':>4} │ {'direct p50':>10} {'p99':>7} {'rps':>7} │"
    f" {'proxy p50':>10} {'p99':>7} {'rps':>7} │"
    f" {'added p50':>9} {'p99':>7} {'TTFB+':>7} │ {'CPU/req':>8} {'min':>6}"
)


def _row(r: dict[str, Any]) -> str:
    d, p = r["direct"], r["proxy"]
    cpu, low = r["proxy_cpu_us_per_req"], r["proxy_cpu_us_per_req_min"]
    cpu_s = "n/a" if cpu is None else f"{cpu:.0f}µs"
    low_s = "" if low is None else f"{low:.0f}"
    return (
        f"{r['build']:<8} {r['mode']:<5} {r['concurrency']:>4} │"
        f" {d['p50_ms']:>8.3f}ms {d['p99_ms']:>7.3f} {d['rps']:>7.0f} │"
        f" {p['p50_ms']:>8.3f}ms {p['p99_ms']:>7.3f} {p['rps']:>7.0f} │ {r['added_p50_ms']:>7.3f}ms"
        f" {r['added_p99_ms']:>7.3f} {r['added_ttfb_p50_ms']:>7.3f} │ {cpu_s:>8} {low_s:>6}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["upstream", "proxy"], help=argparse.SUPPRESS)
    parser.add_argument("--upstream-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpus", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=2000, help="requests per scenario at c=1 (twice that at 32)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--modes", nargs="+", default=["json", "sse"], choices=["json", "sse"])
    parser.add_argument("--sse-events", type=int, default=20, help="content events per streamed answer")
    parser.add_argument(
        "--api",
        choices=["openai", "anthropic"],
        default="openai",
        help="client and upstream API: OpenAI Chat Completions, or Anthropic Messages with anthropic-version"
        " and anthropic-beta on every request (as Claude Code sends them)",
    )
    parser.add_argument("--pin", action="store_true", help="pin proxy, upstream and client to separate cores (≥4)")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the proxy into FILE")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per scenario")
    parser.add_argument(
        "--http-lib", choices=["httpx", "httpx2"], default="httpx", help="experiment: the proxy's upstream HTTP library"
    )
    parser.add_argument(
        "--baseline-src", metavar="DIR", help="also run a proxy importing switchyard from DIR (A/B comparison)"
    )
    parser.add_argument("--quick", action="store_true", help="200 requests per scenario")
    parser.add_argument("--label", default="", help="suffix of the results file name")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="directory for the JSON results")
    args = parser.parse_args()
    if args.role == "upstream":
        role_upstream(args)
        return
    if args.role == "proxy":
        role_proxy(args)
        return
    if args.quick:
        args.requests = 200
    print(_HEADER)
    print("─" * len(_HEADER))
    report = measure(args)
    print(
        "(latencies in ms to the last byte; TTFB+ = added time to the first body byte; rps = requests/s;"
        " CPU/req = proxy process CPU per request, median and min over rounds)"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = args.out / f"proxy_overhead-{stamp}{'-' + args.label if args.label else ''}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path}")


if __name__ == "__main__":
    main()
