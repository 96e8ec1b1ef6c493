"""Shadow mode's mirror through ``switchyard serve`` (issue 48): the caller gets the baseline's
reply, the mirror's spend counts against the key's daily budget, and ``GET /v1/stats`` shows the
corrected prediction and the mirrors' cost."""

from __future__ import annotations

from typing import Any

import httpx
from _waits import wait_until

from switchyard import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key
from switchyard.server.runner import ServerThread

HELLO = [{"role": "user", "content": "hello"}]
KEY = "sy-test-mirror-key"
ADMIN = "sy-test-mirror-admin"


def shadow(config: dict[str, Any], budget: float | None = None) -> dict[str, Any]:
    spec = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "experiment": {"mode": "shadow", "mirror_share": 1.0},
    }
    out = {**config, "routes": {**config["routes"], "exp": spec}}
    if budget is not None:
        key = {"name": "team", "hash": hash_key(KEY), "budget_usd_per_day": budget}
        out["server"] = {"api_keys": [key, {"name": "ops", "hash": hash_key(ADMIN), "admin": True}]}
    return out


def post(server: ServerThread, session: str) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "exp", "messages": HELLO},
        headers={"authorization": f"Bearer {KEY}", "x-switchyard-session-id": session},
        timeout=30,
    )


def test_a_mirror_is_spend_the_budget_and_v1_stats_count(config: dict[str, Any]) -> None:
    # The cost of the answer (A) and of its mirror (M), measured in-process on the same request.
    with Switchyard.from_config(shadow(config)) as probe:
        emitted: list[DecisionRecord] = []
        probe.on_decision(emitted.append)
        probe.complete_sync(model="exp", messages=HELLO, session_id="s0")
        wait_until(lambda: emitted and "mirror" in emitted[0].details, what="the probe's mirror")
        answer, mirror = emitted[0].cost_usd, emitted[0].experiment_cost_usd
    assert answer > 0 and mirror > 0
    # A budget above the answer alone but below answer + mirror: only a booked mirror exhausts it.
    sy = Switchyard.from_config(shadow(config, budget=answer + mirror / 2))
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            first = post(server, "s1")
            assert first.status_code == 200 and first.json()["model"] == "exp"
            assert first.headers["x-switchyard-selected-model"] == "capable"  # the baseline served
            wait_until(lambda: records and "mirror" in records[0].details, what="the mirror booked")
            assert records[0].experiment_cost_usd == mirror
            stats = httpx.get(f"{server.base_url}/stats", headers={"authorization": f"Bearer {ADMIN}"}).json()
            assert stats["usd"]["routes"]["exp"]["experiment_usd"] == round(mirror, 9)
            view = stats["experiment"]["exp"]["shadow"]
            assert view["basis"] == "mirrors" and view["mirrored_sessions"] == 1
            # The answer alone left room under the budget; the mirror's spend did not.
            second = post(server, "s2")
            assert second.status_code == 429, second.text
    finally:
        sy.close()
