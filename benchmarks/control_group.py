"""Coverage of the control-group estimate (issue 48's target: the 95 % interval of the points
lost covers the truth in ≥ 90 % of 200 seeds, 2,000 simulated sessions each).

Each seed simulates one deployment of a route with ``experiment: {control_share: S}``: 2,000
sessions with fresh ids, each assigned to an arm by the real sticky draw
(:func:`switchyard.routers.experiment.control_draw`, a hash of tenant and session id), each
resolved with a known probability per arm (control 0.70, routed 0.65: a true loss of 5 points)
and costing a skewed (log-normal) amount with a known mean per arm. The sessions become what
``switchyard serve`` writes — one to four decision records per session with ``details.arm`` and
their cost, and one ``POST /v1/feedback`` line per session — and
:func:`switchyard.engine.experiment_stats.experiment_stats` (what ``switchyard stats
--experiment`` prints) estimates the routed - control differences with their 95 % intervals.
Coverage is the share of seeds whose interval holds the true difference; the mean half-width
says how precise one deployment's estimate is.

Usage:
    python benchmarks/control_group.py                    # 200 seeds, shares 0.1 and 0.5
    python benchmarks/control_group.py --seeds 50 --shares 0.1
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from switchyard.engine.experiment_stats import experiment_stats
from switchyard.routers.experiment import control_draw

RESOLVE = {"control": 0.70, "routed": 0.65}
COST_MU = {"control": math.log(0.40), "routed": math.log(0.12)}  # log-normal location per session
COST_SIGMA = 0.8
TRUE_LOSS = RESOLVE["routed"] - RESOLVE["control"]
TRUE_COST_DIFF = math.exp(COST_MU["routed"] + COST_SIGMA**2 / 2) - math.exp(COST_MU["control"] + COST_SIGMA**2 / 2)


def simulated_log(seed: int, sessions: int, share: float) -> Iterator[dict[str, Any]]:
    """One deployment's decision-log lines (decision records, then a report per session)."""
    rng = random.Random(seed)
    for i in range(sessions):
        session = f"seed{seed}-session{i}"
        arm = "control" if control_draw("bench", session) < share else "routed"
        cost = rng.lognormvariate(COST_MU[arm], COST_SIGMA)
        turns = rng.randint(1, 4)
        for turn in range(turns):
            yield {
                "request_id": f"{session}-r{turn}",
                "route": "agent",
                "tenant": "bench",
                "session_id": session,
                "cost_usd": cost / turns,
                "status": 200,
                "details": {"arm": arm},
            }
        resolved = rng.random() < RESOLVE[arm]
        yield {
            "object": "switchyard.feedback",
            "tenant": "bench",
            "session_id": session,
            "resolved": resolved,
            "ts": 1.0,
        }


def run(seeds: int, sessions: int, share: float) -> dict[str, Any]:
    covered = {"resolved": 0, "cost_per_session": 0}
    widths: dict[str, list[float]] = {"resolved": [], "cost_per_session": []}
    controls: list[int] = []
    truth = {"resolved": TRUE_LOSS, "cost_per_session": TRUE_COST_DIFF}
    for seed in range(seeds):
        view = experiment_stats(simulated_log(seed, sessions, share))["agent"]
        controls.append(view["arms"]["control"]["sessions"])
        for name in covered:
            found = view["routed_vs_control"][name]
            covered[name] += found["low"] <= truth[name] <= found["high"]
            widths[name].append((found["high"] - found["low"]) / 2)
    return {
        "control_share": share,
        "seeds": seeds,
        "sessions": sessions,
        "control_sessions_mean": sum(controls) / len(controls),
        "true_resolved_diff": truth["resolved"],
        "true_cost_diff": truth["cost_per_session"],
        "coverage": {name: covered[name] / seeds for name in covered},
        "half_width_mean": {name: sum(w) / len(w) for name, w in widths.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.5])
    args = parser.parse_args()
    started = time.perf_counter()
    results = [run(args.seeds, args.sessions, share) for share in args.shares]
    for r in results:
        print(
            f"control_share {r['control_share']:.2f} ({r['control_sessions_mean']:.0f} control sessions of "
            f"{r['sessions']}), {r['seeds']} seeds: resolve-rate loss {r['true_resolved_diff']:+.1%} covered in "
            f"{r['coverage']['resolved']:.1%} (±{r['half_width_mean']['resolved']:.1%} mean half-width); "
            f"cost/session diff {r['true_cost_diff']:+.4f} covered in {r['coverage']['cost_per_session']:.1%}"
        )
    print(json.dumps({"results": results, "elapsed_s": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
