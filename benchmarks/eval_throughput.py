"""How fast ``switchyard eval`` and ``switchyard replay`` decide recorded items (decide only).

Run:
    .venv/bin/python benchmarks/eval_throughput.py [DATA_DIR]

DATA_DIR defaults to ``$SWITCHYARD_DATA_DIR`` or ``<repo>/../shared/data``. Prints decisions per
second for the routellm-evals dataset (random route) and assistant turns per second for the
tau-bench trajectories, with the command that produced them.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from pathlib import Path

from switchyard.config.load import load_config
from switchyard.eval.dataset import Dataset
from switchyard.eval.evaluate import run_eval
from switchyard.eval.replay import replay

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    root = Path(
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SWITCHYARD_DATA_DIR", REPO.parent / "shared/data")
    )
    evals = root / "routellm-evals" / "routellm_evals.jsonl"
    tau = root / "tau-bench-trajectories" / "tau_bench_airline_gpt4o.jsonl"
    if not evals.is_file() or not tau.is_file():
        print(f"data not found under {root}", file=sys.stderr)
        return 1
    loaded = load_config(REPO / "examples" / "eval" / "routellm.yaml")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s)")

    t0 = time.perf_counter()
    result = asyncio.run(run_eval(loaded, "mix", Dataset(evals), progress=False))
    dt = time.perf_counter() - t0
    print(f"eval   routellm-evals, route mix (random): {result.row.n} items in {dt:.2f} s = {result.row.n / dt:,.0f}/s")

    t0 = time.perf_counter()
    summary = asyncio.run(replay(loaded, "mix", tau, progress=False))
    dt = time.perf_counter() - t0
    turns = len(summary.turns)
    print(f"replay tau-bench airline, route mix: {turns} turns in {dt:.2f} s = {turns / dt:,.0f}/s")
    print("command: .venv/bin/python benchmarks/eval_throughput.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
