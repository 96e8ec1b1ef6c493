"""Test helpers shipped with the library: a real fake upstream server and scripted model calls.

Importing this package needs the ``server`` extra only for :func:`serve_fake`.
"""

from __future__ import annotations

from typing import Any

from switchyard.testing.fake_upstream import FAULTS, FakeModel, FakeUpstream, Turn, echo_brain
from switchyard.testing.scripted import ScriptedCall


def serve_fake(upstream: FakeUpstream, port: int = 0) -> Any:
    """Starts ``upstream`` on 127.0.0.1 in a background thread; returns a started ``AppThread``
    (use as a context manager or call ``.stop()``)."""
    from switchyard.server.runner import AppThread

    return AppThread(upstream, port=port).start()


__all__ = ["FAULTS", "FakeModel", "FakeUpstream", "ScriptedCall", "Turn", "echo_brain", "serve_fake"]
