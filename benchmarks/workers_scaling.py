"""Requests/s and CPU per request of ``switchyard serve --workers N`` at c=32, proxy unpinned.

Issue 24's worker row: on this 2-core machine, two workers against one, with the load generator
sharing the cores (nothing pinned). The parts are the shared harness's (``../shared/bench``):
its nginx fake upstream (``upstream.py``: the fixed chat.completion JSON and the 50-event SSE
stream) and ``wrk`` with its ``wrk_post.lua`` (the ~0.9 KB request); the proxy is started as
``targets/ours.py`` starts it (one passthrough route per upstream path, the default log level),
plus ``--workers N``. For each worker count and scenario: a warm-up, then ``--duration``
seconds of wrk; the proxy's CPU is the whole process tree's (supervisor and workers) utime +
stime from ``/proc`` over the measurement, divided by the requests wrk completed.

Worker counts alternate (1, 2, 1, 2, ...) over ``--reps`` rounds, so a neighbour's load that
comes and goes lands on both; compare the ratios of one run. Needs nginx with the echo module
and wrk (``apt-get install nginx-light libnginx-mod-http-echo wrk``, the harness's setup).

Usage:
    python benchmarks/workers_scaling.py                                 # json, 1 vs 2, 3 rounds of 10 s
    python benchmarks/workers_scaling.py --scenarios json,sse --reps 2 --duration 8
    python benchmarks/workers_scaling.py --harness /path/to/shared/bench --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_HARNESS = ROOT.parent / "shared" / "bench"
PATHS = {"json": "/v1", "sse": "/sse/v1"}
TICKS = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(HERE))

from workers_reload import _free_port  # noqa: E402


def _load_upstream(harness: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_upstream", harness / "upstream.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no upstream.py in {harness}: pass --harness (the shared bench folder)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and every descendant, in seconds."""
    parents: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry)] = fields
        parents.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        fields = stats.get(current)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        todo += parents.get(current, [])
    return total / TICKS


def _wait_http(url: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not answer {url} within {timeout:.0f} s")


def _wrk(harness: Path, url: str, body: Path, conc: int, seconds: float) -> dict[str, Any]:
    argv = ["wrk", "-t1", f"-c{conc}", f"-d{max(1, round(seconds))}s", "--timeout", "30s",
            "-s", str(harness / "wrk_post.lua"), url, "--", str(body), "bench-key"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRKJSON ")), None)
    if line is None:
        raise SystemExit(f"wrk printed no summary: {done.stdout}\n{done.stderr}")
    return dict(json.loads(line[len("WRKJSON ") :]))


def _config(work: Path, upstream_port: int) -> Path:
    lines = ["llm_clients:"]
    lines += [f"  c_{name}: {{format: openai_chat, base_url: http://127.0.0.1:{upstream_port}{path}}}"
              for name, path in PATHS.items()]  # fmt: skip
    lines += ["targets:"] + [f"  t_{name}: {{client: c_{name}, model: gpt-4o-mini}}" for name in PATHS]
    lines += ["routes:"] + [f"  {name}: {{type: passthrough, target: t_{name}}}" for name in PATHS]
    path = work / "workers.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _measure(
    args: argparse.Namespace, work: Path, config: Path, workers: int, bodies: dict[str, Path]
) -> list[dict[str, Any]]:
    port = _free_port()
    argv = [str(Path(sys.executable).parent / "switchyard"), "serve", "-c", str(config), "--port", str(port),
            "--workers", str(workers)]  # fmt: skip
    log = (work / f"serve-{workers}.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rows = []
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", 60, "switchyard serve")
        for scenario in args.scenarios.split(","):
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            _wrk(args.harness, url, bodies[scenario], args.conc, args.warmup)
            before = _tree_cpu_s(proc.pid)
            result = _wrk(args.harness, url, bodies[scenario], args.conc, args.duration)
            cpu = _tree_cpu_s(proc.pid) - before
            n = int(result["requests"])
            errors = sum(int(result[k]) for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout"))
            if errors:
                where = work / log.name
                raise SystemExit(f"{errors} of {n} {scenario} requests failed with {workers} worker(s); see {where}")
            rows.append({
                "workers": workers, "scenario": scenario, "requests": n, "errors": errors,
                "rps": n / (int(result["duration_us"]) / 1e6), "cpu_us_per_req": 1e6 * cpu / max(n, 1),
                "proxy_cores": cpu / (int(result["duration_us"]) / 1e6), "p50_ms": int(result["p50_us"]) / 1000,
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--harness", type=Path, default=DEFAULT_HARNESS, help="the shared bench folder (upstream.py, wrk_post.lua)"
    )
    parser.add_argument("--scenarios", default="json", help="comma list of json, sse")
    parser.add_argument("--workers", default="1,2", help="comma list of worker counts, alternated each round")
    parser.add_argument("--conc", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3, help="rounds over the worker counts")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before each measurement")
    parser.add_argument("--json", type=Path, help="write every row and the summary here")
    args = parser.parse_args()
    upstream = _load_upstream(args.harness)
    work = Path(tempfile.mkdtemp(prefix="workers-scaling-"))
    work.chmod(0o755)  # nginx's worker processes run as another user and read sse.txt from here
    up_port = _free_port()
    (work / "nginx-body").mkdir()
    (work / "nginx.conf").write_text(upstream.nginx_conf(str(work), up_port))
    (work / "sse.txt").write_text("".join(upstream.sse_events()))
    bodies = {}
    for scenario in PATHS:
        bodies[scenario] = work / f"body-{scenario}.json"
        bodies[scenario].write_text(json.dumps(upstream.request_body(scenario, scenario == "sse")))
    nginx = subprocess.Popen(["nginx", "-c", str(work / "nginx.conf"), "-p", str(work)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip
    rows: list[dict[str, Any]] = []
    try:
        _wait_http(f"http://127.0.0.1:{up_port}/v1/chat/completions", 10, "the nginx upstream")
        config = _config(work, up_port)
        counts = [int(x) for x in args.workers.split(",")]
        for _ in range(args.reps):
            for workers in counts:
                rows += _measure(args, work, config, workers, bodies)
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(timeout=30)
    summary = {}
    for scenario in args.scenarios.split(","):
        med = {w: {k: statistics.median(r[k] for r in rows if r["workers"] == w and r["scenario"] == scenario)
                   for k in ("rps", "cpu_us_per_req", "p50_ms")} for w in counts}  # fmt: skip
        base = med[counts[0]]
        summary[scenario] = {str(w): {**m, "rps_ratio": m["rps"] / base["rps"],
                                      "cpu_ratio": m["cpu_us_per_req"] / base["cpu_us_per_req"]}
                             for w, m in med.items()}  # fmt: skip
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"command": sys.argv, "rows": rows, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
