"""``switchyard serve --workers 2`` in a subprocess, for tests that need requests spread over two
worker processes (each request on a new connection: the kernel picks the worker)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _redis import free_port
from _waits import stop, wait_until

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serve_workers(config: Path, workdir: Path, *args: str) -> Iterator[int]:
    """Serves ``config`` with two workers (``args`` added to the command line) until the block
    ends, then stops the supervisor; yields the port once both workers are ready. The output goes
    to ``workdir/serve.log`` (shown when the start fails); ``TMPDIR`` is ``workdir`` so that the
    supervisor's private folder goes with the test's."""
    port, log = free_port(), workdir / "serve.log"
    command = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--workers", "2", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(workdir)},
        )
    try:
        wait_until(
            lambda: "2 worker(s) ready" in log.read_text(errors="replace") or proc.poll() is not None, 120, "ready"
        )
        assert proc.poll() is None, log.read_text(errors="replace")
        yield port
    finally:
        stop(proc, 60)
