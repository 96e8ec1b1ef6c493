"""Keep CPU cores busy while the test suite runs (``make test-stress``).

Starts ``--procs`` busy-looping processes (default: one per core) and stops them after
``--seconds`` (a bound: a hog that outlives its caller ends by itself), on SIGTERM/SIGINT, or
when the parent that started it exits. Standard library only, so it runs on a fresh clone.

    python tools/cpu_hog.py --procs 2 --seconds 3600 &   # ... then kill %1
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time


def _spin(until: float, parent: int) -> None:
    """Burns one core until ``until`` (monotonic) or until ``parent`` is gone."""
    n = 0
    while True:
        for _ in range(200_000):
            n = (n * 1103515245 + 12345) & 0x7FFFFFFF
        if time.monotonic() >= until or os.getppid() != parent:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Keep CPU cores busy (bounded) while tests run.")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)")
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long (default 3600)")
    args = parser.parse_args(argv)
    until = time.monotonic() + args.seconds
    me = os.getpid()
    workers = [multiprocessing.Process(target=_spin, args=(until, me), daemon=True) for _ in range(args.procs)]
    for worker in workers:
        worker.start()

    def stop(*_: object) -> None:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(timeout=5)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"cpu_hog: {args.procs} busy process(es), pid {me}, for at most {args.seconds:g}s", flush=True)
    for worker in workers:
        worker.join(timeout=max(0.0, until - time.monotonic()) + 5)
    stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
