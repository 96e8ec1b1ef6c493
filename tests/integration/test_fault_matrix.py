"""Every injected upstream fault, JSON and SSE, through the proxy with the real openai SDK.

The scenarios and their expectations live in :mod:`switchyard.testing.fault_matrix` (shared
with ``benchmarks/fault_matrix.py``, which prints the table of ``docs/reliability.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.clients.retry import ERROR_TABLE
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import serve_fake
from switchyard.testing.fake_upstream import refused_url
from switchyard.testing.fault_matrix import SCENARIOS, Mode, fake_upstream, matrix_config, run_scenario

pytestmark = pytest.mark.integration


class Matrix:
    def __init__(self, proxy: ServerThread, records: list[DecisionRecord], upstream: Any) -> None:
        self.proxy = proxy
        self.records = records
        self.upstream = upstream

    def record_for(self, request_id: str) -> DecisionRecord:
        found: DecisionRecord = wait_until(
            lambda: next((r for r in reversed(self.records) if r.request_id == request_id), None),
            15.0,
            f"a decision record for request {request_id!r}",
            every=0.01,
        )
        return found


@pytest.fixture(scope="module")
def matrix() -> Iterator[Matrix]:
    upstream = serve_fake(fake_upstream())
    try:
        sy = Switchyard.from_config(matrix_config(upstream.port, refused_url()))
        records: list[DecisionRecord] = []
        sy.on_decision(records.append)
        with ServerThread(sy) as proxy:
            yield Matrix(proxy, records, upstream.app)
        sy.close()
    finally:
        upstream.stop()


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.key for s in SCENARIOS])
def test_fault(matrix: Matrix, scenario: Any, mode: Mode) -> None:
    matrix.upstream.reset()
    record_for: Callable[[str], DecisionRecord] = matrix.record_for
    result = run_scenario(scenario, mode, matrix.proxy.base_url, record_for)
    assert not result.problems(), result.problems()
    # The failure is booked under the table row the scenario is about: on the failed attempts,
    # or, for a stream that had started, on the record's mid-stream failure.
    failed = {c for c in result.classes if c is not None}
    if result.outcome == "stream_error":
        assert failed == set() and result.mid_stream_class == scenario.error_class
        assert result.text, "content reached the caller before the failure"
        assert result.message, "the stream ended with an explicit error event"
    else:
        assert failed == {scenario.error_class}, result.classes


def test_every_row_of_the_error_table_is_exercised() -> None:
    covered = {s.error_class for s in SCENARIOS}
    assert covered == {rule.error_class.value for rule in ERROR_TABLE}
