"""The demo's stage-router session: escalation on a repeated traceback, hold, hand-back."""

from __future__ import annotations

import uuid

import openai
import pytest
import yaml

from switchyard import demo
from switchyard.api import Switchyard
from switchyard.config.load import load_config
from switchyard.demo import CONFIG_TEMPLATE, SCENARIOS, run_session
from switchyard.demo.agent import models
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration


def test_stage_session_escalates_holds_and_drops_back() -> None:
    (scenario,) = [s for s in SCENARIOS if s.route == "stage"]
    efficient, frontier = models()
    servers = [serve_fake(FakeUpstream([efficient])), serve_fake(FakeUpstream([frontier]))]
    try:
        text = CONFIG_TEMPLATE.format(efficient_port=servers[0].port, frontier_port=servers[1].port)
        sy = Switchyard(load_config(yaml.safe_load(text)))
        records: list[DecisionRecord] = []
        sy.on_decision(records.append)
        session = f"test-{uuid.uuid4().hex[:6]}"
        # Over the proxy (the demo itself uses the drop-in client; the routing is the same).
        with ServerThread(sy) as proxy, openai.OpenAI(base_url=proxy.base_url, api_key="t", max_retries=0) as client:
            calls = run_session(client, "stage", session, stream=False, tasks=scenario.tasks, parser=True)
        sy.close()
    finally:
        for server in servers:
            server.stop()
    assert calls == len(records)
    sources = [r.source for r in records]
    targets = [r.selected for r in records]
    assert sources[:7] == ["fall_open"] * 3 + ["override", "override", "hold", "tests_passed"]
    assert targets[:7] == ["efficient"] * 3 + ["frontier"] * 3 + ["efficient"]
    assert set(targets[7:]) == {"efficient"}, "the follow-up task stays on the efficient model"


def test_demo_cascade_and_advisor_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    out = capsys.readouterr().out
    cascade = out.split("== Cascade")[1].split("==")[0]
    # the judge decides while the stage signals are calm; passing tests make the stage router decisive
    assert "cascade:2/llm_classifier" in cascade and "cascade:1/stage_router" in cascade
    advisor = out.split("== Advisor gate")[1].split("All sessions")[0]
    for source in ("advisor:no_trigger", "advisor:approve", "advisor:redo"):
        assert source in advisor
    # every turn of the advisor session is served by the efficient model; the advisor only reviews
    rows = [line for line in advisor.splitlines() if line.strip()[:1].isdigit()]
    assert rows and all(" efficient " in row for row in rows)
