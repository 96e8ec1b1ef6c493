"""Agent-sized requests: our proxy next to NVIDIA's Rust server at 1, 50 and 200 turns.

An agent sends its whole conversation every turn: the system prompt, its tool schemas and every
tool call and result so far. This scenario sends agent-shaped OpenAI Chat bodies (a coding
agent's system prompt, 20 tool schemas, then ``turns`` assistant turns with their tool results,
from :func:`stage_trajectories.long_session`) of about 26 KiB (1 turn), 79 KiB (50 turns) and
262 KiB (200 turns), sequentially (c=1, one keep-alive connection), through two routes of each
server (ours is ``switchyard serve``, as in the shared harness): ``passthrough`` (one target) and
``stage`` (the stage router between two targets; ours in ``compat: nvidia``). As in a live agent
loop, every request is the previous one plus the next assistant turn and its tool results (new
text); after :data:`VARIANTS` turns, ending at ``turns``, the loop starts over (the stage router's
prefix cache sees a conversation it knows grow, and once per cycle one that got shorter). Sizes
are the mean over a cycle.

Reported per route and size: the proxy process's CPU per request (``/proc/<pid>/task/*/schedstat``)
and the added p50 (the proxy's p50 minus the upstream's called directly), for the Rust server,
ours and optionally a baseline build of ours, with the ratio ours / Rust. The machinery is
``vs_rust.py``'s: the lean upstream of ``rawhttp.py`` (canned answers), each proxy pinned to core
1 and the upstream and this client to core 0, interleaved rounds (direct, Rust, ours, [baseline])
so a burst of load elsewhere hits every server alike. Compare ratios from one run.

Usage:
    python benchmarks/agent_sized.py                          # full run; JSON into benchmarks/results/
    python benchmarks/agent_sized.py --quick                  # smoke run
    git archive REV switchyard | tar -x -C /tmp/base && \\
    python benchmarks/agent_sized.py --baseline-src /tmp/base  # A/B: also our proxy at REV
    python benchmarks/agent_sized.py --print-sizes            # the bodies' sizes, nothing started

NVIDIA's wheel comes from ``--nemo-python`` (default: the ``.nemo-venv`` that ``make nemo-venv``
builds in the repository, else /tmp/nemo-venv). See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
sys.path.insert(1, str(HERE.parent))

import rawhttp  # noqa: E402
import vs_rust  # noqa: E402
from differential_translation import ensure_nemo  # noqa: E402
from stage_trajectories import long_session  # noqa: E402

ROUTES = {"passthrough": "agent", "stage": "agent-stage"}
TURNS = (1, 50, 200)
RESULT_CHARS = 930  # tool results padded to this: 50 turns ≈ 79 KiB, 200 turns ≈ 262 KiB
VARIANTS = 8
TARGETS = {"cpu_ratio_passthrough_260": 0.4, "added_p50_ms_passthrough_260": 1.5, "cpu_ratio_stage_260": 0.6}

SYSTEM = (
    "You are an interactive coding agent working in a git repository on the user's machine. Use the "
    "tools below to read, search, edit and run code. Keep changes minimal and reversible, follow the "
    "repository's existing style, run the tests after every change and report what you changed and why. "
) * 6

_TOOL_NAMES = (
    ("Bash", "Runs a shell command in a persistent session with an optional timeout"),
    ("Read", "Reads a file from the local filesystem, with an optional line offset and limit"),
    ("Edit", "Performs an exact string replacement in a file"),
    ("Write", "Writes a file to the local filesystem, replacing any existing file"),
    ("Grep", "Searches file contents with a regular expression (ripgrep syntax)"),
    ("Glob", "Finds files by glob pattern, sorted by modification time"),
    ("TodoWrite", "Creates and updates a structured task list for the current session"),
    ("MultiEdit", "Makes several edits to one file in a single operation"),
    ("NotebookEdit", "Replaces the contents of a cell in a Jupyter notebook"),
    ("WebFetch", "Fetches a URL and answers a prompt about its content"),
    ("WebSearch", "Searches the web and returns result titles and snippets"),
    ("Task", "Launches a sub-agent to handle a complex, multi-step task on its own"),
    ("LS", "Lists files and directories under a path"),
    ("BashOutput", "Reads the output of a background shell"),
    ("KillShell", "Stops a background shell by its id"),
    ("ExitPlanMode", "Presents the plan to the user and leaves planning mode"),
    ("SlashCommand", "Runs a custom slash command defined in the repository"),
    ("GitDiff", "Shows the working tree's diff against a revision"),
    ("RunTests", "Runs the repository's test suite or a subset of it"),
    ("AskUser", "Asks the user a clarifying question and waits for the answer"),
)


def tools() -> list[dict[str, Any]]:
    """20 function tools with descriptions and parameter schemas the size of a real agent's."""
    out = []
    for name, summary in _TOOL_NAMES:
        note = (
            f"{summary}. Usage notes: prefer this tool over shell equivalents when it applies; pass "
            "absolute paths; results longer than 30000 characters are truncated; run independent calls "
            "in parallel in one message; never guess values you can look up first; say what you ran. "
        )
        usage = note + note[: len(note) // 5]
        props = {
            p: {"type": t, "description": f"The {p.replace('_', ' ')} for {name}; see the usage notes above."}
            for p, t in (("path", "string"), ("pattern", "string"), ("timeout_ms", "integer"), ("verbose", "boolean"))
        }
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": usage,
                    "parameters": {"type": "object", "properties": props, "required": ["path"]},
                },
            }
        )
    return out


def agent_bodies(turns: int, model: str, variants: int = VARIANTS) -> list[bytes]:
    """``variants`` Chat bodies of one agent loop, the last at about its ``turns``-th turn (the
    first at its first turn when ``turns`` is smaller than ``variants``): each the previous one
    plus the next assistant turn and its tool results (new text), as an agent sends them."""
    last = turns
    messages = [{"role": "system", "content": SYSTEM}, *long_session(2 * last + 42, result_chars=RESULT_CHARS)[1:]]
    # A request ends after a turn's last tool result.
    ends = [i + 1 for i, m in enumerate(messages[:-1]) if m["role"] == "tool" and messages[i + 1]["role"] != "tool"]
    final = max(variants - 1, min(range(len(ends)), key=lambda k: abs(ends[k] - (2 * last + 2))))
    base = {"model": model, "tools": tools(), "temperature": 0.2, "max_tokens": 4096}
    return [json.dumps({**base, "messages": messages[:end]}).encode() for end in ends[final - variants + 1 : final + 1]]


def rust_toml(upstream_port: int) -> str:
    """NVIDIA's routes.toml: the passthrough and the stage-router route."""
    p, s = ROUTES["passthrough"], ROUTES["stage"]
    return textwrap.dedent(
        f"""
        schema_version = 1

        [llm_clients.up]
        format = "openai_chat"
        base_url = "http://127.0.0.1:{upstream_port}/v1"

        [targets.capable]
        id = "capable-model"
        llm_client = "up"

        [targets.efficient]
        id = "efficient-model"
        llm_client = "up"

        [routes.{p}]
        id = "{p}"
        type = "passthrough"
        target = "capable"

        [routes.{s}]
        id = "{s}"
        type = "stage_router"
        capable_target = "capable"
        efficient_target = "efficient"
        picker = "efficient_first"
        confidence_threshold = 0.5
        """
    )


def our_config(upstream_port: int) -> dict[str, Any]:
    """The same two routes in our config."""
    return {
        "llm_clients": {"up": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{upstream_port}/v1"}},
        "targets": {
            "capable": {"client": "up", "model": "capable-model"},
            "efficient": {"client": "up", "model": "efficient-model"},
        },
        "routes": {
            ROUTES["passthrough"]: {"type": "passthrough", "target": "capable"},
            ROUTES["stage"]: {
                "type": "stage_router",
                "capable": "capable",
                "efficient": "efficient",
                "picker": "efficient_first",
                "confidence_threshold": 0.5,
                "compat": "nvidia",
            },
        },
    }


class Serve(vs_rust.Proc):
    """``switchyard serve`` on any free port, as the shared harness runs it (start-up frozen out
    of the collector's sight, the server's own settings), pinned to the proxy core."""

    def __init__(self, name: str, config: Path, src: Path) -> None:
        self.name = name
        argv = [*vs_rust._taskset(vs_rust.PROXY_CORE), sys.executable, "-m", "switchyard", "serve", "-c", str(config)]
        self.proc = subprocess.Popen(
            [*argv, "--port", "0", "--log-level", "warning"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=config.parent,  # outside any tree: ``-m`` puts the working directory ahead of PYTHONPATH
            env={**os.environ, "PYTHONPATH": str(src.resolve())},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "switchyard: serving N route(s) (...) on http://host:port/v1"
        found = re.search(r":(\d+)/v1$", line.strip())
        if found is None:
            self.proc.kill()
            raise RuntimeError(f"{name} did not start: {line!r}")
        self.port = int(found.group(1))


def start_rust(nemo_python: Path, upstream_port: int, workdir: Path) -> vs_rust.Proc:
    (workdir / "routes.toml").write_text(rust_toml(upstream_port))
    (workdir / "rust_host.py").write_text(vs_rust.RUST_HOST)
    argv = [*vs_rust._taskset(vs_rust.PROXY_CORE), str(nemo_python), str(workdir / "rust_host.py")]
    return vs_rust.Proc(
        "rust", [*argv, str(workdir / "routes.toml")], env={**os.environ, "RUST_LOG": "warn"}, stdin=True
    )


def measure(servers: dict[str, int], pids: dict[str, int], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for kind, route in ROUTES.items():
        if kind not in args.routes:
            continue
        for turns in args.turns:
            bodies = agent_bodies(turns, route)
            per_round = max(1, args.requests // args.rounds)
            for port in servers.values():
                vs_rust._scenario(port, bodies, 1, max(VARIANTS, per_round // 4))  # pools, caches, prefixes
            runs = {who: rawhttp.Run() for who in servers}
            cpu: dict[str, list[float]] = {who: [] for who in pids}
            for _ in range(args.rounds):
                for who, port in servers.items():
                    c0 = vs_rust.cpu_seconds(pids[who]) if who in pids else 0.0
                    run = vs_rust._scenario(port, bodies, 1, per_round)
                    if who in pids:
                        cpu[who].append((vs_rust.cpu_seconds(pids[who]) - c0) / len(run.samples) * 1e6)
                    runs[who].samples += run.samples
                    runs[who].errors += run.errors
            direct = statistics.median(s.last_byte for s in runs["direct"].samples) * 1e3
            for who in pids:
                p50 = statistics.median(s.last_byte for s in runs[who].samples) * 1e3
                row = {
                    "route": kind,
                    "turns": turns,
                    "body_bytes": statistics.fmean(len(b) for b in bodies),
                    "server": who,
                    "n": len(runs[who].samples),
                    "errors": runs[who].errors,
                    "cpu_us": statistics.median(cpu[who]),
                    "cpu_us_min": min(cpu[who]),
                    "p50_ms": p50,
                    "added_p50_ms": p50 - direct,
                }
                rows.append(row)
                print(
                    f"  {kind:<11} {turns:>3} turns {row['body_bytes'] / 1024:6.1f} KiB  {who:<9}"
                    f" CPU/req {row['cpu_us']:7.0f} µs (min {row['cpu_us_min']:.0f})"
                    f"  added p50 {row['added_p50_ms']:7.3f} ms  errors {row['errors']}",
                    flush=True,
                )
    return rows


def table(rows: list[dict[str, Any]], who: str = "ours") -> list[str]:
    """The Markdown table of docs/benchmarks.md: one line per route and size."""
    out = [
        "| route | turns | body | Rust CPU/request | switchyard | ratio | Rust added p50 | switchyard added p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if r["server"] == who):
        rust = next(x for x in rows if x["server"] == "rust" and x["route"] == r["route"] and x["turns"] == r["turns"])
        out.append(
            f"| {r['route']} | {r['turns']} | {r['body_bytes'] / 1024:.0f} KiB | {rust['cpu_us'] / 1e3:.2f} ms"
            f" | {r['cpu_us'] / 1e3:.2f} ms | {r['cpu_us'] / rust['cpu_us']:.2f}x | {rust['added_p50_ms']:.2f} ms"
            f" | {r['added_p50_ms']:.2f} ms |"
        )
    return out


def verdict(rows: list[dict[str, Any]], who: str = "ours") -> list[dict[str, Any]]:
    """The issue's targets for these rows: met or not."""

    def get(server: str, route: str, turns: int) -> dict[str, Any]:
        return next(r for r in rows if r["server"] == server and r["route"] == route and r["turns"] == turns)

    checks: list[dict[str, Any]] = []
    big, small = max(TURNS), min(TURNS)
    if not any(r["turns"] == big and r["route"] == "passthrough" for r in rows) or not any(
        r["turns"] == big and r["route"] == "stage" for r in rows
    ):
        return checks
    o, r = get(who, "passthrough", big), get("rust", "passthrough", big)
    ratio = o["cpu_us"] / r["cpu_us"]
    checks.append({"measure": "passthrough 260 KiB CPU / Rust", "value": ratio, "target": "≤ 0.4", "met": ratio <= 0.4})
    checks.append(
        {
            "measure": "passthrough 260 KiB added p50 (ms)",
            "value": o["added_p50_ms"],
            "target": "≤ 1.5",
            "met": o["added_p50_ms"] <= TARGETS["added_p50_ms_passthrough_260"],
        }
    )
    o, r = get(who, "stage", big), get("rust", "stage", big)
    ratio = o["cpu_us"] / r["cpu_us"]
    checks.append(
        {"measure": "stage router 260 KiB CPU / Rust", "value": ratio, "target": "≤ 0.6", "met": ratio <= 0.6}
    )
    if any(r["turns"] == small for r in rows):
        lo, hi = get(who, "passthrough", small), get(who, "passthrough", big)
        growth, body = hi["cpu_us"] / lo["cpu_us"], hi["body_bytes"] / lo["body_bytes"]
        checks.append(
            {
                "measure": f"passthrough CPU growth 1 → {big} turns (body grows {body:.1f}x)",
                "value": growth,
                "target": f"≤ {body:.1f}",
                "met": growth <= body,
            }
        )
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="sequential requests per server, route and size")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per scenario")
    parser.add_argument("--turns", type=int, nargs="+", default=list(TURNS))
    parser.add_argument("--routes", nargs="+", default=list(ROUTES), choices=list(ROUTES))
    default_nemo = HERE.parent / ".nemo-venv" / "bin" / "python"
    if not default_nemo.exists():
        default_nemo = Path("/tmp/nemo-venv/bin/python")
    parser.add_argument("--nemo-python", type=Path, default=default_nemo)
    parser.add_argument("--baseline-src", type=Path, help="also run our proxy importing switchyard from this tree")
    parser.add_argument("--quick", action="store_true", help="smoke run (few requests)")
    parser.add_argument("--print-sizes", action="store_true", help="print the bodies' sizes and exit")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.print_sizes:
        for turns in args.turns:
            sizes = [len(b) for b in agent_bodies(turns, ROUTES["passthrough"])]
            mean = statistics.fmean(sizes)
            print(f"{turns:>3} turns: {mean:.0f} bytes ({mean / 1024:.1f} KiB; {min(sizes)} to {max(sizes)})")
        return
    if args.quick:
        args.requests, args.rounds = 60, 2
    nemo_python = ensure_nemo(args.nemo_python)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {int(vs_rust.LOAD_CORE)})
    vs_rust_loop()
    report: dict[str, Any] = {
        "machine": vs_rust.machine(),
        "command": " ".join(["python", "benchmarks/agent_sized.py", *sys.argv[1:]]),
    }
    procs: list[vs_rust.Proc] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        try:
            upstream = vs_rust.start_upstream()
            procs.append(upstream)
            (workdir / "ours.yaml").write_text(json.dumps(our_config(upstream.port)))  # JSON is YAML
            servers: dict[str, int] = {"direct": upstream.port}
            pids: dict[str, int] = {}
            builds = {"ours": HERE.parent, **({"baseline": args.baseline_src} if args.baseline_src else {})}
            started = [start_rust(nemo_python, upstream.port, workdir)]
            started += [Serve(who, workdir / "ours.yaml", src) for who, src in builds.items()]
            for proc in started:
                procs.append(proc)
                servers[proc.name], pids[proc.name] = proc.port, proc.pid
            print("sequential agent requests (interleaved rounds):", flush=True)
            report["rows"] = measure(servers, pids, args)
        finally:
            for proc in procs:
                proc.close()
    report["verdict"] = verdict(report["rows"])
    for who in ("ours", "baseline") if args.baseline_src else ("ours",):
        print(f"\n{who}:")
        print("\n".join(table(report["rows"], who)))
        for check in verdict(report["rows"], who):
            met = "met" if check["met"] else "NOT met"
            print(f"  {check['measure']}: {check['value']:.2f} (target {check['target']}) {met}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"agent_sized-{time.strftime('%Y%m%d-%H%M%S')}{'-' + args.label if args.label else ''}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {path.relative_to(HERE.parent)}")


def vs_rust_loop() -> None:
    """uvloop for this load client when installed, as vs_rust.py runs it."""
    try:
        import asyncio

        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


if __name__ == "__main__":
    main()
