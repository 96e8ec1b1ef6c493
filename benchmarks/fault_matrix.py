"""Prints the fault-injection results table of docs/reliability.md.

Every fault the fake upstream can inject, JSON and SSE, through the proxy on 127.0.0.1 with the
real openai SDK (its own retries off). For each: the outcome, the attempts from the decision
record, the elapsed time, the waits the engine chose, and whether it matched the expectation.

Run:
    .venv/bin/python benchmarks/fault_matrix.py            # markdown table on stdout
    .venv/bin/python benchmarks/fault_matrix.py --repeat 5 # worst elapsed time of 5 runs

Exit status 1 when any scenario did not behave as expected.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from typing import Any

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import serve_fake
from switchyard.testing.fake_upstream import refused_url
from switchyard.testing.fault_matrix import SCENARIOS, Result, fake_upstream, markdown, matrix_config, run_scenario


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario; the slowest is reported")
    args = parser.parse_args()
    upstream = serve_fake(fake_upstream())
    records: list[DecisionRecord] = []

    def record_for(request_id: str) -> DecisionRecord:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            for record in reversed(records):
                if record.request_id == request_id:
                    return record
            time.sleep(0.01)
        raise RuntimeError(f"no decision record for {request_id!r}")

    results: list[Result] = []
    try:
        sy = Switchyard.from_config(matrix_config(upstream.port, refused_url()))
        sy.on_decision(records.append)
        with ServerThread(sy) as proxy:
            for scenario in SCENARIOS:
                for mode in ("json", "sse"):
                    runs: list[Result] = []
                    for _ in range(max(1, args.repeat)):
                        upstream.app.reset()
                        runs.append(run_scenario(scenario, mode, proxy.base_url, record_for))
                    bad = [r for r in runs if r.problems()]
                    results.append(bad[0] if bad else max(runs, key=lambda r: r.elapsed_s))
        stats: dict[str, Any] = sy.stats()["counters"]
        sy.close()
    finally:
        upstream.stop()
    print(markdown(results))
    print()
    print(f"Counters after the run: {stats}")
    print(
        f"Command: .venv/bin/python benchmarks/fault_matrix.py --repeat {args.repeat}  "
        f"(Python {platform.python_version()}, {platform.machine()})"
    )
    return 1 if any(r.problems() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
