"""Judge routes through the proxy: real openai SDK → proxy → real fake upstream on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from switchyard.api import Switchyard
from switchyard.engine.records import DecisionRecord
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, Turn, serve_fake
from switchyard.testing.judges import capability_brain, escalation_brain, under_review, verdict_kind

pytestmark = pytest.mark.integration

CONFIRMATIONS = 3
STUCK_FROM_TURN = 4  # the efficient model starts looping on the 4th turn of the session


def weak_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn >= STUCK_FROM_TURN:
        return Turn(text=f"Running the same failing command again (turn {turn}).")
    return Turn(text=f"Progress on turn {turn}.")


def forecast(view: str) -> float:
    """Easy when the person's current request (the latest user message, else the task) is a typo fix."""
    current = view.split("## Latest user message")[-1]
    return 0.9 if "typo" in current else 0.2


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    app = FakeUpstream(
        [
            FakeModel("fake-weak", brain=weak_brain),
            FakeModel("fake-strong"),
            FakeModel("fake-judge", brain=escalation_brain(lambda view: "same failing command" in under_review(view))),
            FakeModel("fake-forecaster", brain=capability_brain(forecast)),
        ]
    )
    server = serve_fake(app)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def proxy(fake: Any) -> Iterator[tuple[ServerThread, list[DecisionRecord]]]:
    judge = {"classifier_target": "judge", "strong_target": "capable", "weak_target": "efficient"}
    config = {
        "llm_clients": {"local": {"format": "openai_chat", "base_url": f"http://127.0.0.1:{fake.port}/v1"}},
        "targets": {
            "efficient": {"client": "local", "model": "fake-weak", "price": {"input_per_mtok": 0.1}},
            "capable": {"client": "local", "model": "fake-strong", "price": {"input_per_mtok": 15}},
            "judge": {"client": "local", "model": "fake-judge", "price": {"input_per_mtok": 0.5}},
            "forecaster": {"client": "local", "model": "fake-forecaster"},
            "tooling": {"client": "local", "model": "fake-tooling"},
            "broken-judge": {"client": "local", "model": "fail-500"},
        },
        "routes": {
            "watched": {"type": "llm_classifier", "mode": "escalation", "confirmations": CONFIRMATIONS, **judge},
            "forecast": {
                "type": "llm_classifier",
                **judge,
                "classifier_target": "forecaster",
                "weak_target": "tooling",
                "base_threshold": 0.5,
                "classify_trigger": "user_turn",
            },
            "outage": {
                "type": "llm_classifier",
                **judge,
                "classifier_target": "broken-judge",
                "base_threshold": 0.0,
            },
        },
    }
    sy = Switchyard.from_config(config)
    records: list[DecisionRecord] = []
    sy.on_decision(records.append)
    with ServerThread(sy) as server:
        yield server, records
    sy.close()


@pytest.fixture
def client(proxy: tuple[ServerThread, list[DecisionRecord]]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy[0].base_url, api_key="test", max_retries=0) as c:
        yield c


def judge_requests(fake: Any, model: str = "fake-judge") -> int:
    return len(fake.app.bodies(model))


def test_escalation_session_latches_exactly_at_the_confirmation(client: openai.OpenAI, fake: Any) -> None:
    session = {"x-switchyard-session-id": "latch-session"}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Make the test suite pass."},
    ]
    judges_before, weak_before = judge_requests(fake), len(fake.app.bodies("fake-weak"))
    seen: list[tuple[str, str, str]] = []
    judges_after_turn: list[int] = []
    for turn in range(1, 11):
        if turn % 2:  # odd turns stream, even turns do not
            with client.chat.completions.with_streaming_response.create(
                model="watched", messages=messages, stream=True, extra_headers=session
            ) as raw:
                headers = raw.headers
                text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
        else:
            raw_json = client.chat.completions.with_raw_response.create(
                model="watched", messages=messages, extra_headers=session
            )
            headers = raw_json.headers
            text = raw_json.parse().choices[0].message.content or ""
        seen.append((headers["x-switchyard-decision-source"], headers["x-switchyard-selected-model"], text))
        judges_after_turn.append(judge_requests(fake) - judges_before)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Continue."}]

    latch_turn = STUCK_FROM_TURN + CONFIRMATIONS - 1  # 6: the third consecutive escalate verdict
    for turn, (source, selected, text) in enumerate(seen, 1):
        if turn < latch_turn:
            assert (source, selected) == ("escalation", "efficient"), turn
            assert text.startswith(("Progress", "Running the same")), turn
        elif turn == latch_turn:
            # The buffered efficient answer is discarded; the capable model answers this turn.
            assert (source, selected) == ("escalation", "capable")
            assert text.startswith("[fake-strong]")
        else:
            assert (source, selected) == ("latched", "capable"), turn
            assert text.startswith("[fake-strong]")
    # One judge request per turn up to the latch, none after it.
    assert judges_after_turn == [1, 2, 3, 4, 5, 6, 6, 6, 6, 6]
    assert len(fake.app.bodies("fake-weak")) - weak_before == latch_turn
    judge_body = fake.app.bodies("fake-judge")[-1]
    assert judge_body["response_format"]["type"] == "json_schema"
    assert "tools" not in judge_body and judge_body.get("stream") is not True
    assert "You are a coding agent." in judge_body["messages"][1]["content"]  # anchors in the transcript


def test_escalation_records_book_the_judge(proxy: tuple[ServerThread, list[DecisionRecord]]) -> None:
    records = [r for r in proxy[1] if r.session_id == "latch-session"]
    assert len(records) == 10
    judged = [r for r in records if r.source != "latched"]
    assert all(r.router_cost.calls >= 1 and r.router_cost.input_tokens > 0 for r in judged)
    assert all(r.router_cost.calls == 0 for r in records if r.source == "latched")


def test_classifier_route_user_turn_affinity_over_the_proxy(client: openai.OpenAI, fake: Any) -> None:
    session = {"x-switchyard-session-id": "forecast-session"}
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    before = judge_requests(fake, "fake-forecaster")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "HARNESS SYSTEM PROMPT"},
        {"role": "user", "content": "Fix the typo in README, use a tool"},
    ]
    first = client.chat.completions.with_raw_response.create(
        model="forecast", messages=messages, tools=tools, extra_headers=session
    )
    call = first.parse().choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (first.headers["x-switchyard-decision-source"], first.headers["x-switchyard-selected-model"]) == (
        "llm-classifier",
        "tooling",
    )
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "README.md: teh -> the"},
    ]
    second = client.chat.completions.with_raw_response.create(
        model="forecast", messages=messages, tools=tools, extra_headers=session
    )
    assert second.headers["x-switchyard-decision-source"] == "affinity"
    assert second.headers["x-switchyard-selected-model"] == "tooling"
    messages += [
        {"role": "assistant", "content": second.parse().choices[0].message.content},
        {"role": "user", "content": "Now redesign the storage engine for sharding"},
    ]
    third = client.chat.completions.with_raw_response.create(
        model="forecast", messages=messages, tools=tools, extra_headers=session
    )
    # The new user message is shown to the judge (not the README tool result): no "typo" → strong.
    assert (third.headers["x-switchyard-decision-source"], third.headers["x-switchyard-selected-model"]) == (
        "llm-classifier",
        "capable",
    )
    bodies = fake.app.bodies("fake-forecaster")[before:]
    assert len(bodies) == 2
    assert all(verdict_kind(b) == "capability" for b in bodies)
    assert all("HARNESS SYSTEM PROMPT" not in str(b["messages"]) for b in bodies)
    assert "storage engine" in bodies[1]["messages"][1]["content"]


def test_judge_outage_fails_open_to_strong(
    client: openai.OpenAI, proxy: tuple[ServerThread, list[DecisionRecord]]
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="outage", messages=[{"role": "user", "content": "anything"}]
    )
    assert raw.headers["x-switchyard-decision-source"] == "fail_open"
    assert raw.headers["x-switchyard-selected-model"] == "capable"
    assert raw.parse().choices[0].message.content == "[fake-strong] anything"
    record = next(r for r in reversed(proxy[1]) if r.route == "outage")
    assert record.details["judge_failure"] == "upstream_5xx"
    # The judge's 500 is retried like any upstream call (max_retries 2): three failed attempts.
    assert (record.router_cost.calls, record.router_cost.failures) == (3, 3)
