"""``POST /v1/decision``: the route's decision as JSON, no answer call, same gate and records
as a proxied request; the body's format by ``?format=``, ``anthropic-version`` or its shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _convo import Step, bash, render
from _proxy import recording_proxy

from switchyard.engine.records import DecisionRecord
from switchyard.server.auth import hash_key

KEY_ALL = "sy-test-decide-all"
KEY_FAST = "sy-test-decide-fast"
QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]


@pytest.fixture(scope="module")
def decider(module_config: dict[str, Any], module_upstream: Any) -> Iterator[tuple[str, list[DecisionRecord], Any]]:
    config = {
        **module_config,
        "routes": {
            **module_config["routes"],
            "fast": {"type": "passthrough", "target": "efficient", "fallbacks": ["capable"]},
            "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": 2},
        },
        "server": {
            "api_keys": [
                {"name": "all", "hash": hash_key(KEY_ALL)},
                {"name": "fast-only", "hash": hash_key(KEY_FAST), "routes": ["fast"]},
            ],
            "limits": {"max_messages": 50},
        },
    }
    with recording_proxy(config) as (server, records):
        yield server.root_url, records, module_upstream.app


def decide(root: str, body: dict[str, Any], key: str = KEY_ALL, query: str = "", **headers: str) -> httpx.Response:
    hdrs = {"authorization": f"Bearer {key}", **headers}
    return httpx.post(f"{root}/v1/decision{query}", json=body, headers=hdrs, timeout=10)


def test_passthrough_decision_names_target_model_and_fallbacks_without_calling_upstream(decider: Any) -> None:
    root, records, upstream = decider
    before = len(upstream.received)
    resp = decide(root, {"model": "fast", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert got["object"] == "switchyard.decision" and got["request_format"] == "openai_chat"
    assert (got["route"], got["target"], got["model"], got["source"]) == (
        "fast",
        "efficient",
        "fake-efficient",
        "passthrough",
    )
    assert got["fallbacks"] == [
        {"target": "capable", "model": "fake-capable", "client": "local", "format": "openai_chat"}
    ]
    assert got["answered"] is False and got["request"] is None
    assert resp.headers["x-switchyard-selected-model"] == "efficient"
    assert float(resp.headers["x-switchyard-overhead-ms"]) == pytest.approx(got["overhead_ms"], abs=0.001)
    assert len(upstream.received) == before  # no answer call
    record = records[-1]
    assert record.path == "/v1/decision" and record.details["decision_only"] is True
    assert record.details["api_key"] == "all" and record.selected == "efficient"


def test_format_by_query_header_or_body_shape(decider: Any) -> None:
    root, _, _ = decider
    chat = {"model": "fast", "messages": [{"role": "user", "content": "hi"}]}
    anthropic = {
        "model": "fast",
        "max_tokens": 64,
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
    }
    responses = {"model": "fast", "input": "hi"}
    assert decide(root, responses).json()["request_format"] == "openai_responses"
    assert (
        decide(root, anthropic, **{"anthropic-version": "2023-06-01"}).json()["request_format"] == "anthropic_messages"
    )
    assert decide(root, anthropic, query="?format=messages").json()["request_format"] == "anthropic_messages"
    assert decide(root, chat).json()["request_format"] == "openai_chat"
    bad = decide(root, chat, query="?format=soap")
    assert bad.status_code == 400 and "unknown format 'soap'" in bad.json()["error"]["message"]
    # An Anthropic body's errors come in Anthropic's envelope.
    missing = decide(
        root,
        {"model": "nowhere", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        query="?format=anthropic_messages",
    )
    assert missing.status_code == 404 and missing.json()["type"] == "error"


def test_stage_route_reports_the_session_state_change(decider: Any) -> None:
    root, _, _ = decider
    session = {"x-switchyard-session-id": "decide-stage"}
    calm = decide(root, render(QUIET), **session).json()
    assert calm["target"] == "efficient" and calm["session"]["id"] == "decide-stage"
    changes = calm["session"]["state_changes"]
    assert [c["key"] for c in changes] == ["stage"] and changes[0]["before"] is None
    assert changes[0]["after"]["tier"] == "efficient"
    escalated = decide(root, render(OOM), **session).json()
    assert (escalated["target"], escalated["source"]) == ("capable", "override")
    (change,) = escalated["session"]["state_changes"]
    assert change["before"]["tier"] == "efficient" and change["after"]["tier"] == "capable"
    # The state is the session's own, as for proxied calls: the next calm turn is held.
    held = decide(root, render(QUIET), **session).json()
    assert (held["target"], held["source"]) == ("capable", "hold")


def test_same_gate_as_a_proxied_call(decider: Any) -> None:
    root, _, _ = decider
    body = {"model": "agent", "messages": [{"role": "user", "content": "hi"}]}
    assert decide(root, body, key="wrong").status_code == 401
    forbidden = decide(root, body, key=KEY_FAST)
    # A route the key may not use is answered like an unknown model (no hidden name leaks).
    assert forbidden.status_code == 404 and forbidden.json()["error"]["code"] == "model_not_found"
    assert decide(root, {**body, "model": "fast"}, key=KEY_FAST).status_code == 200
    many = {"model": "fast", "messages": [{"role": "user", "content": "x"}] * 51}
    assert decide(root, many).status_code == 400  # server.limits.max_messages
    text = httpx.post(f"{root}/v1/decision", content=b"{}", headers={"authorization": f"Bearer {KEY_ALL}"}, timeout=10)
    assert text.status_code == 415
    assert (
        httpx.get(f"{root}/v1/decision", headers={"authorization": f"Bearer {KEY_ALL}"}, timeout=10).status_code == 405
    )


def test_a_large_body_is_decided_like_a_small_one(decider: Any) -> None:
    root, records, _ = decider
    big = {"model": "fast", "input": "x" * 400_000}  # above the size decoded off the event loop
    got = decide(root, big).json()
    assert (got["request_format"], got["target"]) == ("openai_responses", "efficient")
    assert records[-1].request_id == got["request_id"]
