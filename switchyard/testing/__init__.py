"""Test helpers shipped with the library: a real fake upstream server and scripted model calls.

Importing this package needs the ``server`` extra only for :func:`serve_fake`.
"""

from __future__ import annotations

import logging
from typing import Any

from switchyard.testing.fake_upstream import FAULTS, FakeModel, FakeUpstream, Turn, echo_brain, leaky_brain
from switchyard.testing.scripted import ScriptedCall


class _InjectedResets(logging.Filter):
    """Drops uvicorn's traceback for the connection resets the fake upstream injects on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, ConnectionResetError) and str(exc).startswith("fake upstream"))


_RESET_FILTER = _InjectedResets()


def quiet_injected_resets() -> None:
    """Keeps uvicorn from logging a traceback for each connection reset a fake injects on purpose
    (the ``reset-mid`` fault); other errors still log."""
    logging.getLogger("uvicorn.error").addFilter(_RESET_FILTER)  # a filter added twice is kept once


def serve_fake(upstream: FakeUpstream, port: int = 0) -> Any:
    """Starts ``upstream`` on 127.0.0.1 in a background thread; returns a started ``AppThread``
    (use as a context manager or call ``.stop()``)."""
    from switchyard.server.runner import AppThread

    quiet_injected_resets()
    return AppThread(upstream, port=port).start()


__all__ = [
    "FAULTS",
    "FakeModel",
    "FakeUpstream",
    "ScriptedCall",
    "Turn",
    "echo_brain",
    "leaky_brain",
    "quiet_injected_resets",
    "serve_fake",
]
