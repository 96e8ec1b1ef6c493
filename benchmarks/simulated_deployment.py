"""Issue 48's simulated deployment, through ``switchyard serve``: sessions replayed turn by turn
with feedback posted, ``switchyard tune --decision-log`` on the first half, the shipped and the
tuned config scored on the second half.

**The deployment.** For each pair of the agent suite (``examples/eval/agent-suite.yaml``, tasks
of the ``dev`` split: five AgentDojo pairs and Terminal-Bench) and each shipped agent config —
``examples/agent-routing.yaml`` (``type: trajectory``) and ``examples/coding-agent.yaml``
(``type: stage_router``) — the pair's efficient runs are the sessions, in file order; the first
half of the tasks (all their runs) is the deployment tuned on, the second half is held out.

1. A config is written with the shipped file's route block unchanged (plus ``experiment:
   {control_share: S}``), its two targets naming the pair's models at the suite's prices
   (cache read and write prices included), both on one OpenAI Chat client pointing at a
   :class:`~switchyard.testing.recorded.RecordedUpstream` on 127.0.0.1 (the capable target's
   client format changes from the shipped file's; routing does not read it).
2. A real ``switchyard serve -c deploy.yaml --decision-log log.jsonl`` process. A client drives
   each session turn by turn over HTTP (``x-switchyard-session-id``; the session id also as
   Chat ``user``, which is how the upstream knows the run): the efficient run's conversation
   until the first turn ``serve`` answers with the capable target, then the latch counterfactual
   of docs/agent-suite.md — the capable run of the task continued from the efficient context
   (Terminal-Bench: its runs are Claude Sonnet 4's, standing in for the efficient model's; the
   same run goes on). The upstream answers the served model's recorded next message with that
   turn's token usage (prompt-cache reads and writes). A control session is a switch at turn 1:
   the capable run as recorded. Then ``POST /v1/feedback {"session_id", "score"}``: the
   recorded outcome of what was served (the suite's table at the switch turn: 0/1 on AgentDojo,
   the capable or efficient model's resolve rate on Terminal-Bench).
3. ``switchyard tune -c deploy.yaml --route agent --decision-log log.jsonl --outcome score
   --grid ... --write tuned.yaml`` (the real CLI). Grids: the trajectory route's
   ``threshold=0.05,0.1,0.15,0.25,0.3`` (shipped: the checkpoint's 0.2); the stage route's
   ``persistent_errors.repeats=3,4,6``, then ``confidence_threshold=0.3,0.5,0.7`` on the config
   the first step left (shipped: 2 and 1.0). Each step either writes a config or keeps. (Since
   this run was pre-registered, tune also keeps a change its own k-fold rows show losing:
   ``...-serve.json`` is the run before that check, ``...-serve-guard.json`` after it.)
4. The shipped and the tuned config (their ``experiment`` removed: every session routed) each
   served again by ``serve`` on the second half's sessions, driven the same way. Per session the
   switch turn ``k`` comes from that log; resolve is the suite's recorded outcome at ``k``, cost
   is what ``serve`` logged (``cost_usd``). Always-capable (the reference of points lost and
   cost saved) is the capable run of each task priced the same way. The in-process replay
   (``switchyard.eval.replay``, the arithmetic the agent suite uses) decides the second half too:
   the benchmark checks that it switches every session at the same turn as ``serve`` did.

**Pre-registered** (written before any held-out number was seen): the comparison is tune's own
objective on held-out sessions. Points lost = 100 x (always-capable resolve - resolve), cost
saved = 1 - cost / always-capable cost, over the second half's sessions; tuned - shipped on both,
with a paired session-bootstrap 95 % interval (1,000 resamples, seed 0). The tuned config is
**better** on a pair when its cost saved is higher with the interval above zero and its held-out
points lost stay within ``max(budget, shipped points lost)``, or its points lost are lower with
the interval below zero and the cost-saved interval is not wholly below zero. It is **worse**
when it is not better and either interval shows a loss (points lost interval above zero, or
cost saved interval below zero). Otherwise the same. Where tune keeps the shipped setting the
two are the same config, scored once. Two runs, both fixed here: ``defaults`` (control share
0.3 and tune's own defaults: ``--min-sessions 30``, ``--min-capable 10``, budget 2 points) and
``small`` (control share 0.5, ``--min-sessions 8``, ``--min-capable 5``, budget 5 points: the
most a deployment of 12-31 sessions could ever tune with).

Usage:
    python benchmarks/simulated_deployment.py                     # both runs, every pair, both configs
    python benchmarks/simulated_deployment.py --run small --pair Terminal --config coding-agent --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import yaml

from switchyard.config.load import load_config
from switchyard.engine.session import bounded_id
from switchyard.eval.cache_cost import CachePrice, price_turns, turn_tokens
from switchyard.eval.replay import Trajectory, TurnDecision, replay
from switchyard.eval.suite import SuiteError, load_suite
from switchyard.eval.suite_runs import LineCache, PairData, build_pair, model_prices
from switchyard.protocol.intervals import rank_interval
from switchyard.server.runner import AppThread
from switchyard.testing.recorded import RecordedRun, RecordedUpstream

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "agent"
PY = sys.executable
CONFIGS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "agent-routing": ("examples/agent-routing.yaml", [("threshold", "0.05,0.1,0.15,0.25,0.3")]),
    "coding-agent": (
        "examples/coding-agent.yaml",
        [("persistent_errors.repeats", "3,4,6"), ("confidence_threshold", "0.3,0.5,0.7")],
    ),
}
RUNS = {
    "defaults": {"control_share": 0.3, "min_sessions": 30, "min_capable": 10, "max_points_lost": 2.0},
    "small": {"control_share": 0.5, "min_sessions": 8, "min_capable": 5, "max_points_lost": 5.0},
}
# Terminal-Bench is priced by its outcomes file in the suite; served, its turns are priced at the
# shipped agent configs' own target prices (Qwen3-Coder; Claude Sonnet with prompt caching).
FALLBACK_PRICES = {
    "qwen-3-coder-480B": CachePrice(0.45, 1.80, 0.45, 0.45),
    "claude-4-sonnet": CachePrice(3.0, 15.0, 0.30, 3.75),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pair:
    """One pair's sessions: runs, capable runs, tables, prices, halves."""

    def __init__(self, suite: Any, loaded: Any, spec: Any, lines: LineCache) -> None:
        self.spec = spec
        self.data: PairData = build_pair(suite, loaded, spec, split=suite.split("dev"), lines=lines)
        ds = suite.spec.datasets[spec.dataset]
        try:
            self.prices = model_prices(suite, loaded, (spec.efficient, spec.capable))
        except SuiteError:  # Terminal-Bench's models: the suite prices them from its outcomes file
            self.prices = {m: FALLBACK_PRICES[m] for m in (spec.efficient, spec.capable)}
        self.capable_runs: dict[str, Trajectory] = {}
        if ds.own_runs:
            key = ds.runs_field or "model"
            for line in lines.get(suite.path(ds.trajectories)):
                if line.fields.get(key) == spec.capable and line.resolved() is not None:
                    self.capable_runs.setdefault(line.task, line.traj)
        runs = list(self.data.runs)
        # The run id is the session id (x-switchyard-session-id, feedback, the upstream's user);
        # records keep one over 128 characters (Terminal-Bench's trial names) as its hash.
        self.sid = {r.id: r.id for r in runs}
        self.logged = {bounded_id(r.id): r.id for r in runs}
        tasks = list(dict.fromkeys(r.task or r.id for r in runs))
        early = set(tasks[: (len(tasks) + 1) // 2])
        self.first = [r for r in runs if (r.task or r.id) in early]
        self.second = [r for r in runs if (r.task or r.id) not in early]

    def recorded(self, runs: list[Trajectory]) -> dict[str, RecordedRun]:
        out = {}
        for r in runs:
            cap = self.capable_runs.get(r.task or r.id)
            out[self.sid[r.id]] = RecordedRun(r.messages, None if cap is None else cap.messages)
        return out

    def capable_cost(self, run: Trajectory) -> float:
        """Always-capable: the task's capable run (or the stand-in run) all on the capable model."""
        cap = self.capable_runs.get(run.task or run.id)
        tt = turn_tokens((cap or run).messages)
        return price_turns(tt, [self.spec.capable] * len(tt), self.prices)


def price_block(p: CachePrice) -> dict[str, float]:
    return {
        "input_per_mtok": p.input * 1.0,
        "output_per_mtok": p.output,
        "cached_input_per_mtok": p.cached_input,
        "cache_write_per_mtok": p.cache_write,
    }


def write_config(shipped: dict[str, Any], pair: Pair, port: int, share: float | None, path: Path) -> Path:
    raw = json.loads(json.dumps(shipped))
    raw["llm_clients"] = {"recorded": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"}}
    e, c = pair.spec.efficient, pair.spec.capable
    raw["targets"] = {
        "efficient": {"client": "recorded", "model": e, "price": price_block(pair.prices[e])},
        "capable": {"client": "recorded", "model": c, "price": price_block(pair.prices[c])},
    }
    route = raw["routes"][ROUTE]
    route.pop("experiment", None)
    if share is not None:
        route["experiment"] = {"control_share": share}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def without_experiment(source: Path, target: Path) -> Path:
    raw = yaml.safe_load(source.read_text())
    raw["routes"][ROUTE].pop("experiment", None)
    target.write_text(yaml.safe_dump(raw, sort_keys=False))
    return target


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    return out


async def serve_sessions(
    config: Path, log: Path, pair: Pair, runs: list[Trajectory], *, feedback: bool
) -> dict[str, Any]:
    """Serves ``runs`` through a real ``switchyard serve``; returns the upstream's counters."""
    upstream = RecordedUpstream(
        pair.recorded(runs), efficient_model=pair.spec.efficient, capable_model=pair.spec.capable
    )
    raw = yaml.safe_load(config.read_text())
    with AppThread(upstream) as up:
        raw["llm_clients"]["recorded"]["base_url"] = up.base_url
        config.write_text(yaml.safe_dump(raw, sort_keys=False))
        port = free_port()
        cmd = [PY, "-m", "switchyard", "serve", "-c", str(config), "--port", str(port)]
        proc = subprocess.Popen([*cmd, "--decision-log", str(log), "--log-level", "warning"], env=env())
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if (await client.get("/health")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"serve did not start: {cmd}")
                    await asyncio.sleep(0.1)
                gate = asyncio.Semaphore(6)

                async def one(run: Trajectory) -> None:
                    async with gate:
                        await drive(client, pair, run, feedback=feedback)

                await asyncio.gather(*(one(r) for r in runs))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    return {"unlatched_requests": upstream.unlatched}


async def drive(client: httpx.AsyncClient, pair: Pair, run: Trajectory, *, feedback: bool) -> None:
    """One session, turn by turn; then its outcome as feedback."""
    cap = pair.capable_runs.get(run.task or run.id)
    sid = pair.sid[run.id]
    pos_e = run.assistant_turns()
    pos_c = cap.assistant_turns() if cap is not None else []
    switch: int | None = None
    turn = 0
    while True:
        if switch is None or cap is None:
            if turn >= len(pos_e):
                break
            messages = run.messages[: pos_e[turn]]
        else:
            j = turn - switch
            if j >= len(pos_c):
                break
            head = cap.messages[: pos_c[0]] if switch == 0 else run.messages[: pos_e[switch]]
            messages = head + cap.messages[pos_c[0] : pos_c[j]] if j else head
        body: dict[str, Any] = {"model": ROUTE, "messages": messages, "user": sid}
        if run.tools:
            body["tools"] = run.tools
        r = await client.post("/v1/chat/completions", json=body, headers={"x-switchyard-session-id": sid})
        if r.status_code != 200:
            raise RuntimeError(f"{run.id} turn {turn + 1}: {r.status_code} {r.text[:300]}")
        if switch is None and r.headers.get("x-switchyard-selected-model") in ("capable", pair.spec.capable):
            switch = turn
        turn += 1
    if feedback:
        outcome = pair.data.tables[run.id].at(None if switch is None else switch + 1)[0]
        r = await client.post("/v1/feedback", json={"session_id": sid, "score": outcome})
        if r.status_code not in (200, 202):
            raise RuntimeError(f"feedback {run.id}: {r.status_code} {r.text[:300]}")


def read_log(log: Path, pair: Pair) -> dict[str, dict[str, Any]]:
    """Per run id: switch turn (1-based), USD as served, arm."""
    run_of = pair.logged
    out: dict[str, dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("object") == "switchyard.feedback" or obj.get("route") != ROUTE:
            continue
        s = out.setdefault(run_of[obj["session_id"]], {"turns": 0, "k": None, "usd": 0.0, "arm": None})
        s["turns"] += 1
        if s["k"] is None and obj.get("selected") == "capable":
            s["k"] = s["turns"]
        s["usd"] += float(obj.get("cost_usd") or 0.0) + float(obj.get("feature_cost_usd") or 0.0)
        s["arm"] = (obj.get("details") or {}).get("arm", s["arm"])
    return out


def tune(config: Path, log: Path, key: str, grid: str, opts: dict[str, Any], write: Path) -> dict[str, Any]:
    cmd = [PY, "-m", "switchyard", "tune", "-c", str(config), "--route", ROUTE, "--decision-log", str(log)]
    cmd += ["--grid", f"{key}={grid}", "--outcome", "score", "--json", "--write", str(write)]
    cmd += ["--min-sessions", str(opts["min_sessions"]), "--min-capable", str(opts["min_capable"])]
    cmd += ["--max-points-lost", str(opts["max_points_lost"])]
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"key": key, "verdict": "refused", "message": done.stderr.strip().splitlines()[-1:], "command": cmd}
    found = json.loads(done.stdout)
    keep = (
        "verdict",
        "current",
        "chosen",
        "sessions",
        "capable_sessions",
        "rows",
        "held_out",
        "held_out_difference",
        "notes",
    )
    return {"key": key, **{k: found[k] for k in keep}, "changed": found["verdict"] == "changed"}


async def in_process_switches(config: Path, runs: list[Trajectory]) -> dict[str, int | None]:
    """The agent suite's arithmetic: the route decides every turn of the efficient run."""
    loaded = load_config(config)
    seen: dict[str, list[TurnDecision]] = {}
    await replay(loaded, ROUTE, runs, progress=False, on_turn=lambda t: seen.setdefault(t.trajectory, []).append(t))
    return {
        r.id: next((i + 1 for i, t in enumerate(seen.get(r.id, [])) if t.decided.selected == "capable"), None)
        for r in runs
    }


def held_out(
    pair: Pair, runs: list[Trajectory], a: dict[str, Any], b: dict[str, Any], resamples: int
) -> dict[str, Any]:
    """Shipped (a) vs tuned (b) on ``runs``: points lost, cost saved, paired differences."""
    n = len(runs)
    ra = [pair.data.tables[r.id].at(a[r.id]["k"])[0] for r in runs]
    rb = [pair.data.tables[r.id].at(b[r.id]["k"])[0] for r in runs]
    rc = [pair.data.tables[r.id].at(1)[0] for r in runs]
    ca, cb = [a[r.id]["usd"] for r in runs], [b[r.id]["usd"] for r in runs]
    cc = [pair.capable_cost(r) for r in runs]

    def measures(idx: list[int]) -> tuple[float, float, float, float]:
        cap = sum(rc[i] for i in idx) / len(idx)
        usd = sum(cc[i] for i in idx)
        return (
            100 * (cap - sum(ra[i] for i in idx) / len(idx)),
            100 * (cap - sum(rb[i] for i in idx) / len(idx)),
            1 - sum(ca[i] for i in idx) / usd,
            1 - sum(cb[i] for i in idx) / usd,
        )

    rng = random.Random(0)
    draws = [measures([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]

    def iv(xs: list[float]) -> list[float]:
        return list(rank_interval(xs))

    la, lb, sa, sb = measures(list(range(n)))
    return {
        "sessions": n,
        "shipped": {
            "points_lost": la,
            "cost_saved": sa,
            "points_lost_interval": iv([d[0] for d in draws]),
            "cost_saved_interval": iv([d[2] for d in draws]),
        },
        "tuned": {
            "points_lost": lb,
            "cost_saved": sb,
            "points_lost_interval": iv([d[1] for d in draws]),
            "cost_saved_interval": iv([d[3] for d in draws]),
        },
        "tuned_minus_shipped": {
            "points_lost": lb - la,
            "points_lost_interval": iv([d[1] - d[0] for d in draws]),
            "cost_saved": sb - sa,
            "cost_saved_interval": iv([d[3] - d[2] for d in draws]),
        },
    }


def verdict(h: dict[str, Any], budget: float, same: bool) -> str:
    if same:
        return "same (shipped kept)"
    d = h["tuned_minus_shipped"]
    lo_l, hi_l = d["points_lost_interval"]
    lo_s, hi_s = d["cost_saved_interval"]
    within = h["tuned"]["points_lost"] <= max(budget, h["shipped"]["points_lost"])
    if (d["cost_saved"] > 0 and lo_s > 0 and within) or (d["points_lost"] < 0 and hi_l < 0 and hi_s >= 0):
        return "better"
    if lo_l > 0 or hi_s < 0:
        return "worse"
    return "same"


async def one(suite: Any, name: str, spec: Any, lines: LineCache, run: str, args: argparse.Namespace) -> dict[str, Any]:
    path, steps = CONFIGS[name]
    shipped = yaml.safe_load((ROOT / path).read_text())
    loaded = load_config(ROOT / path)
    pair = Pair(suite, loaded, spec, lines)
    opts = RUNS[run]
    if args.keep:
        slug = re.sub(r"[^a-z0-9]+", "-", pair.data.name.lower()).strip("-")
        work = Path(args.keep) / run / f"{name}-{slug}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        work = Path(tempfile.mkdtemp(prefix=f"simdeploy-{name}-"))
    found: dict[str, Any] = {
        "config": path,
        "pair": pair.data.name,
        "sessions": len(pair.data.runs),
        "first_half": len(pair.first),
        "second_half": len(pair.second),
    }
    deploy = write_config(shipped, pair, 0, opts["control_share"], work / "deploy.yaml")
    log = work / "deploy.jsonl"
    served = await serve_sessions(deploy, log, pair, pair.first, feedback=True)
    sessions = read_log(log, pair)
    found["deployment"] = {
        "control": sum(1 for s in sessions.values() if s["arm"] == "control"),
        "routed": sum(1 for s in sessions.values() if s["arm"] == "routed"),
        "switched": sum(1 for s in sessions.values() if s["arm"] == "routed" and s["k"] is not None),
        **served,
    }
    current, tuned_steps = deploy, []
    for key, grid in steps:
        out = work / f"tuned-{key}.yaml"
        step = tune(current, log, key, grid, opts, out)
        tuned_steps.append(step)
        if step.get("changed"):
            current = out
    found["tune"] = tuned_steps
    changed = current != deploy
    shipped_cfg = without_experiment(deploy, work / "shipped-score.yaml")
    a_log = work / "shipped-score.jsonl"
    a_served = await serve_sessions(shipped_cfg, a_log, pair, pair.second, feedback=False)
    a = read_log(a_log, pair)
    if changed:
        tuned_cfg = without_experiment(current, work / "tuned-score.yaml")
        b_log = work / "tuned-score.jsonl"
        b_served = await serve_sessions(tuned_cfg, b_log, pair, pair.second, feedback=False)
        b = read_log(b_log, pair)
    else:
        b, b_served = a, a_served
    inproc = await in_process_switches(shipped_cfg, pair.second)
    found["in_process_agrees"] = {
        "sessions": len(pair.second),
        "same_switch_turn": sum(1 for r in pair.second if inproc[r.id] == a[r.id]["k"]),
    }
    table_usd = sum(pair.data.tables[r.id].at(a[r.id]["k"])[1] for r in pair.second)
    found["shipped_usd_per_session"] = {
        "served": sum(a[r.id]["usd"] for r in pair.second) / len(pair.second),
        "suite_table": table_usd / len(pair.second),
        "note": "equal up to token rounding where the suite prices tokens (AgentDojo); Terminal-Bench's table "
        "is its outcomes file's USD per trial, served turns are priced by their tokens",
    }
    found["scoring_unlatched_requests"] = {
        "shipped": a_served["unlatched_requests"],
        "tuned": b_served["unlatched_requests"],
    }
    h = held_out(pair, pair.second, a, b, args.bootstrap)
    found["held_out"] = h
    found["verdict"] = verdict(h, opts["max_points_lost"], not changed)
    found["files"] = str(work)
    return found


def show(r: dict[str, Any]) -> None:
    dep = r["deployment"]
    print(
        f"{r['config']} on {r['pair']}: {r['sessions']} sessions; first half {r['first_half']} "
        f"(routed {dep['routed']}, switched {dep['switched']}, control {dep['control']})"
    )
    for step in r["tune"]:
        if step["verdict"] == "refused":
            print(f"    tune {step['key']}: refused: {' '.join(step['message'])}")
        else:
            print(
                f"    tune {step['key']}: {step['verdict']} ({step['current']:g} -> {step['chosen']:g}; "
                f"{step['sessions']} routed, {step['capable_sessions']} control)"
            )
    h = r["held_out"]
    s, t, d = h["shipped"], h["tuned"], h["tuned_minus_shipped"]

    def pair_of(x: dict[str, Any]) -> str:
        li, ci = x["points_lost_interval"], x["cost_saved_interval"]
        return (
            f"lost {x['points_lost']:+.1f} [{li[0]:+.1f}, {li[1]:+.1f}], "
            f"saved {100 * x['cost_saved']:.1f}% [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
        )

    print(f"  held out {h['sessions']}: shipped {pair_of(s)}")
    if r["verdict"] != "same (shipped kept)":
        print(f"      tuned {pair_of(t)}")
        li, ci = d["points_lost_interval"], d["cost_saved_interval"]
        print(
            f"      tuned - shipped: lost {d['points_lost']:+.1f} [{li[0]:+.1f}, {li[1]:+.1f}], "
            f"saved {100 * d['cost_saved']:+.1f} pts [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
        )
    agree = r["in_process_agrees"]
    usd = r["shipped_usd_per_session"]
    print(f"  shipped $/session as served {usd['served']:.5f}, suite table {usd['suite_table']:.5f}")
    print(
        f"  -> {r['verdict']}; in-process replay switches {agree['same_switch_turn']}/{agree['sessions']} "
        f"held-out sessions at serve's turn; unlatched requests {r['scoring_unlatched_requests']}"
    )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    suite = load_suite(ROOT / "examples/eval/agent-suite.yaml", data_dir=args.data_dir)
    lines = LineCache()
    pairs = [p for p in suite.spec.pairs if not args.pair or any(s in p.name for s in args.pair)]
    out: dict[str, Any] = {"runs": {}}
    for run in args.run or list(RUNS):
        rows = []
        print(f"== run {run}: {RUNS[run]}")
        for name in args.config or list(CONFIGS):
            for spec in pairs:
                r = await one(suite, name, spec, lines, run, args)
                show(r)
                rows.append(r)
        out["runs"][run] = {"settings": RUNS[run], "results": rows}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared/data"))
    p.add_argument("--pair", action="append", default=[], help="substring of a pair's name (repeatable)")
    p.add_argument("--config", action="append", choices=list(CONFIGS), help="shipped config (repeatable)")
    p.add_argument("--run", action="append", choices=list(RUNS), help="pre-registered run (repeatable)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--json", metavar="FILE")
    p.add_argument(
        "--keep",
        metavar="DIR",
        help="keep each deployment's files in DIR/RUN/CONFIG-PAIR (deploy.yaml, deploy.jsonl, tuned-*.yaml, the "
        "scoring configs and logs) instead of a temporary folder",
    )
    args = p.parse_args()
    start = time.perf_counter()
    result = asyncio.run(main_async(args))
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(f"({result['seconds']} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
