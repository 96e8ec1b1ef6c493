"""A stream the caller closes before the final usage chunk is charged for what the upstream
generated (issue 23): otherwise a key's daily budget never runs out for a caller that always
hangs up one chunk early."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _waits import wait_until

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

KEY = "sk-caller-key-for-budget-test"
WORDS = " ".join(f"word{i}" for i in range(60))


@pytest.fixture(scope="module")
def drip() -> Iterator[Any]:
    server = serve_fake(FakeUpstream([FakeModel("drip", per_chunk_s=0.05)]))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_stream_closed_before_its_usage_is_charged_and_spends_the_budget(
    drip: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SY_TEST_BUDGET_KEY", KEY)
    config = {
        "llm_clients": {"up": {"base_url": f"http://127.0.0.1:{drip.port}/v1", "max_retries": 0}},
        "targets": {"t": {"client": "up", "model": "drip", "price": {"input_per_mtok": 1000, "output_per_mtok": 1000}}},
        "routes": {"r": {"type": "passthrough", "target": "t"}},
        "server": {"api_keys": [{"name": "k", "key_env": "SY_TEST_BUDGET_KEY", "budget_usd_per_day": 0.01}]},
    }
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    body: dict[str, Any] = {"model": "r", "stream": True, "messages": [{"role": "user", "content": WORDS}]}
    if path == "/v1/messages":
        body["max_tokens"] = 512
    headers = {"authorization": f"Bearer {KEY}"}
    try:
        with ServerThread(sy) as server, httpx.Client(base_url=server.root_url, timeout=10) as client:
            with client.stream("POST", path, json=body, headers=headers) as resp:
                assert resp.status_code == 200
                seen = 0
                for line in resp.iter_lines():
                    seen += line.startswith("data:")
                    if seen >= 4:
                        break  # hang up long before the final usage chunk
            record = wait_until(lambda: records[-1] if records else None, 10.0, "the record")
            assert record.status == 499 and record.details.get("closed_early")
            assert record.output_tokens > 0 and record.input_tokens > 0
            assert "output_tokens" in record.details["usage_estimated"]
            assert record.cost_usd > 0
            # 1,000 USD per million tokens: the cut-short stream spent more than the 0.01 budget.
            refused = client.post(path, json={**body, "stream": False}, headers=headers)
            assert refused.status_code == 429, refused.text
    finally:
        sy.close()
