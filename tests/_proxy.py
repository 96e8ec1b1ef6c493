"""The proxy as most server and integration tests run it (import as ``from _proxy import ...``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread


@contextmanager
def recording_proxy(config: dict[str, Any]) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    """``config`` served on loopback, with every decision record it writes collected in order;
    the router is closed on leaving."""
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            yield server, records
    finally:
        sy.close()
