"""How long ``switchyard replay --suite`` takes on the shipped suite (issue 45).

Run:
    .venv/bin/python benchmarks/agent_suite_speed.py [DATA_DIR] [--repeat N] [-c CONFIG]

DATA_DIR defaults to ``$SWITCHYARD_DATA_DIR`` or ``<repo>/../shared/data``. Reads
``examples/eval/agent-suite.yaml`` (five AgentDojo pairs on the efficient models' own runs,
cache-priced; Terminal-Bench's pair on stand-in runs), replays every pair through route ``agent``
of CONFIG (default ``examples/coding-agent.yaml``) and scores the suite with 1,000 task-bootstrap
resamples — what the CLI does, without its start-up — and prints the wall time, best of N, on the
one core this process uses. The brief asks for well under a minute.
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
from switchyard.eval.suite import load_suite
from switchyard.eval.suite_replay import run_suite

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "data", nargs="?", default=os.environ.get("SWITCHYARD_DATA_DIR", str(REPO.parent / "shared/data"))
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-c", "--config", default=str(REPO / "examples" / "coding-agent.yaml"))
    args = parser.parse_args()
    root = Path(args.data)
    if not (root / "agentdojo" / "agentdojo_trajectories.jsonl").is_file():
        print(f"data not found under {root}", file=sys.stderr)
        return 1
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s)")
    best = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        loaded = load_config(args.config, env={})
        suite = load_suite(REPO / "examples" / "eval" / "agent-suite.yaml", data_dir=root)
        result = asyncio.run(run_suite(loaded, "agent", suite, resamples=1000, seed=0))
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None or elapsed < best else best
    assert best is not None
    print(
        f"suite: {len(result.score.pairs)} pairs, {result.decisions} decisions, 1,000 resamples: "
        f"{best:.2f} s (best of {args.repeat}, files read and config loaded included)"
    )
    print(f"command: .venv/bin/python benchmarks/agent_suite_speed.py -c {os.path.relpath(args.config, REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
