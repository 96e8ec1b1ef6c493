"""The server's Prometheus metrics are built at the first decision record or scrape, not at
start-up (switchyard.server.metrics.DeferredMetrics), and count every record, the first one too."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _configs import skeleton_config
from prometheus_client.parser import text_string_to_metric_families

import switchyard.server.metrics as metrics_module
from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration


def _decisions(text: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "switchyard_decisions_total"
    )


@pytest.mark.parametrize("first", ["record", "scrape"])
def test_metrics_are_built_when_first_needed_and_miss_no_record(first: str, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = metrics_module.Metrics

    class Counted(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(metrics_module, "Metrics", Counted)
    fake = serve_fake(FakeUpstream())
    sy = Switchyard.from_config(skeleton_config(fake.port))
    body = {"model": "fast", "messages": [{"role": "user", "content": "hi"}]}
    try:
        with ServerThread(sy) as server:
            assert httpx.get(f"{server.root_url}/health", timeout=10).status_code == 200
            assert built == []  # started and answering, and nothing built yet
            if first == "scrape":
                assert _decisions(httpx.get(f"{server.root_url}/metrics", timeout=10).text) == 0
                assert built == [1]
            answer = httpx.post(f"{server.root_url}/v1/chat/completions", json=body, timeout=10)
            assert answer.status_code == 200
            assert _decisions(httpx.get(f"{server.root_url}/metrics", timeout=10).text) == 1
            assert built == [1]  # built once
    finally:
        sy.close()
        fake.stop()
