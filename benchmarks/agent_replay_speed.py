"""How long the counterfactual agent replay takes on the recorded Terminal-Bench runs.

Run:
    .venv/bin/python benchmarks/agent_replay_speed.py [DATA_DIR] [--repeat N]

DATA_DIR defaults to ``$SWITCHYARD_DATA_DIR`` or ``<repo>/../shared/data``. Replays the 90
mini-SWE-agent runs (1,560 assistant turns) through ``examples/stage-router.yaml`` route
``agent`` and scores them against the paired Qwen3-Coder / Sonnet 4 outcomes with 1,000
bootstrap resamples — what ``switchyard replay --outcomes`` does, without the CLI's start-up and
file writing — and prints the wall time of the replay (the route's decisions) and of the
simulation separately, best of N. The target of issue 22 is 30 s for the whole.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

from switchyard.config.load import load_config
from switchyard.eval.agent_replay import prepare
from switchyard.eval.counterfactual import simulate
from switchyard.eval.paired import runs_from_turns
from switchyard.eval.replay import replay

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "data", nargs="?", default=os.environ.get("SWITCHYARD_DATA_DIR", str(REPO.parent / "shared/data"))
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(args.data)
    runs = root / "terminal-bench-trajectories" / "terminal_bench_trajectories_dev.jsonl"
    tasks = root / "terminal-bench-paired" / "terminal_bench_paired_tasks.jsonl"
    if not runs.is_file() or not tasks.is_file():
        print(f"data not found under {root}", file=sys.stderr)
        return 1
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s)")
    best: tuple[float, float, float] | None = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        loaded = load_config(REPO / "examples" / "stage-router.yaml")
        setup = prepare(loaded, "agent", tasks, efficient_model="qwen-3-coder-480B", capable_model="claude-4-sonnet")
        summary = asyncio.run(replay(loaded, "agent", runs, tiers=setup.tiers, progress=False))
        t1 = time.perf_counter()
        scored = runs_from_turns(summary.turns, setup.tier_map, setup.outcomes)
        report = simulate(scored.runs, setup.outcomes, resamples=1000, seed=0)
        t2 = time.perf_counter()
        times = (t1 - t0, t2 - t1, t2 - t0)
        best = times if best is None or times[2] < best[2] else best
    assert best is not None
    turns = len(summary.turns)
    route = report.case("base").row("route")
    print(
        f"replay: {len(scored.runs)} runs, {turns} turns in {best[0]:.2f} s ({turns / best[0]:,.0f} turns/s); "
        f"counterfactual (3 cases, 1,000 resamples): {best[1]:.2f} s; total {best[2]:.2f} s (best of {args.repeat})"
    )
    print(f"route agent, base case: {route.points_lost:+.1f} points, {route.cost_saved:.1%} saved")
    print("command: .venv/bin/python benchmarks/agent_replay_speed.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
