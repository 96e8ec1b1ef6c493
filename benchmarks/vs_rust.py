"""Our proxy next to NVIDIA's Rust server (nemo-switchyard 0.3.0), side by side in one run.

Every row of issue 17's target table is measured here, for both servers where it applies, and
reported as a value and a ratio (ours / Rust):

- proxy CPU per request (JSON and SSE with 50 events, concurrency 1 and 8), from /proc/<pid>/task/*/schedstat
- added p50 latency (JSON, c=1) and SSE time to last byte (c=1) over the upstream called directly
- requests/s with the proxy on one core (JSON, c=8)
- peak RSS after load at concurrency 32
- one 5 MB request (100,000 short messages) among 32 small concurrent ones: the worst delay of a
  small request while the big one is in flight
- cold start to the first 200, and ``import switchyard``
- the in-process drop-in (``switchyard.OpenAI``, passthrough) against the same ``openai`` SDK
  calling the upstream directly (added p50 and CPU per call)

Pinning (``taskset``): each proxy on core 1, the fake upstream (benchmarks/rawhttp.py) and this
load generator on core 0. Scenarios run in interleaved rounds (direct, Rust, ours, [baseline]) so a
burst of load elsewhere on the machine hits every server alike; CPU per request is the robust
figure on a busy machine, latencies are reported as well.

Usage:
    python benchmarks/vs_rust.py                         # full run; JSON into benchmarks/results/
    python benchmarks/vs_rust.py --quick                 # smoke run
    git archive REV switchyard | tar -x -C /tmp/base && \
    python benchmarks/vs_rust.py --baseline-src /tmp/base  # A/B: also our proxy at REV

NVIDIA's wheel lives in its own virtual environment (``--nemo-python``, default
/tmp/nemo-venv/bin/python); it is created with ``pip install nemo-switchyard==0.3.0`` when missing.
See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # this tree's switchyard, not whatever is installed

import rawhttp  # noqa: E402
from differential_translation import ensure_nemo  # noqa: E402
from proxy_overhead import BODY, ROUTE  # noqa: E402

PROXY_CORE = "1"
LOAD_CORE = "0"
SSE_EVENTS = 50
PATH = "/v1/chat/completions"

RUST_HOST = textwrap.dedent(
    """
    import sys
    from switchyard_rust.server import Server
    server = Server(sys.argv[1], port=int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(f"PORT {server.port}", flush=True)
    sys.stdin.readline()
    server.close()
    """
)

TARGETS = {
    "cpu_json": 2.0,
    "cpu_sse": 3.0,
    "added_p50_ms": 0.5,
    "added_p50_ratio": 1.5,
    "sse_ttlb_added_ms": 1.0,
    "rps_c8": 3000.0,
    "dropin_added_p50_ms": 0.15,
    "import_ms": 150.0,
    "cold_start_s": 0.5,
    "rss_mb": 60.0,
    "big_body_delay_ms": 50.0,
}


# -- processes ---------------------------------------------------------------------------------


def _taskset(core: str) -> list[str]:
    return ["taskset", "-c", core] if shutil.which("taskset") else []


def _read_port(proc: subprocess.Popen[str], what: str) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{what} did not start: {line!r}")
    return int(line.split()[1])


class Proc:
    """A server child process: its pid, port and how to stop it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None = None, stdin: bool = False) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if stdin else None,  # the Rust server logs every request at INFO
            stdin=subprocess.PIPE if stdin else None,
            text=True,
            cwd=HERE.parent,
            env=env,
        )
        self.port = _read_port(self.proc, name)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except OSError:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def rust_toml(upstream_port: int) -> str:
    """NVIDIA's routes.toml: one OpenAI Chat client, one target, one passthrough route."""
    return textwrap.dedent(
        f"""
        schema_version = 1

        [llm_clients.up]
        format = "openai_chat"
        base_url = "http://127.0.0.1:{upstream_port}/v1"

        [targets.t]
        id = "{ROUTE}"
        llm_client = "up"

        [routes.{ROUTE}]
        id = "{ROUTE}"
        type = "passthrough"
        target = "t"
        """
    )


def our_yaml(upstream_port: int) -> str:
    """The same route in our config (YAML for ``switchyard serve``)."""
    return textwrap.dedent(
        f"""
        llm_clients:
          up: {{format: openai_chat, base_url: "http://127.0.0.1:{upstream_port}/v1"}}
        targets:
          t: {{client: up, model: {ROUTE}}}
        routes:
          {ROUTE}: {{type: passthrough, target: t}}
        """
    )


def start_upstream() -> Proc:
    argv = [*_taskset(LOAD_CORE), sys.executable, str(HERE / "proxy_overhead.py"), "--role", "upstream"]
    return Proc("upstream", [*argv, "--sse-events", str(SSE_EVENTS)])


def start_ours(upstream_port: int, src: Path | None = None, name: str = "ours") -> Proc:
    env = {**os.environ, "PYTHONPATH": str((src or HERE.parent).resolve())}
    argv = [*_taskset(PROXY_CORE), sys.executable, str(HERE / "proxy_overhead.py"), "--role", "proxy"]
    return Proc(name, [*argv, "--upstream-port", str(upstream_port)], env=env)


def start_rust(nemo_python: Path, upstream_port: int, workdir: Path) -> Proc:
    (workdir / "routes.toml").write_text(rust_toml(upstream_port))
    (workdir / "rust_host.py").write_text(RUST_HOST)
    argv = [*_taskset(PROXY_CORE), str(nemo_python), str(workdir / "rust_host.py"), str(workdir / "routes.toml")]
    return Proc("rust", argv, env={**os.environ, "RUST_LOG": "warn"}, stdin=True)


def cpu_seconds(pid: int) -> float:
    """CPU time of a process, all its threads: the sum of /proc/<pid>/task/*/schedstat (ns
    resolution; /proc/<pid>/stat counts in 10 ms ticks, too coarse for a few hundred requests)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that just ended
    except OSError:
        total = 0
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> dict[str, float]:
    """Current and peak resident set size (VmRSS, VmHWM)."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


# -- load scenarios ------------------------------------------------------------------------------


def _scenario(port: int, body: bytes, concurrency: int, requests: int) -> rawhttp.Run:
    return asyncio.run(
        rawhttp.load("127.0.0.1", port, PATH, body, concurrency=concurrency, requests=requests, warmup=0)
    )


def load_scenarios(servers: dict[str, int], pids: dict[str, int], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for mode in ("json", "sse"):
        body = json.dumps({**BODY, "stream": mode == "sse"}).encode()
        for conc in (1, 8):
            n = args.requests if mode == "json" else args.requests // 2
            per_round = max(conc, n // args.rounds)
            for port in servers.values():
                _scenario(port, body, conc, max(conc, per_round // 5))  # warm up pools and caches
            runs = {who: rawhttp.Run() for who in servers}
            cpu: dict[str, list[float]] = {who: [] for who in pids}
            for _ in range(args.rounds):
                for who, port in servers.items():
                    c0 = cpu_seconds(pids[who]) if who in pids else 0.0
                    run = _scenario(port, body, conc, per_round)
                    if who in pids:
                        cpu[who].append((cpu_seconds(pids[who]) - c0) / len(run.samples) * 1e6)
                    runs[who].samples += run.samples
                    runs[who].wall_s += run.wall_s
                    runs[who].errors += run.errors
            for who, run in runs.items():
                last = [s.last_byte * 1e3 for s in run.samples]
                row = {
                    "server": who,
                    "mode": mode,
                    "concurrency": conc,
                    "n": len(last),
                    "errors": run.errors,
                    "p50_ms": statistics.median(last),
                    "p99_ms": sorted(last)[min(len(last) - 1, int(0.99 * len(last)))],
                    "rps": len(last) / run.wall_s,
                    "cpu_us": statistics.median(cpu[who]) if cpu.get(who) else None,
                    "cpu_us_min": min(cpu[who]) if cpu.get(who) else None,
                }
                rows.append(row)
                cpu_s = (
                    "" if row["cpu_us"] is None else f"  CPU/req {row['cpu_us']:7.0f} µs (min {row['cpu_us_min']:.0f})"
                )
                print(
                    f"  {who:<9} {mode:<4} c={conc:<2} p50 {row['p50_ms']:8.3f} ms  p99 {row['p99_ms']:8.3f} ms"
                    f"  {row['rps']:7.0f} req/s{cpu_s}  errors {run.errors}",
                    flush=True,
                )
    return rows


def peak_rss(servers: dict[str, int], pids: dict[str, int], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Load at concurrency 32 (JSON then SSE), then each server's peak RSS (VmHWM)."""
    for mode in ("json", "sse"):
        body = json.dumps({**BODY, "stream": mode == "sse"}).encode()
        for who, port in servers.items():
            if who in pids:
                _scenario(port, body, 32, max(64, args.requests // 2))
    out = {who: memory_mb(pid) for who, pid in pids.items()}
    for who, mem in out.items():
        print(f"  {who:<9} RSS {mem['VmRSS']:.1f} MB, peak {mem['VmHWM']:.1f} MB", flush=True)
    return out


def big_body() -> bytes:
    """A 5 MB Chat request: 100,000 short messages."""
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"msg {i:06d}"} for i in range(100_000)]
    return json.dumps({"model": ROUTE, "messages": msgs, "max_tokens": 16}).encode()


async def _big_among_small(port: int, big: bytes, small: bytes, small_conc: int) -> dict[str, Any]:
    small_req = rawhttp.request_bytes("127.0.0.1", port, PATH, small)
    big_req = rawhttp.request_bytes("127.0.0.1", port, PATH, big)
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(small_conc)]
    big_conn = await asyncio.open_connection("127.0.0.1", port)
    samples: list[tuple[float, float]] = []  # (start, latency)
    stop = False

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not stop:
            t = time.perf_counter()
            s = await rawhttp._one(reader, writer, small_req)
            samples.append((t, s.last_byte))

    workers = [asyncio.create_task(worker(r, w)) for r, w in conns]
    await asyncio.sleep(1.0)
    t_big = time.perf_counter()
    big_sample = await rawhttp._one(*big_conn, big_req)
    t_big_end = time.perf_counter()
    await asyncio.sleep(0.3)
    stop = True
    await asyncio.gather(*workers, return_exceptions=True)
    for _, w in [*conns, big_conn]:
        w.close()
    before = [lat for t, lat in samples if t + lat < t_big]
    during = [lat for t, lat in samples if t < t_big_end and t + lat > t_big]
    base = statistics.median(before) * 1e3 if before else 0.0
    worst = max(during) * 1e3 if during else 0.0
    return {
        "big_status": big_sample.status,
        "big_latency_ms": big_sample.last_byte * 1e3,
        "small_p50_before_ms": base,
        "small_max_during_ms": worst,
        "small_max_delay_ms": max(0.0, worst - base),
        "small_during": len(during),
    }


def big_among_small(servers: dict[str, int], pids: dict[str, int]) -> dict[str, dict[str, Any]]:
    big = big_body()
    small = json.dumps({**BODY, "stream": False}).encode()
    out: dict[str, dict[str, Any]] = {}
    for who, port in servers.items():
        if who not in pids:
            continue
        res = asyncio.run(_big_among_small(port, big, small, 32))
        res["rss_after_mb"] = memory_mb(pids[who])
        out[who] = res
        print(
            f"  {who:<9} big body ({len(big) / 1e6:.1f} MB) status {res['big_status']}"
            f" in {res['big_latency_ms']:.0f} ms;"
            f" small p50 before {res['small_p50_before_ms']:.1f} ms, worst during {res['small_max_during_ms']:.1f} ms"
            f" (delay {res['small_max_delay_ms']:.1f} ms, {res['small_during']} overlapped)",
            flush=True,
        )
    return out


# -- start-up ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _first_200(port: int, deadline: float) -> bool:
    req = rawhttp.request_bytes("127.0.0.1", port, PATH, json.dumps({**BODY, "stream": False}).encode())
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(req)
                if s.recv(16).startswith(b"HTTP/1.1 200"):
                    return True
        except OSError:
            time.sleep(0.002)
    return False


def cold_starts(
    nemo_python: Path, upstream_port: int, workdir: Path, srcs: dict[str, Path], reps: int
) -> dict[str, Any]:
    """Seconds from process spawn to the first 200 (median of ``reps``): the Rust server and our
    builds (``srcs``: name → source tree), interleaved."""
    (workdir / "ours.yaml").write_text(our_yaml(upstream_port))
    out: dict[str, Any] = {}
    runs: dict[str, list[float]] = {who: [] for who in ("rust", *srcs)}
    for _ in range(reps):
        for who, times in runs.items():
            port = _free_port()
            if who in srcs:
                argv = [sys.executable, "-m", "switchyard", "serve", "-c", str(workdir / "ours.yaml"), "-p", str(port)]
                argv += ["--log-level", "warning"]
                env = {**os.environ, "PYTHONPATH": str(srcs[who])}
            else:
                argv = [str(nemo_python), str(workdir / "rust_host.py"), str(workdir / "routes.toml"), str(port)]
                env = {**os.environ, "RUST_LOG": "warn"}
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                [*_taskset(PROXY_CORE), *argv],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=workdir,
            )
            ok = _first_200(port, t0 + 30)
            times.append(time.perf_counter() - t0 if ok else float("nan"))
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    for who, times in runs.items():
        out[who] = {"median_s": statistics.median(times), "runs_s": times}
        print(f"  {who:<9} cold start to first 200: {statistics.median(times):.3f} s  {[round(t, 3) for t in times]}")
    return out


IMPORT_PROBE = (
    "import time; t = time.perf_counter(); import {mod}; a = time.perf_counter(); {extra}; b = time.perf_counter();"
    " print((a - t) * 1e3, (b - a) * 1e3)"
)


def import_times(nemo_python: Path, srcs: dict[str, Path], reps: int) -> dict[str, Any]:
    """``import switchyard`` (and its first real use) vs importing NVIDIA's server module (median ms)."""
    probes = {
        **{who: (sys.executable, IMPORT_PROBE.format(mod="switchyard", extra="switchyard.Switchyard")) for who in srcs},
        "rust": (
            str(nemo_python),
            IMPORT_PROBE.format(mod="switchyard_rust.server", extra="switchyard_rust.server.Server"),
        ),
    }
    out: dict[str, Any] = {}
    for who, (python, code) in probes.items():
        bare, first_use = [], []
        for _ in range(reps):
            done = subprocess.run(
                [*_taskset(PROXY_CORE), python, "-c", code],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(srcs[who])} if who in srcs else None,
                check=True,
            )
            a, b = (float(x) for x in done.stdout.split())
            bare.append(a)
            first_use.append(b)
        out[who] = {"import_ms": statistics.median(bare), "first_use_ms": statistics.median(first_use)}
        print(
            f"  {who:<9} import {out[who]['import_ms']:.1f} ms,"
            f" then the server/API class {out[who]['first_use_ms']:.1f} ms"
        )
    return out


# -- the in-process drop-in --------------------------------------------------------------------------

DROPIN = textwrap.dedent(
    """
    import json, statistics, sys, time
    import openai
    import switchyard

    port, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    body = json.loads(sys.argv[4])
    config = {
        "llm_clients": {"up": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}},
        "targets": {"t": {"client": "up", "model": body["model"]}},
        "routes": {body["model"]: {"type": "passthrough", "target": "t"}},
    }
    clients = {
        "direct": openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0),
        "dropin": switchyard.OpenAI(config=config),
    }
    kwargs = {k: v for k, v in body.items() if k in ("model", "messages", "tools", "temperature", "max_tokens")}
    lat = {k: [] for k in clients}
    cpu = {k: [] for k in clients}
    for who, client in clients.items():
        for _ in range(50):
            client.chat.completions.create(**kwargs)
    for _ in range(rounds):
        for who, client in clients.items():
            c0 = time.process_time()
            for _ in range(n // rounds):
                t = time.perf_counter()
                client.chat.completions.create(**kwargs)
                lat[who].append(time.perf_counter() - t)
            cpu[who].append((time.process_time() - c0) / (n // rounds))
    print(json.dumps({k: {"p50_ms": statistics.median(v) * 1e3, "cpu_us": statistics.median(cpu[k]) * 1e6}
                      for k, v in lat.items()}))
    """
)


def dropin(upstream_port: int, workdir: Path, src: Path, n: int, rounds: int) -> dict[str, Any]:
    """``switchyard.OpenAI`` vs ``openai.OpenAI`` straight to the upstream, sequential, on the proxy core."""
    (workdir / "dropin.py").write_text(DROPIN)
    body = {**BODY, "stream": False}
    done = subprocess.run(
        [
            *_taskset(PROXY_CORE),
            sys.executable,
            str(workdir / "dropin.py"),
            str(upstream_port),
            str(n),
            str(rounds),
            json.dumps(body),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(src)},
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"drop-in benchmark failed:\n{done.stderr[-3000:]}")
    res: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    res["added_p50_ms"] = res["dropin"]["p50_ms"] - res["direct"]["p50_ms"]
    res["added_cpu_us"] = res["dropin"]["cpu_us"] - res["direct"]["cpu_us"]
    print(
        f"  direct p50 {res['direct']['p50_ms']:.3f} ms ({res['direct']['cpu_us']:.0f} µs CPU), drop-in p50"
        f" {res['dropin']['p50_ms']:.3f} ms ({res['dropin']['cpu_us']:.0f} µs CPU): added {res['added_p50_ms']:.3f} ms,"
        f" {res['added_cpu_us']:.0f} µs CPU"
    )
    return res


# -- the verdict -------------------------------------------------------------------------------------


def _row(rows: list[dict[str, Any]], who: str, mode: str, conc: int) -> dict[str, Any]:
    return next(r for r in rows if r["server"] == who and r["mode"] == mode and r["concurrency"] == conc)


def verdict(report: dict[str, Any], who: str = "ours") -> list[dict[str, Any]]:
    """One line per target row: our value, the Rust server's, the ratio and whether it is met."""
    rows = report["load"]
    table: list[dict[str, Any]] = []

    def add(measure: str, ours: float, rust: float | None, ratio: float | None, target: str, met: bool) -> None:
        table.append({"measure": measure, "ours": ours, "rust": rust, "ratio": ratio, "target": target, "met": met})

    for mode, limit in (("json", TARGETS["cpu_json"]), ("sse", TARGETS["cpu_sse"])):
        for conc in (1, 8):
            o, r = _row(rows, who, mode, conc)["cpu_us"], _row(rows, "rust", mode, conc)["cpu_us"]
            name = f"proxy CPU per {mode.upper()} request{' (50 events)' if mode == 'sse' else ''}, c={conc} (µs)"
            add(name, o, r, o / r, f"≤ {limit:g}x Rust", o / r <= limit)
    direct = _row(rows, "direct", "json", 1)["p50_ms"]
    o_add = _row(rows, who, "json", 1)["p50_ms"] - direct
    r_add = _row(rows, "rust", "json", 1)["p50_ms"] - direct
    ratio = o_add / r_add if r_add > 0 else None
    met = o_add <= TARGETS["added_p50_ms"] and (ratio is not None and ratio <= TARGETS["added_p50_ratio"])
    add("added p50, JSON, c=1 (ms over direct)", o_add, r_add, ratio, "≤ 0.5 ms and ≤ 1.5x Rust", met)
    sdirect = _row(rows, "direct", "sse", 1)["p50_ms"]
    o_sse = _row(rows, who, "sse", 1)["p50_ms"] - sdirect
    r_sse = _row(rows, "rust", "sse", 1)["p50_ms"] - sdirect
    add("SSE time to last byte p50, 50 events, c=1 (ms over direct)", o_sse, r_sse, None, "≤ 1 ms", o_sse <= 1.0)
    o_rps, r_rps = _row(rows, who, "json", 8)["rps"], _row(rows, "rust", "json", 8)["rps"]
    add("JSON requests/s, proxy on one core, c=8", o_rps, r_rps, o_rps / r_rps, "≥ 3,000", o_rps >= TARGETS["rps_c8"])
    d = report.get("dropin")
    if d:
        add("drop-in added p50 (ms)", d["added_p50_ms"], None, None, "≤ 0.15 ms", d["added_p50_ms"] <= 0.15)
    imp = report.get("imports")
    if imp and who in imp:
        o, r = imp[who]["import_ms"], imp["rust"]["import_ms"]
        add("`import switchyard` (ms)", o, r, o / r, "≤ 150 ms", o <= TARGETS["import_ms"])
    cold = report.get("cold_start")
    if cold and who in cold:
        o, r = cold[who]["median_s"], cold["rust"]["median_s"]
        add("cold start to first 200 (s)", o, r, o / r, "≤ 0.5 s", o <= TARGETS["cold_start_s"])
    rss = report.get("rss")
    if rss:
        o, r = rss[who]["VmHWM"], rss["rust"]["VmHWM"]
        add("peak RSS after c=32 (MB)", o, r, o / r, "≤ 60 MB", o <= TARGETS["rss_mb"])
    big = report.get("big_body")
    if big and who in big:
        o = big[who]["small_max_delay_ms"]
        r = big["rust"]["small_max_delay_ms"] if "rust" in big else None
        add(
            "5 MB request among 32 small: worst small delay (ms)",
            o,
            r,
            None,
            "≤ 50 ms",
            o <= TARGETS["big_body_delay_ms"],
        )
    return table


def print_verdict(table: list[dict[str, Any]]) -> None:
    print(f"\n{'measure':<62} {'ours':>10} {'Rust':>10} {'ratio':>7}  target")
    for t in table:
        rust = "" if t["rust"] is None else f"{t['rust']:.3f}" if abs(t["rust"]) < 10 else f"{t['rust']:.0f}"
        ours = f"{t['ours']:.3f}" if abs(t["ours"]) < 10 else f"{t['ours']:.0f}"
        ratio = "" if t["ratio"] is None else f"{t['ratio']:.2f}x"
        print(
            f"{t['measure']:<62} {ours:>10} {rust:>10} {ratio:>7}  {t['target']:<26} {'met' if t['met'] else 'NOT met'}"
        )


def machine() -> dict[str, Any]:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "",
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "switchyard"], capture_output=True, text=True, cwd=HERE
    ).stdout
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg": os.getloadavg(),
        "commit": commit.strip() + ("+dirty" if dirty.strip() else ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="JSON requests per scenario (SSE: half)")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per scenario")
    parser.add_argument("--dropin-calls", type=int, default=1500, help="sequential calls per drop-in client")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of the cold start and import probes")
    parser.add_argument("--nemo-python", type=Path, default=Path("/tmp/nemo-venv/bin/python"))
    parser.add_argument("--baseline-src", type=Path, help="also run our proxy importing switchyard from this tree")
    parser.add_argument("--skip", nargs="*", default=[], choices=["load", "big", "cold", "import", "dropin", "rss"])
    parser.add_argument("--quick", action="store_true", help="smoke run (few requests)")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds, args.dropin_calls, args.reps = 200, 2, 200, 2
    nemo_python = ensure_nemo(args.nemo_python)
    src = HERE.parent
    builds = {"ours": src, **({"baseline": args.baseline_src.resolve()} if args.baseline_src else {})}
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {int(LOAD_CORE)})
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    report: dict[str, Any] = {
        "machine": machine(),
        "command": " ".join(["python", "benchmarks/vs_rust.py", *sys.argv[1:]]),
    }
    procs: list[Proc] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        try:
            upstream = start_upstream()
            procs.append(upstream)
            servers: dict[str, int] = {"direct": upstream.port}
            pids: dict[str, int] = {}
            for proc in (
                start_rust(nemo_python, upstream.port, workdir),
                start_ours(upstream.port),
                *([start_ours(upstream.port, args.baseline_src, "baseline")] if args.baseline_src else []),
            ):
                procs.append(proc)
                servers[proc.name] = proc.port
                pids[proc.name] = proc.pid
            if "load" not in args.skip:
                print("load (interleaved rounds):", flush=True)
                report["load"] = load_scenarios(servers, pids, args)
            if "rss" not in args.skip:
                print("peak RSS after concurrency 32:", flush=True)
                report["rss"] = peak_rss(servers, pids, args)
            if "big" not in args.skip:
                print("one 5 MB request among 32 small concurrent ones:", flush=True)
                report["big_body"] = big_among_small(servers, pids)
            for proc in procs[1:]:
                proc.close()
            procs = procs[:1]
            if "cold" not in args.skip:
                print("cold start:", flush=True)
                report["cold_start"] = cold_starts(nemo_python, upstream.port, workdir, builds, args.reps)
            if "import" not in args.skip:
                print("import:", flush=True)
                report["imports"] = import_times(nemo_python, builds, args.reps)
            if "dropin" not in args.skip:
                print("in-process drop-in (switchyard.OpenAI vs openai.OpenAI direct):", flush=True)
                report["dropin"] = dropin(upstream.port, workdir, src, args.dropin_calls, 5)
        finally:
            for proc in procs:
                proc.close()
    report["verdict"] = verdict(report) if "load" in report else []
    if args.baseline_src and "load" in report:
        report["verdict_baseline"] = verdict({**report, "dropin": None}, "baseline")
    print_verdict(report["verdict"])
    if "verdict_baseline" in report:
        print("\nbaseline build (the drop-in row is measured for this tree only):")
        print_verdict(report["verdict_baseline"])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"vs_rust-{time.strftime('%Y%m%d-%H%M%S')}{'-' + args.label if args.label else ''}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
