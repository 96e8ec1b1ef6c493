"""What the dashboard costs: on the request path when nobody looks, and for a page left open.

Four processes on 127.0.0.1: a lean upstream (benchmarks/rawhttp.py), two Switchyard proxies
(the ``switchyard serve`` app, one passthrough route) identical but for
``server.dashboard.enabled``, and this script as the load client.

1. Request path: interleaved rounds of the same load against both proxies; per request the
   proxy's CPU time (from /proc) and the latency. The dashboard's only work per request is one
   ``deque.append`` (switchyard/server/dashboard/ring.py), also timed on its own here.
2. An open page: the dashboard proxy's ring is filled (``--fill`` requests), then its CPU is read
   over ``--page-seconds`` with no page, and over the same time with headless Chromium showing
   the overview (polling every ``server.dashboard.poll_s``), then the session explorer.
3. In-process: the cost of folding one record into the views (paid by the first poll after
   traffic, per record), and of one summary with a full ring.

Usage:
    python benchmarks/dashboard_overhead.py                   # full run, JSON in benchmarks/results/
    python benchmarks/dashboard_overhead.py --quick           # smoke run
    python benchmarks/dashboard_overhead.py --skip-page       # no browser

The page part needs Debian's chromium (``make chromium``) and Playwright's Python package.
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
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rawhttp  # noqa: E402

ROUTE = "bench"
BODY = json.dumps(
    {
        "model": ROUTE,
        "messages": [
            {"role": "system", "content": "You are a careful coding agent. " * 40},
            {"role": "user", "content": "The test test_parse_dates fails on leap years. Find and fix the bug."},
        ],
        "max_tokens": 256,
    }
).encode()
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


# -- child processes ---------------------------------------------------------------------------------


def role_upstream() -> None:
    async def main() -> None:
        server = await rawhttp.serve_upstream("127.0.0.1", 0, 20)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def role_proxy(upstream_port: int, dashboard: bool) -> None:
    import logging

    import uvicorn

    from switchyard._listen import bind
    from switchyard.api import Switchyard
    from switchyard.server.app import create_app

    logging.basicConfig(level=logging.WARNING)
    config: dict[str, Any] = {
        "llm_clients": {"up": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
        "targets": {"t": {"client": "up", "model": ROUTE, "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}}},
        "routes": {ROUTE: {"type": "passthrough", "target": "t"}},
        "server": {"dashboard": {"enabled": dashboard}},
    }
    sy = Switchyard.from_config(config)
    sock = bind("127.0.0.1", 0)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(create_app(sy), log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=30)
    )
    server.run(sockets=[sock])


def _spawn(*args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{args} did not start: {line!r}")
    return proc, int(line.split()[1])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of every thread of ``pid`` (ns precision, from schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


# -- 1. the request path ---------------------------------------------------------------------------------


def request_path(
    ports: dict[str, int], pids: dict[str, int], requests: int, rounds: int, concurrency: int
) -> dict[str, Any]:
    cpu: dict[str, list[float]] = {who: [] for who in ports}
    p50: dict[str, list[float]] = {who: [] for who in ports}
    for port in ports.values():  # warm-up
        asyncio.run(
            rawhttp.load(
                "127.0.0.1", port, "/v1/chat/completions", BODY, concurrency=concurrency, requests=200, warmup=0
            )
        )
    for _ in range(rounds):
        for who, port in ports.items():  # interleaved: a burst of load elsewhere hits both alike
            before = _cpu_seconds(pids[who])
            run = asyncio.run(
                rawhttp.load(
                    "127.0.0.1",
                    port,
                    "/v1/chat/completions",
                    BODY,
                    concurrency=concurrency,
                    requests=requests,
                    warmup=0,
                )
            )
            after = _cpu_seconds(pids[who])
            assert run.errors == 0, f"{who}: {run.errors} errors"
            cpu[who].append((after - before) / len(run.samples) * 1e6)
            p50[who].append(statistics.median(s.last_byte for s in run.samples) * 1e3)
    out: dict[str, Any] = {"concurrency": concurrency, "requests_per_round": requests, "rounds": rounds}
    for who in ports:
        out[who] = {
            "cpu_us_per_req_median": round(statistics.median(cpu[who]), 1),
            "cpu_us_per_req_rounds": [round(v, 1) for v in cpu[who]],
            "p50_ms_median": round(statistics.median(p50[who]), 3),
        }
    off, on = out["dashboard_off"]["cpu_us_per_req_rounds"], out["dashboard_on"]["cpu_us_per_req_rounds"]
    out["cpu_delta_us_per_req"] = round(statistics.median(on) - statistics.median(off), 1)
    out["round_to_round_spread_us"] = round(max(max(off) - min(off), max(on) - min(on)), 1)
    return out


def append_cost_ns() -> float:
    from switchyard.engine.records import DecisionRecord
    from switchyard.server.dashboard.ring import RecordRing

    ring = RecordRing(10_000)
    record = DecisionRecord(request_id="x", route="r", router="passthrough")
    n = 200_000
    return min(timeit.repeat(lambda: ring(record), number=n, repeat=5)) / n * 1e9


# -- 2. an open page ---------------------------------------------------------------------------------


def page_cpu(port: int, pid: int, seconds: float) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    binary = os.environ.get("SWITCHYARD_CHROMIUM", "/usr/bin/chromium")
    out: dict[str, Any] = {"seconds": seconds}
    before = _cpu_seconds(pid)
    time.sleep(seconds)
    out["idle_cpu_s"] = round(_cpu_seconds(pid) - before, 4)
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=binary, headless=True, args=FLAGS)
        page = context.new_page()
        polls = {"n": 0}
        page.on("request", lambda r: polls.__setitem__("n", polls["n"] + ("/api/" in r.url)))
        for view in ("overview", "sessions"):
            page.goto(f"http://127.0.0.1:{port}/dashboard/#{view}")
            page.wait_for_selector(f"body[data-loaded={view}]", timeout=60_000)
            polls["n"] = 0
            before = _cpu_seconds(pid)
            page.wait_for_timeout(seconds * 1000)
            used = _cpu_seconds(pid) - before
            out[view] = {
                "cpu_s": round(used, 4),
                "polls": polls["n"],
                "cpu_ms_per_poll": round((used - out["idle_cpu_s"]) / max(1, polls["n"]) * 1e3, 2),
                "share_of_a_core_pct": round(100 * (used - out["idle_cpu_s"]) / seconds, 3),
            }
        context.close()
    return out


# -- 3. in-process fold and summary ------------------------------------------------------------------


def fold_costs(records: int) -> dict[str, Any]:
    from switchyard.engine.accounting import UsdLedger
    from switchyard.engine.records import Attempt, DecisionRecord
    from switchyard.server.dashboard.ring import RecordRing
    from switchyard.server.dashboard.views import Replica, Views

    class Totals:
        def usd(self) -> dict[str, Any]:
            return UsdLedger().snapshot(sessions=0)

        def reliability(self) -> dict[str, Any]:
            return {}

        def state(self) -> dict[str, Any]:
            return {}

    ring = RecordRing(records)
    now = time.time()
    for i in range(records):
        r = DecisionRecord(request_id=str(i), route="agent", router="stage_router", session_id=f"s{i % 500}")
        r.ts = now - 3600 + i * 3600 / records
        r.selected, r.tier, r.cost_usd, r.baseline_cost_usd = "efficient", "efficient", 1e-4, 1e-3
        r.attempts.append(Attempt("efficient", True, 120.0))
        ring(r)
    views = Views(ring, Totals(), Replica.this())
    t0 = time.process_time()
    views.refresh()
    fold_s = time.process_time() - t0
    t0 = time.process_time()
    for _ in range(20):
        views.summary()
    summary_s = (time.process_time() - t0) / 20
    t0 = time.process_time()
    for _ in range(20):
        views.sessions(100)
    sessions_s = (time.process_time() - t0) / 20
    return {
        "records": records,
        "fold_us_per_record": round(fold_s / records * 1e6, 2),
        "summary_ms_full_ring": round(summary_s * 1e3, 2),
        "sessions_ms_full_ring": round(sessions_s * 1e3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["upstream", "proxy"])
    parser.add_argument("--upstream-port", type=int)
    parser.add_argument("--dashboard", action="store_true")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round and proxy")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--fill", type=int, default=10_000, help="requests sent before the page is opened")
    parser.add_argument("--page-seconds", type=float, default=60.0)
    parser.add_argument("--skip-page", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    if args.role == "upstream":
        return role_upstream()
    if args.role == "proxy":
        return role_proxy(args.upstream_port, args.dashboard)
    if args.quick:
        args.requests, args.rounds, args.fill, args.page_seconds = 300, 2, 1000, 15.0
    upstream, up_port = _spawn("--role", "upstream")
    procs = [upstream]
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
    }
    try:
        off, off_port = _spawn("--role", "proxy", "--upstream-port", str(up_port))
        on, on_port = _spawn("--role", "proxy", "--upstream-port", str(up_port), "--dashboard")
        procs += [off, on]
        ports = {"dashboard_off": off_port, "dashboard_on": on_port}
        pids = {"dashboard_off": off.pid, "dashboard_on": on.pid}
        result["append_ns"] = round(append_cost_ns(), 1)
        print(f"ring append: {result['append_ns']} ns", flush=True)
        result["request_path"] = request_path(ports, pids, args.requests, args.rounds, args.concurrency)
        print(json.dumps(result["request_path"], indent=2), flush=True)
        result["fold"] = fold_costs(10_000)
        print(json.dumps(result["fold"], indent=2), flush=True)
        if not args.skip_page:
            asyncio.run(
                rawhttp.load(
                    "127.0.0.1", on_port, "/v1/chat/completions", BODY, concurrency=4, requests=args.fill, warmup=0
                )
            )
            result["page"] = page_cpu(on_port, on.pid, args.page_seconds)
            print(json.dumps(result["page"], indent=2), flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    out = (
        HERE
        / "results"
        / f"dashboard_overhead-{time.strftime('%Y%m%d-%H%M%S')}{'-' + args.label if args.label else ''}.json"
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
