"""The dashboard in a real browser: headless Debian Chromium against a proxy serving fake-upstream traffic.

Set ``SWITCHYARD_SCREENSHOT_DIR`` to keep the screenshots (docs/img/ is made that way:
``SWITCHYARD_SCREENSHOT_DIR=docs/img pytest tests/integration/test_dashboard_browser.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _browser import browser_context
from _configs import skeleton_config

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ADMIN = "sy-dashboard-test-admin"
USER = "sy-dashboard-test-user"
HOSTILE_PROMPT = 'Fix it <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> & "quote"'
HOSTILE_SESSION = "sess-<b>bold</b>"
TRACEBACK = "Traceback (most recent call last):\nValueError: bad input"
TRIAL_SESSIONS = ("trial-0", "trial-1", "trial-2", "trial-3")


def agent_turn(client: httpx.Client, session: str, turn: int, prompt: str, agent: str) -> None:
    """One turn of a coding agent whose tests keep failing (the stage router escalates on the repeat)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    messages.append({"role": "user", "content": prompt})
    for j in range(turn):
        call = {"id": f"c{j}", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "pytest"}'}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{j}", "content": TRACEBACK})
    reply = client.post(
        "/v1/chat/completions",
        json={"model": "agent", "messages": messages},
        headers={"x-switchyard-session-id": session, "x-switchyard-agent-id": agent},
    )
    assert reply.status_code == 200, reply.text


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    fake = serve_fake(FakeUpstream())
    config = skeleton_config(fake.port)
    config["routes"]["agent"] = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "hold_turns": {"capable": 1},
    }
    # A control group (docs/rollout.md): the routed-vs-control panel of the Decisions page.
    config["routes"]["trial"] = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],
        "experiment": {"control_share": 0.5, "baseline": "capable"},
    }
    config["server"] = {
        "api_keys": [
            {"name": "operator", "hash": hash_key(ADMIN), "admin": True},
            {"name": "agent", "hash": hash_key(USER)},
        ],
        "dashboard": {"enabled": True, "poll_s": 1},
    }
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            with httpx.Client(base_url=server.root_url, headers={"authorization": f"Bearer {USER}"}) as client:
                for turn in range(4):
                    agent_turn(client, HOSTILE_SESSION, turn, HOSTILE_PROMPT, agent="coder")
                for turn in range(2):
                    agent_turn(client, "calm-session", turn, "Rename a variable.", agent="helper")
                reply = client.post(
                    "/v1/chat/completions", json={"model": "resilient", "messages": [{"role": "user", "content": "hi"}]}
                )
                assert reply.status_code == 200
                for session in TRIAL_SESSIONS:  # control: trial-0, trial-3 (the sticky draw); routed: 1, 2
                    hello = {"model": "trial", "messages": [{"role": "user", "content": "hi"}]}
                    assert client.post("/v1/chat/completions", json=hello, headers={"x-switchyard-session-id": session})
                    outcome = {"session_id": session, "resolved": session in ("trial-0", "trial-1")}
                    assert client.post("/v1/feedback", json=outcome).json()["matched"] is True
            yield server, records
    finally:
        sy.close()
        fake.stop()


def screenshot_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("SWITCHYARD_SCREENSHOT_DIR")
    return Path(chosen) if chosen else tmp_path


def field(page: Any, name: str) -> tuple[str, str]:
    """The raw value and the text shown of a figure."""
    node = page.locator(f'[data-field="{name}"]').first
    return node.get_attribute("data-value"), node.inner_text()


def test_the_page_shows_what_v1_stats_says_and_a_session_timeline(
    stack: tuple[ServerThread, list[DecisionRecord]], tmp_path: Path
) -> None:
    server, records = stack
    shots = screenshot_dir(tmp_path)
    stats = httpx.get(f"{server.root_url}/v1/stats", headers={"authorization": f"Bearer {ADMIN}"}).json()
    total = stats["usd"]["total"]
    assert total["requests"] == len(records) == 7 + len(TRIAL_SESSIONS)
    with browser_context() as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server.root_url}/dashboard")
        # An admin key is needed: the page asks for it (never in the URL).
        page.wait_for_selector("#login:not([hidden])", timeout=20_000)
        page.fill("#login-key", USER)
        page.click("#login-form button")
        page.wait_for_selector("#login-error:not([hidden])", timeout=20_000)
        assert "not an admin key" in page.inner_text("#login-error")
        page.fill("#login-key", ADMIN)
        page.click("#login-form button")
        page.wait_for_selector("body[data-loaded=overview]", timeout=20_000)
        assert "sy-" not in page.url

        assert field(page, "since.requests") == (str(total["requests"]), str(total["requests"]))
        for name in ("total_usd", "always_capable_usd", "saved_usd"):
            raw, shown = field(page, f"since.{name}")
            assert float(raw) == total[name]
            assert shown == f"${total[name]:.6f}"
        raw, shown = field(page, "since.capable_share")
        assert float(raw) == total["capable_share"]
        assert shown == f"{100 * total['capable_share']:.1f}%"
        # Nothing happened before the process started, so the window holds the same totals.
        assert field(page, "window.requests")[0] == str(total["requests"])
        assert float(field(page, "window.total_usd")[0]) == total["total_usd"]
        for route, figures in stats["usd"]["routes"].items():
            cells = page.locator(f'[data-row="since-route:{route}"] td').all_inner_texts()
            assert cells[1] == str(figures["requests"])
            assert cells[3] == f"${figures['total_usd']:.6f}"
        assert page.inner_text('[data-field="replica.id"]').endswith(f":{os.getpid()}")
        page.screenshot(path=str(shots / "dashboard-overview.png"), full_page=True)

        page.goto(f"{server.root_url}/dashboard/#decisions")
        page.wait_for_selector("body[data-loaded=decisions]", timeout=20_000)
        sources = {(r.route, r.source) for r in records}
        for route, source in sources:
            assert page.locator(f'[data-row="source:{route}:{source}"]').count() == 1
        for arm in ("control", "routed"):  # two sessions each, one resolved
            cells = page.locator(f'[data-row="experiment:trial:{arm}"] td').all_inner_texts()
            assert (cells[1], cells[4], cells[5].split(" ")[0]) == ("2", "2", "50.0%")
        assert "routed \u2212 control: $ / session" in page.inner_text('[data-field="routed-vs-control:trial"]')
        page.screenshot(path=str(shots / "dashboard-decisions.png"), full_page=True)

        page.goto(f"{server.root_url}/dashboard/#reliability")
        page.wait_for_selector("body[data-loaded=reliability]", timeout=20_000)
        counters = stats["reliability"]["counters"]
        assert field(page, "window.fallbacks")[0] == str(counters["fallbacks"]) == "1"
        assert field(page, "window.retries")[0] == str(counters["retries"])
        assert field(page, "window.attempts")[0] == str(counters["attempts"])
        page.screenshot(path=str(shots / "dashboard-reliability.png"), full_page=True)

        page.goto(f"{server.root_url}/dashboard/#sessions")
        page.wait_for_selector("body[data-loaded=sessions]", timeout=20_000)
        keys = page.locator("[data-session]").evaluate_all("rows => rows.map(r => r.dataset.session)")
        # With keys, each session is its key's tenant's (the `agent` key is a tenant by itself).
        assert f"agent:~t:agent:{HOSTILE_SESSION}" in keys and "agent:~t:agent:calm-session" in keys
        row = page.locator("[data-session]").filter(has_text="bold").first
        cells = row.locator("td").all_inner_texts()
        assert cells[0] == HOSTILE_SESSION  # the session id is text, not markup
        assert cells[1] == "agent" and cells[2] == "agent"  # tenant, route
        assert cells[3] == "coder" and cells[4] == "4" and cells[5].startswith("escalated")
        page.screenshot(path=str(shots / "dashboard-sessions.png"), full_page=True)

        row.locator("a.session-link").click()
        page.wait_for_selector("body[data-loaded=session]", timeout=20_000)
        turns = page.locator("article.turn")
        mine = [r for r in records if r.session_id == HOSTILE_SESSION]
        assert turns.count() == len(mine) == 4
        for i, record in enumerate(mine):
            turn = turns.nth(i)
            assert turn.locator('[data-field="turn.selected"]').inner_text() == record.selected
            assert turn.locator('[data-field="turn.source"]').inner_text() == record.source
            assert turn.locator(".badge").inner_text() == record.tier
        assert [r.tier for r in mine] == ["efficient", "efficient", "capable", "capable"]
        # The hostile prompt is shown as text: no element was made from it, and no script ran.
        first = turns.nth(0).locator('[data-field="turn.prompt"]')
        assert first.inner_text() == f"user: {HOSTILE_PROMPT}"
        assert first.locator("img, script").count() == 0
        assert page.locator("img").count() == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.inner_text('[data-field="session.id"]') == HOSTILE_SESSION
        page.screenshot(path=str(shots / "dashboard-session.png"), full_page=True)

        # Live: new traffic shows up without a reload (the page polls every poll_s).
        page.click('nav a[data-view="overview"]')
        page.wait_for_selector("body[data-loaded=overview]", timeout=20_000)
        with httpx.Client(base_url=server.root_url, headers={"authorization": f"Bearer {USER}"}) as client:
            agent_turn(client, "late-session", 0, "One more thing.", agent="coder")
        after = 8 + len(TRIAL_SESSIONS)
        page.wait_for_selector(f'[data-field="since.requests"][data-value="{after}"]', timeout=20_000)
        later = httpx.get(f"{server.root_url}/v1/stats", headers={"authorization": f"Bearer {ADMIN}"}).json()
        assert float(field(page, "since.total_usd")[0]) == later["usd"]["total"]["total_usd"]
        assert errors == []
    assert (shots / "dashboard-session.png").stat().st_size > 10_000


def test_data_endpoints_need_an_admin_key_and_send_no_cors(stack: tuple[ServerThread, list[DecisionRecord]]) -> None:
    server, _ = stack
    url = f"{server.root_url}/dashboard/api/summary"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": f"Bearer {USER}"}).status_code == 403
    ok = httpx.get(url, headers={"authorization": f"Bearer {ADMIN}"})
    assert ok.status_code == 200
    assert json.loads(ok.text)["since_start"]["usd"]["total"]["requests"] >= 7
    page = httpx.get(f"{server.root_url}/dashboard/")
    for reply in (ok, page):
        assert not any(h.startswith("access-control-") for h in reply.headers)
        assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]
        assert "script-src 'self'" in reply.headers["content-security-policy"]
        assert reply.headers["x-content-type-options"] == "nosniff"
    cross = httpx.get(url, headers={"authorization": f"Bearer {ADMIN}", "origin": "http://evil.example"})
    assert cross.status_code == 403
    assert not any(h.startswith("access-control-") for h in cross.headers)
