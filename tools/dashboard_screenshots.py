"""Screenshots of every dashboard view for docs/img/ (docs/deployment.md#dashboard).

Runs the fake upstream and a proxy with the dashboard on, sends about two minutes of real agent
traffic (a stage-router coding agent whose tests keep failing, an escalation judge route, a
route whose first target fails), then opens the page in headless Debian Chromium with a
5-minute window and saves one full-page screenshot per view. Nothing is made up: every figure
is what the proxy recorded.

    PYTHONPATH=. python tools/dashboard_screenshots.py [--out docs/img] [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, Turn, serve_fake
from switchyard.testing.judges import escalation_brain, under_review

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TRACEBACK = 'Traceback (most recent call last):\n  File "/app/parse.py", line 12\nValueError: bad date'


def config(port: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}/v1"
    return {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": base, "retry": {"initial_delay_s": 0.01}}},
        "targets": {
            "efficient": {
                "client": "local",
                "model": "fake-efficient",
                "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
            },
            "capable": {
                "client": "local",
                "model": "fake-capable",
                "price": {"input_per_mtok": 15, "output_per_mtok": 75},
            },
            "judge": {
                "client": "local",
                "model": "fake-judge",
                "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5},
            },
            "weak": {"client": "local", "model": "fake-weak", "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}},
            "flaky": {"client": "local", "model": "fail-500"},
        },
        "routes": {
            "agent": {
                "type": "stage_router",
                "capable": "capable",
                "efficient": "efficient",
                "hold_turns": {"capable": 1},
            },
            "watched": {
                "type": "llm_classifier",
                "mode": "escalation",
                "confirmations": 2,
                "classifier_target": "judge",
                "strong_target": "capable",
                "weak_target": "weak",
            },
            "resilient": {"type": "random", "targets": ["flaky", "capable"], "weights": [1, 0]},
        },
        "server": {"dashboard": {"enabled": True, "poll_s": 2, "window_s": 300}},
    }


def coding_turn(client: httpx.Client, session: str, turn: int, failing: bool) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the date parser so that tests/test_dates.py passes."},
    ]
    for j in range(turn):
        call = {
            "id": f"c{j}",
            "type": "function",
            "function": {"name": "Bash", "arguments": '{"command": "pytest -q"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        result = TRACEBACK if failing or j < turn - 1 else "12 passed in 0.4s"
        messages.append({"role": "tool", "tool_call_id": f"c{j}", "content": result})
    headers = {"x-switchyard-session-id": session, "x-switchyard-agent-id": "claude-code"}
    client.post("/v1/chat/completions", json={"model": "agent", "messages": messages}, headers=headers)


def weak_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """The efficient model of the judged route: it starts looping on its fourth turn."""
    turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn >= 4:
        return Turn(text=f"Running the same failing command again (turn {turn}).")
    return Turn(text=f"Progress on turn {turn}.")


def watched_turn(client: httpx.Client, session: str, turn: int) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Make the test suite pass."}]
    for j in range(turn):
        messages += [{"role": "assistant", "content": f"Step {j} done."}, {"role": "user", "content": "go on"}]
    headers = {"x-switchyard-session-id": session, "x-switchyard-agent-id": "hermes"}
    client.post("/v1/chat/completions", json={"model": "watched", "messages": messages}, headers=headers)


def traffic(client: httpx.Client, seconds: float) -> None:
    rng = random.Random(26)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        session = f"task-{n:03d}"
        failing = rng.random() < 0.5
        for turn in range(rng.randint(2, 6)):
            coding_turn(client, session, turn, failing)
            time.sleep(0.4)
        if n % 3 == 0:
            for turn in range(6):
                watched_turn(client, f"review-{n:03d}", turn)
                time.sleep(0.3)
        if n % 4 == 0:
            client.post(
                "/v1/chat/completions", json={"model": "resilient", "messages": [{"role": "user", "content": "hi"}]}
            )
    # One session whose prompt is hostile markup: the page shows it as text.
    hostile = {"role": "user", "content": 'Fix <img src=x onerror="alert(1)"> <script>alert(2)</script>'}
    client.post(
        "/v1/chat/completions",
        json={"model": "agent", "messages": [hostile]},
        headers={"x-switchyard-session-id": "task-<b>html</b>", "x-switchyard-agent-id": "codex"},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    judge = FakeModel("fake-judge", brain=escalation_brain(lambda view: "same failing" in under_review(view)))
    fake = serve_fake(FakeUpstream([judge, FakeModel("fake-weak", brain=weak_brain)]))
    sy = Switchyard.from_config(config(fake.port))
    try:
        with ServerThread(sy) as server, httpx.Client(base_url=server.root_url, timeout=30) as client:
            traffic(client, args.seconds)
            with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
                context = pw.chromium.launch_persistent_context(
                    profile,
                    executable_path=args.chromium,
                    headless=True,
                    args=FLAGS,
                    viewport={"width": 1280, "height": 860},
                )
                page = context.new_page()
                for view in ("overview", "decisions", "reliability", "sessions"):
                    page.goto(f"{server.root_url}/dashboard/#{view}")
                    page.wait_for_selector(f"body[data-loaded={view}]", timeout=30_000)
                    # The session list is long: its first screenful shows what it is.
                    page.screenshot(path=str(out / f"dashboard-{view}.png"), full_page=view != "sessions")
                sessions = json.loads(httpx.get(f"{server.root_url}/dashboard/api/sessions").text)["sessions"]
                escalated = next(s for s in sessions if s["escalated"] and s["route"] == "agent" and s["turns"] >= 4)
                page.goto(f"{server.root_url}/dashboard/#sessions")
                page.wait_for_selector("body[data-loaded=sessions]", timeout=30_000)
                page.locator(f'[data-session="{escalated["key"]}"] a.session-link').click()
                page.wait_for_selector("body[data-loaded=session]", timeout=30_000)
                page.screenshot(path=str(out / "dashboard-session.png"), full_page=True)
                watched = next(s for s in sessions if s["route"] == "watched" and s["escalated"])
                page.goto(f"{server.root_url}/dashboard/#session=" + watched["key"])
                page.wait_for_selector("body[data-loaded=session]", timeout=30_000)
                page.screenshot(path=str(out / "dashboard-session-judge.png"), full_page=True)
                context.close()
    finally:
        sy.close()
        fake.stop()
    print(f"wrote {out}/dashboard-*.png")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
