"""The dashboard's data, access rules and offline mode, without a browser (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from _configs import skeleton_config

from switchyard.api import Switchyard
from switchyard.cli import main
from switchyard.engine.records import Attempt, DecisionRecord, prompt_preview
from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.server.app import SwitchyardApp
from switchyard.server.auth import hash_key
from switchyard.server.dashboard.aggregate import BUCKET_S, Aggregator, Histogram
from switchyard.server.dashboard.offline import OfflineApp, offline_views, read_feedback, read_log
from switchyard.server.dashboard.ring import RecordRing

ADMIN = "sy-admin-key"
USER = "sy-user-key"


def record(ts: float, *, route: str = "agent", session: str | None = "s1", **kw: Any) -> DecisionRecord:
    return DecisionRecord(request_id=f"r{ts}", route=route, router="stage_router", ts=ts, session_id=session, **kw)


async def get(
    app: Any, path: str, *, key: str | None = None, client: tuple[str, int] = ("127.0.0.1", 5555), **headers: str
) -> httpx.Response:
    if key:
        headers["authorization"] = f"Bearer {key}"
    transport = httpx.ASGITransport(app=app, client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:4000") as c:
        return await c.get(path, headers=headers)


def app_for(module_config: dict[str, Any], server: dict[str, Any]) -> SwitchyardApp:
    sy = Switchyard.from_config({**module_config, "server": server})
    return SwitchyardApp(sy)


# -- the request path: one append ------------------------------------------------------------


def test_the_ring_keeps_the_newest_records_numbered() -> None:
    ring = RecordRing(3)
    for i in range(5):
        ring(record(float(i)))
    numbered = ring.snapshot()
    assert [n for n, _ in numbered] == [3, 4, 5]
    assert [r.ts for _, r in numbered] == [2.0, 3.0, 4.0]


def test_folding_counts_the_records_that_left_the_ring_unseen() -> None:
    ring = RecordRing(2)
    agg = Aggregator()
    ring(record(1.0))
    assert agg.fold(ring.snapshot()) == 1
    for i in range(4):
        ring(record(2.0 + i))
    assert agg.fold(ring.snapshot()) == 2
    assert agg.missed == 2
    assert agg.fold(ring.snapshot()) == 0  # nothing new: nothing folded twice
    assert sum(b.total.requests for b in agg.buckets.values()) == 3


def test_a_window_merges_exactly_its_buckets() -> None:
    agg = Aggregator()
    agg.add(record(1000.0, cost_usd=1.0, tier="capable", baseline_cost_usd=2.0, selected="capable"))
    agg.add(record(1000.0 + 3 * BUCKET_S, cost_usd=0.5, tier="efficient", baseline_cost_usd=2.0, selected="efficient"))
    agg.add(record(1000.0 + 10 * BUCKET_S, cost_usd=0.25, source="override", selected="efficient"))
    window = agg.window(1000.0 + 2 * BUCKET_S, 1000.0 + 10 * BUCKET_S)
    assert window["total"]["requests"] == 2
    assert window["total"]["total_usd"] == 0.75
    assert window["targets"]["efficient"]["requests"] == 2
    assert {s["source"] for s in window["sources"]} == {"(none)", "override"}
    assert sum(p["requests"] for p in window["series"]) == 2
    whole = agg.window(0.0, 2000.0)
    assert whole["total"]["requests"] == 3
    assert whole["total"]["capable_share"] == round(1 / 3, 6)


def test_old_buckets_are_dropped() -> None:
    agg = Aggregator(max_window_s=100.0)
    ring = RecordRing(10)
    ring(record(0.0))
    ring(record(1000.0))
    agg.fold(ring.snapshot())
    assert [b.start for b in agg.buckets.values()] == [1000.0]


def test_histogram_quantiles_are_within_ten_percent() -> None:
    h = Histogram()
    for v in range(1, 1001):
        h.add(float(v))
    for q, exact in ((0.5, 500.0), (0.9, 900.0), (0.99, 990.0)):
        got = h.quantile(q)
        assert got is not None and exact <= got <= exact * 1.1
    assert h.to_dict()["max"] == 1000.0
    assert Histogram().quantile(0.5) is None


def test_reliability_and_latency_come_from_the_attempts() -> None:
    agg = Aggregator()
    failed = Attempt("broken", ok=False, elapsed_ms=1.0, error_class="server_error")
    retried = Attempt("broken", ok=False, elapsed_ms=1.0, error_class="rate_limited", retry=1)
    ok = Attempt("capable", ok=True, elapsed_ms=40.0)
    agg.add(record(10.0, attempts=[failed, retried, ok], candidates=["broken", "capable"], selected="capable"))
    agg.add(record(10.5, attempts=[ok], candidates=["capable"], selected="capable"))
    agg.add(record(11.0, status=502, error="upstream failed"))
    window = agg.window(0.0, 20.0)
    rel = window["reliability"]
    assert rel["attempts"] == 4 and rel["retries"] == 1 and rel["fallbacks"] == 1 and rel["failed_requests"] == 1
    assert rel["errors"] == {"server_error": 1, "rate_limited": 1}
    assert window["latency"]["upstream_ms"]["count"] == 2
    assert 40.0 <= window["latency"]["upstream_ms"]["p50"] <= 44.0


def test_prompt_preview_reads_only_the_latest_messages() -> None:
    messages = [Message.of("user", "first task")] + [Message.of("assistant", f"step {i}") for i in range(10)]
    messages.append(Message(role="tool", content=[ToolResultPart(call_id="c", content=[TextPart(text="x" * 50)])]))
    request = ChatRequest(model="agent", messages=messages)
    assert prompt_preview(request, 10) == "tool: xxxxxxxxxx"
    only_old = ChatRequest(model="agent", messages=[Message.of("user", "old"), *[Message(role="user")] * 4])
    assert prompt_preview(only_old, 10) is None


def test_the_preview_stays_out_of_the_decision_log() -> None:
    r = record(1.0)
    r._preview = "user: secret prompt"
    assert b"secret" not in r.to_json()
    assert "_preview" not in r.to_dict()
    assert r.preview == "user: secret prompt"


# -- who may read it -------------------------------------------------------------------------


async def test_off_by_default(module_config: dict[str, Any]) -> None:
    app = app_for(module_config, {})
    assert app.dashboard is None
    assert (await get(app, "/dashboard/api/summary")).status_code == 404


async def test_without_keys_loopback_clients_only(module_config: dict[str, Any]) -> None:
    app = app_for(module_config, {"dashboard": {"enabled": True}})
    assert (await get(app, "/dashboard/api/summary")).status_code == 200
    far = await get(app, "/dashboard/api/summary", client=("10.1.2.3", 5555))
    assert far.status_code == 403 and far.json()["error"]["code"] == "loopback_only"
    # The page itself holds no data.
    assert (await get(app, "/dashboard/", client=("10.1.2.3", 5555))).status_code == 200
    rebound = await get(app, "/dashboard/api/summary", host="evil.example")
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"


async def test_with_keys_an_admin_key(module_config: dict[str, Any]) -> None:
    server = {
        "api_keys": [{"name": "op", "hash": hash_key(ADMIN), "admin": True}, {"name": "u", "hash": hash_key(USER)}],
        "allowed_origins": ["http://localhost:3000"],
        "dashboard": {"enabled": True},
    }
    app = app_for(module_config, server)
    missing = await get(app, "/dashboard/api/sessions")
    assert missing.status_code == 401 and "www-authenticate" not in missing.headers
    assert (await get(app, "/dashboard/api/sessions", key="sy-wrong")).status_code == 401
    user = await get(app, "/dashboard/api/sessions", key=USER)
    assert user.status_code == 403 and user.json()["error"]["code"] == "not_admin"
    admin = await get(app, "/dashboard/api/sessions", key=ADMIN, client=("10.1.2.3", 5555))
    assert admin.status_code == 200 and admin.json()["sessions"] == []
    # An origin the proxy allows for its API still gets no CORS headers from the dashboard.
    allowed = await get(app, "/dashboard/api/summary", key=ADMIN, origin="http://localhost:3000")
    assert allowed.status_code == 403
    assert not [h for h in allowed.headers if h.startswith("access-control-")]
    same = await get(app, "/dashboard/api/summary", key=ADMIN, origin="http://127.0.0.1:4000")
    assert same.status_code == 200
    assert (await get(app, "/dashboard/api/summary", key=ADMIN, **{"sec-fetch-site": "cross-site"})).status_code == 403


async def test_headers_methods_and_bad_queries(module_config: dict[str, Any]) -> None:
    app = app_for(module_config, {"dashboard": {"enabled": True}})
    redirect = await get(app, "/dashboard")
    assert redirect.status_code == 302 and redirect.headers["location"] == "/dashboard/"
    for path, kind in (("/dashboard/", "text/html"), ("/dashboard/app.js", "text/javascript")):
        reply = await get(app, path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith(kind)
        assert reply.headers["x-content-type-options"] == "nosniff"
        csp = reply.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert (await get(app, "/dashboard/api/summary?window_s=-1")).status_code == 400
    assert (await get(app, "/dashboard/api/summary?window_s=abc")).status_code == 400
    assert (await get(app, "/dashboard/api/nope")).status_code == 404
    assert (await get(app, "/dashboard/api/session?key=agent:none")).status_code == 404
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        post = await c.post("/dashboard/api/summary", json={})
    assert post.status_code == 405


def test_the_page_builds_no_markup_from_data() -> None:
    """The script never parses strings as HTML (textContent and setAttribute only)."""
    static = Path(__file__).parents[2] / "switchyard" / "server" / "dashboard" / "static"
    script = (static / "app.js").read_text()
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert banned not in script, banned
    assert "<script>" not in (static / "index.html").read_text()  # no inline script (the CSP forbids it)
    assert " style=" not in (static / "index.html").read_text()


# -- offline ----------------------------------------------------------------------------------


def write_log(tmp_path: Path, records: list[DecisionRecord]) -> Path:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b"".join(r.to_json() + b"\n" for r in records) + b"not json\n")
    return path


async def test_offline_views_of_a_decision_log(tmp_path: Path) -> None:
    attempts = [Attempt("broken", ok=False, elapsed_ms=2.0, error_class="timeout"), Attempt("capable", True, 9.0)]
    tried = {"attempts": attempts, "candidates": ["broken", "capable"], "selected": "capable"}
    rows = [
        record(100.0, selected="efficient", tier="efficient", cost_usd=0.001, baseline_cost_usd=0.01, turn_index=0),
        record(160.0, selected="capable", tier="capable", cost_usd=0.01, baseline_cost_usd=0.01, turn_index=1),
        record(220.0, session="s2", fallbacks_tried=1, agent_id="<i>a</i>", reason="why", **tried),
    ]
    records, warnings = read_log(write_log(tmp_path, rows))
    assert len(records) == 3 and len(warnings) == 1 and "skipped" in warnings[0]
    assert records[2].attempts[0].error_class == "timeout" and records[2].agent_id == "<i>a</i>"
    app = OfflineApp(offline_views(records, "decisions.jsonl"))
    summary = (await get(app, "/dashboard/api/summary")).json()
    assert summary["replica"]["mode"] == "offline"
    assert summary["since_start"]["usd"]["total"]["requests"] == 3
    assert summary["window"]["total"]["requests"] == 3  # the default window spans the log
    assert summary["window"]["covers_whole_window"] is True
    assert summary["since_start"]["reliability"]["counters"]["fallbacks"] == 1
    sessions = (await get(app, "/dashboard/api/sessions")).json()["sessions"]
    assert [s["session_id"] for s in sessions] == ["s2", "s1"]
    assert sessions[1]["turns"] == 2 and sessions[1]["escalated"] is True
    timeline = (await get(app, "/dashboard/api/session?key=agent:s1")).json()
    assert [t["tier"] for t in timeline["turns"]] == ["efficient", "capable"]
    assert (await get(app, "/dashboard/api/summary", client=("10.0.0.1", 1))).status_code == 403
    assert (await get(app, "/v1/chat/completions")).status_code == 404


async def test_offline_experiment_panel_joins_the_logs_feedback(tmp_path: Path) -> None:
    """The offline panel reads the log's feedback lines through the same join as stats: by tenant
    and session, the latest report winning."""
    rows = [
        record(100.0, session="c1", cost_usd=0.02, details={"arm": "control"}),
        record(110.0, session="c2", cost_usd=0.02, details={"arm": "control"}),
        record(120.0, session="r1", cost_usd=0.002, details={"arm": "routed"}),
    ]
    reports = [
        {"object": "switchyard.feedback", "session_id": "c1", "resolved": False, "ts": 130.0, "tenant": None},
        {"object": "switchyard.feedback", "session_id": "c1", "resolved": True, "ts": 140.0, "tenant": None},
        {"object": "switchyard.feedback", "session_id": "c2", "resolved": True, "ts": 150.0, "tenant": "other"},
        {"object": "switchyard.feedback", "session_id": "r1", "resolved": False, "ts": 160.0, "tenant": None},
    ]
    path = write_log(tmp_path, rows)
    with path.open("ab") as fh:
        fh.write(b"".join(json.dumps(r).encode() + b"\n" for r in reports))
    records, _ = read_log(path)
    app = OfflineApp(offline_views(records, "decisions.jsonl", outcomes=read_feedback(path)))
    arms = (await get(app, "/dashboard/api/summary")).json()["experiment"]["agent"]["arms"]
    assert arms["control"]["with_feedback"] == 1 and arms["control"]["resolved"]["mean"] == 1.0
    assert arms["routed"]["with_feedback"] == 1 and arms["routed"]["resolved"]["mean"] == 0.0


def test_dashboard_cli_reports_a_missing_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--log", str(tmp_path / "absent.jsonl")]) == 1
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["dashboard", "--log", str(empty)]) == 1
    assert "no decision records" in capsys.readouterr().err


async def test_live_traffic_reaches_the_views(module_upstream: Any) -> None:
    config = skeleton_config(module_upstream.port)
    config["server"] = {"dashboard": {"enabled": True, "prompt_preview_chars": 5}}
    sy = Switchyard.from_config(config)
    app = SwitchyardApp(sy)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        body = {"model": "mix", "messages": [{"role": "user", "content": "hello world"}]}
        for _ in range(3):
            reply = await c.post("/v1/chat/completions", json=body, headers={"x-switchyard-session-id": "live"})
            assert reply.status_code == 200
        stats = (await c.get("/v1/stats")).json()["usd"]["total"]
        summary = (await c.get("/dashboard/api/summary")).json()
        timeline = (await c.get("/dashboard/api/session", params={"key": "mix:live"})).json()
    await sy.aclose()
    assert summary["since_start"]["usd"]["total"] == stats
    assert summary["window"]["total"] == stats
    assert [t["prompt"] for t in timeline["turns"]] == ["user: hello"] * 3
    assert json.dumps(timeline).count("hello world") == 0
