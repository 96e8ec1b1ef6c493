"""Two replicas sharing a real redis-server: each dashboard shows the sum of both (issue 26)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest
from _configs import skeleton_config
from _redis import RedisServer

from switchyard.api import Switchyard
from switchyard.server.app import SwitchyardApp

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_totals_of_every_replica_come_from_the_shared_store(tmp_path: Path, module_upstream: Any) -> None:
    redis = RedisServer(tmp_path).start()
    apps: list[SwitchyardApp] = []
    try:
        config = skeleton_config(module_upstream.port)
        # A generous per-operation wait: on a busy machine the default 0.25 s can time out, and a
        # replica that falls back to its own memory (degraded mode) is missing from the sum.
        config["state"] = {"backend": "redis", "url": redis.url, "timeout_s": 5.0}
        config["server"] = {"dashboard": {"enabled": True}}
        for pid in (101, 202):
            app = SwitchyardApp(Switchyard.from_config(config))
            assert app.dashboard is not None and app.dashboard.fleet is not None
            # Two replicas in one test process: give each its own identity, as two processes have.
            fleet = app.dashboard.fleet
            fleet.replica = dataclasses.replace(fleet.replica, pid=pid)
            app.dashboard.views.replica = fleet.replica
            apps.append(app)
        body = {"model": "mix", "messages": [{"role": "user", "content": "hello"}]}
        totals = []
        for app, n in zip(apps, (3, 2), strict=True):
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                for _ in range(n):
                    assert (await c.post("/v1/chat/completions", json=body)).status_code == 200
                totals.append((await c.get("/v1/stats")).json()["usd"]["total"])
        for app in apps:
            assert app.dashboard is not None and app.dashboard.fleet is not None
            await app.dashboard.fleet.tick()
        transport = httpx.ASGITransport(app=apps[0], client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            assert apps[0].dashboard is not None and apps[0].dashboard.fleet is not None
            await apps[0].dashboard.fleet.tick()  # reads both now
            summary = (await c.get("/dashboard/api/summary")).json()
        fleet_view = summary["fleet"]
        assert sorted(r["id"].rsplit(":", 1)[1] for r in fleet_view["replicas"]) == ["101", "202"]
        assert fleet_view["total"]["requests"] == 5 == sum(t["requests"] for t in totals)
        assert fleet_view["total"]["total_usd"] == pytest.approx(sum(t["total_usd"] for t in totals), abs=1e-9)
        assert fleet_view["routes"]["mix"]["requests"] == 5
        # The replica's own figures stay its own.
        assert summary["since_start"]["usd"]["total"]["requests"] == 3
        assert summary["replica"]["id"].endswith(":101")
    finally:
        for app in apps:
            await app.switchyard.aclose()
        redis.stop()
