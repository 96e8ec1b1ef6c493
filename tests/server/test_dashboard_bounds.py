"""Numbers a caller or a log controls cannot make the dashboard fail (issue 44): a query's
``limit=inf`` (or ``1e400``, ``nan``) is a 400, and one out-of-range record (``duration_ms:
1e308``) in a decision log is clamped instead of making every view a 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from switchyard.api import Switchyard
from switchyard.server.app import SwitchyardApp
from switchyard.server.dashboard.aggregate import MAX_MS, Histogram
from switchyard.server.dashboard.offline import OfflineApp, offline_views, read_log


async def _get(app: Any, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5555))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:4000") as client:
        return await client.get(path)


@pytest.mark.parametrize("value", ["inf", "1e400", "-inf", "nan", "Infinity", "0"])
@pytest.mark.parametrize(("endpoint", "name"), [("sessions", "limit"), ("summary", "window_s")])
async def test_a_number_in_a_query_is_finite_and_positive(
    module_config: dict[str, Any], endpoint: str, name: str, value: str
) -> None:
    sy = Switchyard.from_config({**module_config, "server": {"dashboard": {"enabled": True}}})
    try:
        reply = await _get(SwitchyardApp(sy), f"/dashboard/api/{endpoint}?{name}={value}")
    finally:
        await sy.aclose()
    assert reply.status_code == 400, reply.text
    assert name in reply.text and "finite" in reply.text


async def test_a_huge_finite_limit_is_clamped(module_config: dict[str, Any]) -> None:
    sy = Switchyard.from_config({**module_config, "server": {"dashboard": {"enabled": True}}})
    try:
        app = SwitchyardApp(sy)
        assert (await _get(app, "/dashboard/api/sessions?limit=1e300")).status_code == 200
        assert (await _get(app, "/dashboard/api/summary?window_s=1e300")).status_code == 200
    finally:
        await sy.aclose()


def _line(request_id: str, **fields: Any) -> bytes:
    base = {"request_id": request_id, "route": "r", "router": "passthrough", "ts": 1_700_000_000.0}
    return orjson.dumps({**base, "session_id": "s", **fields}) + b"\n"


@pytest.mark.parametrize(
    "broken",
    [
        {"duration_ms": 1e308},
        {"overhead_ms": 1e308},
        {"duration_ms": -1e308},
        {"attempts": [{"target": "t", "ok": True, "elapsed_ms": 1e308, "waited_ms": 1e308}]},
        {"router_cost": {"elapsed_ms": 1e308}},
    ],
    ids=["duration", "overhead", "negative", "attempt", "router"],
)
async def test_one_out_of_range_record_leaves_every_view_working(tmp_path: Path, broken: dict[str, Any]) -> None:
    log = tmp_path / "decisions.jsonl"
    fine = {"duration_ms": 12.0, "attempts": [{"target": "t", "ok": True, "elapsed_ms": 10.0}], "cost_usd": 0.01}
    log.write_bytes(_line("a", **fine) + _line("b", **{**fine, **broken, "ts": 1_700_000_001.0}))
    records, warnings = read_log(log)
    assert len(records) == 2 and not warnings
    assert all(0 <= r.duration_ms <= MAX_MS and all(a.elapsed_ms <= MAX_MS for a in r.attempts) for r in records)
    app = OfflineApp(offline_views(records, "decisions.jsonl"))
    for path in ("/dashboard/api/summary", "/dashboard/api/sessions", "/dashboard/api/session?key=r:s"):
        reply = await _get(app, path)
        assert reply.status_code == 200, (path, reply.text)


def test_the_histogram_counts_any_number() -> None:
    histogram = Histogram()
    for ms in (1e308, float("inf"), float("nan"), -5.0, 3.0):
        histogram.add(ms)
    assert histogram.count == 5 and histogram.max == MAX_MS
    assert histogram.quantile(0.5) is not None
