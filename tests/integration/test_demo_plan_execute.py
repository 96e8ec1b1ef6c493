"""The demo's plan/execute session: the frontier model plans, re-plans on trouble, the efficient one executes."""

from __future__ import annotations

import uuid

import pytest
import yaml

import switchyard
from switchyard.api import Switchyard
from switchyard.config.load import load_config
from switchyard.demo import CONFIG_TEMPLATE, SCENARIOS, run_session
from switchyard.demo.agent import models
from switchyard.engine.records import DecisionRecord
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration


def test_plan_session_plans_executes_and_replans() -> None:
    (scenario,) = [s for s in SCENARIOS if s.route == "plan"]
    efficient, frontier = models()
    servers = [serve_fake(FakeUpstream([efficient])), serve_fake(FakeUpstream([frontier]))]
    try:
        text = CONFIG_TEMPLATE.format(efficient_port=servers[0].port, frontier_port=servers[1].port)
        sy = Switchyard(load_config(yaml.safe_load(text)))
        records: list[DecisionRecord] = []
        sy.on_decision(records.append)
        with switchyard.OpenAI(config=sy) as client:
            calls = run_session(
                client, "plan", f"t-{uuid.uuid4().hex[:6]}", stream=False, tasks=scenario.tasks, parser=True
            )
        sy.close()
    finally:
        for server in servers:
            server.stop()
    assert calls == len(records)
    sources = [r.source for r in records]
    targets = [r.selected for r in records]
    # Two tasks: each starts with a plan; two tracebacks in a row in the first send it back to the planner.
    assert sources == ["plan", "execute", "execute", "replan", "execute", "execute", "plan", "execute", "execute"]
    assert targets == [("frontier" if s != "execute" else "efficient") for s in sources]
    assert records[3].details["plan_execute"]["detail"] == "2 failed tool results in a row"
