"""Bounded waits for tests: poll a condition until it holds, bounded in wall time.

A test never sleeps a fixed time and hopes: it waits for the state it needs (a probe recorded,
a connection closed, a thread finished), and fails with a clear message when that state does
not come within the bound. The bounds are generous (a busy 2-core CI machine), never a claim
about speed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

BOUND_S = 15.0


async def eventually(check: Callable[[], Any], seconds: float = BOUND_S, what: str = "condition") -> Any:
    """Awaits until ``check()`` is truthy (returned); fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not met within {seconds:g}s"
        await asyncio.sleep(0.005)
    return found


def wait_until(check: Callable[[], Any], seconds: float = BOUND_S, what: str = "condition") -> Any:
    """Blocks until ``check()`` is truthy (returned); fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not met within {seconds:g}s"
        time.sleep(0.005)
    return found
