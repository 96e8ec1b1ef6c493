"""The stage router behind the proxy: the real openai SDK, a real fake upstream on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _configs import skeleton_config
from _convo import Step, bash, render, tool

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeUpstream, serve_fake

pytestmark = pytest.mark.integration

UP = "[router] The previous model was stuck; re-check the state before acting."
DOWN = "[router] Tests pass again; routine work from here."
TB = 'Traceback (most recent call last):\n  File "/app/p.py", line {n}, in parse\nValueError: bad {n}'
TASK: Step = ("user", "Fix the parser so that the tests pass.")
QUIET: list[Step] = [("system", "You are a coding agent."), TASK]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
CALM: list[Step] = [*OOM, tool("Write", "ok", path="a.py"), tool("Edit", "ok"), tool("Edit", "ok")]
SETTLED: list[Step] = [*CALM, bash("python -m pytest -q", "===== 12 passed in 0.40s =====")]
STUCK: list[Step] = [
    *QUIET,
    bash("python -m pytest -q", TB.format(n=1)),
    bash("python -m pytest -q --lf", "collected 0 items"),
    bash("python -m pytest -q -x", TB.format(n=2)),
]


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ServerThread, FakeUpstream, list[DecisionRecord]]]:
    upstream = FakeUpstream()
    fake = serve_fake(upstream)
    config = skeleton_config(fake.port)
    config["routes"]["agent"] = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "hold_turns": {"capable": 1},
        "handoff_notes": {"escalation_note": UP, "deescalation_note": DOWN},
    }
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    try:
        with ServerThread(sy) as server:
            yield server, upstream, records
    finally:
        sy.close()
        fake.stop()


@pytest.fixture
def client(stack: tuple[ServerThread, FakeUpstream, list[DecisionRecord]]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=stack[0].base_url, api_key="test", max_retries=0) as c:
        yield c


def ask(client: openai.OpenAI, steps: list[Step], session: str | None = None) -> Any:
    body = render(steps)
    headers = {"x-switchyard-session-id": session} if session else {}
    return client.chat.completions.with_raw_response.create(
        model="agent", messages=body["messages"], extra_headers=headers
    )


def test_quiet_turn_falls_open_to_the_efficient_model(
    client: openai.OpenAI, stack: tuple[ServerThread, FakeUpstream, list[DecisionRecord]]
) -> None:
    raw = ask(client, QUIET)
    assert raw.headers["x-switchyard-selected-model"] == "efficient"
    assert raw.headers["x-switchyard-decision-source"] == "fall_open"
    assert raw.parse().choices[0].message.content.startswith("[fake-efficient]")
    record = stack[2][-1]
    assert (record.source, record.score, record.confidence) == ("fall_open", 0.5, 0.0)
    assert record.details["signals"]["turn_depth"] == 1


def test_escalation_and_de_escalation_with_headers_notes_and_hold(
    client: openai.OpenAI, stack: tuple[ServerThread, FakeUpstream, list[DecisionRecord]]
) -> None:
    _, upstream, records = stack
    steps = [ask(client, s, session="sess-1") for s in (QUIET, OOM, CALM, SETTLED)]
    sources = [r.headers["x-switchyard-decision-source"] for r in steps]
    selected = [r.headers["x-switchyard-selected-model"] for r in steps]
    assert sources == ["fall_open", "override", "hold", "tests_passed"]
    assert selected == ["efficient", "capable", "capable", "efficient"]

    # The escalation note rode only in the request sent to the capable model ...
    escalated = upstream.bodies("fake-capable")[-2]
    assert escalated["messages"][-1] == {"role": "user", "content": UP}
    held = upstream.bodies("fake-capable")[-1]
    assert held["messages"][-1]["role"] == "tool", "no note on a held turn"
    # ... and the hand-back note in the one sent back to the efficient model.
    handed_back = upstream.bodies("fake-efficient")[-1]
    assert handed_back["messages"][-1] == {"role": "user", "content": DOWN}
    assert len(handed_back["messages"]) == len(render(SETTLED)["messages"]) + 1

    mine = [r for r in records if r.session_id == "sess-1"]
    assert [r.source for r in mine] == sources
    assert mine[1].score == 1.0 and mine[1].details["signals"]["errors"] == ["oom"]
    assert mine[2].details["held_from"]["tier"] == "efficient"
    assert mine[3].score == 0.0 and mine[3].details["signals"]["tests_passed"]


def test_repeated_traceback_escalates_a_streamed_turn(
    client: openai.OpenAI, stack: tuple[ServerThread, FakeUpstream, list[DecisionRecord]]
) -> None:
    body = render(STUCK)
    with client.chat.completions.with_streaming_response.create(
        model="agent", messages=body["messages"], stream=True
    ) as response:
        assert response.headers["x-switchyard-selected-model"] == "capable"
        assert response.headers["x-switchyard-decision-source"] == "override"
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    assert text.startswith("[fake-capable]")
    assert stack[2][-1].details["signals"]["repeated_failure"] is True
