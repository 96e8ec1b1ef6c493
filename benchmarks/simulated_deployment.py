"""A simulated deployment of issue 48's loop: logged sessions with feedback -> ``switchyard tune
--decision-log`` on the first half -> the tuned and the shipped config scored on the second half.

**What is simulated, and how (in-process, not through ``serve``).** For each pair of the agent
suite (``examples/eval/agent-suite.yaml``: AgentDojo pairs and Terminal-Bench, tasks of the
``dev`` split), the efficient model's recorded runs are the deployment's sessions, in file order;
the first half of the tasks (all their runs) is logged and tuned on, the second half scored.
The route (``examples/agent-routing.yaml``, ``type: trajectory``, its shipped threshold) decides
every turn through the engine's decide path (:func:`switchyard.eval.replay.replay`, the same
router code ``serve`` runs; no HTTP). A hash of the session id puts ``--control-share`` of the
sessions in the control arm (the capable model's own run, whole). Each routed session is served
as the latch counterfactual of the suite (docs/agent-suite.md): the efficient run until the
route's first switch at turn k, the capable model's run after it — resolve and USD from the
suite's tables (prompt-cache pricing where the runs carry tokens). The decision log is written
the way ``serve --decision-log`` writes it: per served turn ``score``, ``source``, ``selected``,
``cost_usd``, ``baseline_cost_usd`` (the same tokens at the capable price) and ``details.arm``;
the capable remainder of a switched session as one record; then one feedback line per session
(``score`` = the recorded outcome: 0/1 on AgentDojo, the capable or efficient model's resolve
rate on Terminal-Bench's paired trials).

Then ``tune_log`` (what ``switchyard tune --decision-log`` runs) on the first half's log, and
both thresholds — shipped and tuned — replayed exactly on the second half's runs (decided again
by the router with each threshold, scored by the suite's tables): mean resolve and USD per
session, and the paired difference with a session-bootstrap 95 % interval. The suite's own
recorded runs are the ground truth here; no model is called.

Usage:
    python benchmarks/simulated_deployment.py                       # every pair of the suite
    python benchmarks/simulated_deployment.py --control-share 0.3 --min-sessions 30 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from switchyard.config.load import load_config
from switchyard.engine.joined_log import join_log
from switchyard.eval.agent_replay import with_setting
from switchyard.eval.cache_cost import price_turns
from switchyard.eval.log_tune import LogTuneError, sessions_from, tune_log
from switchyard.eval.replay import TurnDecision, replay
from switchyard.eval.suite import load_suite
from switchyard.eval.suite_runs import LineCache, PairData, build_pair, model_prices, turn_tokens
from switchyard.routers.trajectory.model import load as load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "agent"


def in_control(session: str, share: float) -> bool:
    digest = hashlib.sha256(f"control:{session}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


async def first_switch(loaded: Any, runs: list[Any], capable: str) -> dict[str, tuple[int | None, list[TurnDecision]]]:
    """Per run: the 1-based turn of the route's first capable decision, and every turn."""
    turns: dict[str, list[TurnDecision]] = {}
    await replay(loaded, ROUTE, runs, progress=False, on_turn=lambda t: turns.setdefault(t.trajectory, []).append(t))
    out: dict[str, tuple[int | None, list[TurnDecision]]] = {}
    for run in runs:
        seen = turns.get(run.id, [])
        k = next((i + 1 for i, t in enumerate(seen) if t.decided.selected == capable), None)
        out[run.id] = (k, seen)
    return out


def per_turn_costs(data: PairData, run: Any, prices: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Each turn's USD on the efficient and on the capable model (same tokens)."""
    table = data.tables[run.id]
    n = max(1, len(run.assistant_turns()))
    if data.pricing != "cache":  # no per-turn tokens: spread the run's totals evenly
        return [table.never[1] / n] * n, [table.at(1)[1] / n] * n
    tt = turn_tokens(run.messages)
    e, c = data.pair.efficient, data.pair.capable

    def cumulative(model: str) -> list[float]:
        return [price_turns(tt[:i], [model] * i, prices) for i in range(len(tt) + 1)]

    ce, cc = cumulative(e), cumulative(c)
    return [ce[i + 1] - ce[i] for i in range(len(tt))], [cc[i + 1] - cc[i] for i in range(len(tt))]


def write_log(
    data: PairData, runs: list[Any], switches: dict[str, Any], prices: dict[str, Any], share: float, capable: str
) -> list[dict[str, Any]]:
    """The decision log a deployment of ``runs`` would write (records and feedback lines)."""
    lines: list[dict[str, Any]] = []
    for n, run in enumerate(runs):
        table = data.tables[run.id]
        eff, cap = per_turn_costs(data, run, prices)
        if in_control(run.id, share):
            outcome, cost = table.at(1)
            for i, c in enumerate(cap):
                lines.append(
                    _record(run.id, i, None, "control", capable, c * cost / max(sum(cap), 1e-12), c, "control")
                )
        else:
            k, seen = switches[run.id]
            outcome, cost = table.at(k)
            stop = len(eff) if k is None else k - 1
            for i in range(min(stop, len(seen))):
                d = seen[i].decided
                lines.append(_record(run.id, i, d.score, d.source, d.selected or "efficient", eff[i], cap[i], "routed"))
            if k is not None and k - 1 < len(seen):
                d = seen[k - 1].decided
                rest = max(0.0, cost - sum(eff[: k - 1]))
                lines.append(_record(run.id, k - 1, d.score, d.source, capable, rest, rest, "routed"))
        lines.append({"object": "switchyard.feedback", "session_id": run.id, "score": outcome, "ts": float(n)})
    return lines


def _record(
    session: str, i: int, score: float | None, source: str, selected: str, cost: float, base: float, arm: str
) -> dict[str, Any]:
    return {
        "route": ROUTE,
        "request_id": f"{session}#{i}",
        "session_id": session,
        "source": source,
        "score": score,
        "selected": selected,
        "cost_usd": cost,
        "baseline_cost_usd": base,
        "details": {"arm": arm},
    }


def held_out(data: PairData, a: dict[str, Any], b: dict[str, Any], runs: list[Any], resamples: int) -> dict[str, Any]:
    """Shipped (a) vs tuned (b) on ``runs``: resolve and USD per session, paired differences."""
    va = [data.tables[r.id].at(a[r.id][0]) for r in runs]
    vb = [data.tables[r.id].at(b[r.id][0]) for r in runs]
    n = len(runs)
    rng = random.Random(0)
    dr, dc = [], []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        dr.append(sum(vb[i][0] - va[i][0] for i in idx) / n)
        dc.append(sum(vb[i][1] - va[i][1] for i in idx) / n)
    dr.sort()
    dc.sort()

    def iv(xs: list[float]) -> list[float]:
        return [xs[int(0.025 * (len(xs) - 1))], xs[round(0.975 * (len(xs) - 1))]]

    return {
        "sessions": n,
        "shipped": {"resolve": sum(v[0] for v in va) / n, "usd": sum(v[1] for v in va) / n},
        "tuned": {"resolve": sum(v[0] for v in vb) / n, "usd": sum(v[1] for v in vb) / n},
        "tuned_minus_shipped": {
            "resolve": sum(vb[i][0] - va[i][0] for i in range(n)) / n,
            "resolve_interval": iv(dr),
            "usd": sum(vb[i][1] - va[i][1] for i in range(n)) / n,
            "usd_interval": iv(dc),
        },
    }


async def one_pair(suite: Any, loaded: Any, pair: Any, args: argparse.Namespace, current: float) -> dict[str, Any]:
    data = build_pair(suite, loaded, pair, split=suite.split(args.split or None), lines=LineCache())
    capable = str(loaded.raw["routes"][ROUTE]["capable"])
    prices = model_prices(suite, loaded, (pair.efficient, pair.capable)) if data.pricing == "cache" else {}
    runs = list(data.runs)
    tasks = list(dict.fromkeys(r.task or r.id for r in runs))  # halves by task: a task's runs stay in one
    early = set(tasks[: (len(tasks) + 1) // 2])
    first = [r for r in runs if (r.task or r.id) in early]
    second = [r for r in runs if (r.task or r.id) not in early]
    shipped = await first_switch(loaded, runs, capable)
    log = write_log(data, first, shipped, prices, args.control_share, capable)
    found: dict[str, Any] = {"pair": data.name, "sessions": len(runs), "first_half": len(first)}
    try:
        tuned = tune_log(
            sessions_from(join_log(log), capable_target=capable, outcome="score"),
            args.grid,
            current,
            max_points_lost=args.max_points_lost,
            folds=args.folds,
            min_sessions=args.min_sessions,
            min_capable=args.min_capable,
            resamples=args.bootstrap,
        )
        found.update(
            verdict=tuned["verdict"],
            chosen=tuned["chosen"],
            routed=tuned["sessions"],
            control=tuned["capable_sessions"],
        )
        found["notes"] = tuned["notes"]
        found["train_rows"] = [
            {k: r[k] for k in ("value", "current", "points_lost", "cost_saved", "intervals", "moved", "censored")}
            for r in tuned["rows"]
        ]
        found["cv_held_out"] = tuned["held_out"]
    except LogTuneError as exc:
        found.update(verdict=f"refused: {exc}", chosen=current)
    chosen = float(found["chosen"])
    other = (
        shipped
        if chosen == current
        else await first_switch(with_setting(loaded, ROUTE, "threshold", chosen), runs, capable)
    )
    found["held_out"] = held_out(data, shipped, other, second, args.bootstrap)
    return found


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    suite = load_suite(ROOT / "examples/eval/agent-suite.yaml", data_dir=args.data_dir)
    loaded = load_config(ROOT / "examples/agent-routing.yaml")
    current = float(load_checkpoint(None).training["default_threshold_with_rules"])
    pairs = [p for p in suite.spec.pairs if not args.pair or any(s in p.name for s in args.pair)]
    out = []
    for pair in pairs:
        out.append(await one_pair(suite, loaded, pair, args, current))
    return {"current_threshold": current, "grid": args.grid, "pairs": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared/data"))
    p.add_argument("--split", default="dev", help='the suite split whose tasks are the sessions ("": all tasks)')
    p.add_argument("--pair", action="append", default=[], help="substring of a pair's name (repeatable)")
    p.add_argument("--grid", type=lambda s: [float(v) for v in s.split(",")], default=[0.05, 0.1, 0.15, 0.25, 0.3])
    p.add_argument("--control-share", type=float, default=0.3)
    p.add_argument("--max-points-lost", type=float, default=5.0)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--min-sessions", type=int, default=30)
    p.add_argument("--min-capable", type=int, default=10)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    start = time.perf_counter()
    result = asyncio.run(main_async(args))
    result["seconds"] = round(time.perf_counter() - start, 1)
    for r in result["pairs"]:
        h = r["held_out"]
        d = h["tuned_minus_shipped"]
        print(f"{r['pair']}: {r['sessions']} sessions, tuned on {r['first_half']} -> {r['verdict']} ({r['chosen']:g})")
        for row in r.get("train_rows", []):
            mark = " (shipped)" if row["current"] else ""
            print(
                f"    first half, threshold {row['value']:g}{mark}: points lost {row['points_lost']:+.1f}, "
                f"saved {100 * row['cost_saved']:.0f}%, moved {row['moved']}, censored {row['censored']}"
            )
        print(
            f"  held out {h['sessions']}: shipped resolve {h['shipped']['resolve']:.3f} ${h['shipped']['usd']:.4f}"
            f" | tuned {h['tuned']['resolve']:.3f} ${h['tuned']['usd']:.4f}"
            f" | diff resolve {d['resolve']:+.3f} [{d['resolve_interval'][0]:+.3f}, {d['resolve_interval'][1]:+.3f}]"
            f" usd {d['usd']:+.4f} [{d['usd_interval'][0]:+.4f}, {d['usd_interval'][1]:+.4f}]"
        )
    print(f"({result['seconds']} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
