"""Bounded waits for tests: poll a condition until it holds, bounded in wall time.

A test never sleeps a fixed time and hopes: it waits for the state it needs (a probe recorded,
a connection closed, a thread finished), and fails with a clear message when that state does
not come within the bound. The bounds are generous (a busy 2-core CI machine), never a claim
about speed. Every test waits through here, so that each wait is bounded the same way.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BOUND_S = 15.0
EVERY_S = 0.005
"""How often a condition is polled; checks that cost a request (an HTTP probe) poll less often."""


async def eventually(
    check: Callable[[], Any], seconds: float = BOUND_S, what: str = "condition", *, every: float = EVERY_S
) -> Any:
    """Awaits until ``check()`` is truthy (returned); fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not met within {seconds:g}s"
        await asyncio.sleep(every)
    return found


def wait_until(
    check: Callable[[], Any], seconds: float = BOUND_S, what: str = "condition", *, every: float = EVERY_S
) -> Any:
    """Blocks until ``check()`` is truthy (returned); fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not met within {seconds:g}s"
        time.sleep(every)
    return found


def serving(
    url: str, proc: subprocess.Popen[Any], seconds: float = 30.0, what: str = "the server", *, log: Path | None = None
) -> None:
    """Blocks until ``GET url`` answers 200, served by the process ``proc`` started.

    Fails the test at once when ``proc`` exits, and after ``seconds`` when it never answers;
    either way quoting its output: the tail of ``log`` (where it writes), else what it wrote to
    its stdout pipe (read only once it has exited, when reading cannot block).
    """
    import httpx

    def up() -> bool:
        assert proc.poll() is None, f"{what} exited with {proc.returncode}"
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, seconds, f"{what} answering {url}", every=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{_output(proc, log)}") from None


def _output(proc: subprocess.Popen[Any], log: Path | None) -> str:
    if log is not None:
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""
    if proc.poll() is None or proc.stdout is None:
        return ""
    out = proc.communicate()[0]
    return out.decode(errors="replace") if isinstance(out, bytes) else str(out or "")


def stop(proc: subprocess.Popen[Any], seconds: float = 10.0) -> None:
    """Terminates ``proc`` and waits for it to exit: killed after ``seconds``, then waited for
    again (bounded), so no test leaves a process behind."""
    proc.terminate()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
