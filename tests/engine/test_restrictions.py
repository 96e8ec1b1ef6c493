"""Target restrictions never leak: every path by which a forbidden target could be reached.

Targets ``cloud`` and ``judge`` carry no label; ``local`` and ``local_big`` carry ``onprem``.
Each test restricts a request to ``onprem`` and checks that no call (answer, fallback,
context-window fallback, judge, advisor, weak-first answer, sub-agent policy, token count)
reached an unlabelled target, and what the decision record says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from switchyard.engine.restriction import HEADER_REQUIRE, RestrictedError
from switchyard.protocol.access import required_labels
from switchyard.protocol.errors import ContextWindowExceededError, UpstreamStatusError
from switchyard.protocol.messages import Message, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage

Rig = Any

ONPREM = {HEADER_REQUIRE: "onprem"}
FORBIDDEN = {"cloud", "judge"}

TARGETS: dict[str, Any] = {
    "cloud": {"client": "up", "model": "m-cloud"},
    "judge": {"client": "up", "model": "m-judge"},
    "local": {"client": "up", "model": "m-local", "labels": ["onprem"]},
    "local_big": {"client": "up", "model": "m-local-big", "labels": ["onprem", "eu"]},
}
ROUTES: dict[str, Any] = {
    "pick": {"type": "random", "targets": ["cloud", "local"], "weights": [1, 0]},
    "cloud_only": {"type": "passthrough", "target": "cloud", "fallbacks": ["judge"]},
    "chain": {"type": "passthrough", "target": "local", "fallbacks": ["cloud"]},
    "overflow": {"type": "passthrough", "target": "local", "fallbacks": ["cloud", "local_big"]},
    "classify": {
        "type": "llm_classifier",
        "mode": "capability",
        "classifier_target": "judge",
        "strong_target": "local",
        "weak_target": "cloud",
        "base_threshold": 0.5,
    },
    "escalate": {
        "type": "llm_classifier",
        "mode": "escalation",
        "classifier_target": "local",
        "strong_target": "local",
        "weak_target": "cloud",
    },
    "advise_exec": {"type": "advisor", "executor_target": "cloud", "advisor_target": "local"},
    "advise_review": {
        "type": "advisor",
        "executor_target": "local",
        "advisor_target": "judge",
        "gate_trigger": "no_tool_call",
        "gate_min_tool_results": 0,
    },
    "delegated": {
        "type": "passthrough",
        "target": "local",
        "subagents": {"type": "passthrough", "target": "cloud"},
    },
    "secrets": {
        "type": "passthrough",
        "target": "cloud",
        "fallbacks": ["local"],
        "restrict": [
            {"detector": "secrets", "require": ["onprem"]},
            {"name": "customer-ids", "pattern": r"CUST-\d{6}", "require": ["eu"]},
        ],
    },
}


def answer(text: str = "ok") -> ChatResponse:
    return ChatResponse(id="r", model="m", content=[TextPart(text=text)], usage=Usage(input_tokens=3, output_tokens=1))


def request(route: str, text: str = "hi") -> ChatRequest:
    return ChatRequest(model=route, messages=[Message.of("user", text)])


def make(rig: Callable[..., Rig], **script: Any) -> Rig:
    replies = {name: [answer(name)] for name in TARGETS}
    replies.update(script)
    return rig(replies, targets=TARGETS, routes=ROUTES)


def assert_no_leak(r: Rig) -> None:
    called = set(r.backend.targets_called())
    assert not called & FORBIDDEN, f"forbidden target(s) called: {called & FORBIDDEN}"


async def test_router_choice_is_overridden_and_recorded(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("pick"), ONPREM)
    assert done.target == "local"
    assert_no_leak(r)
    entry = done.record.details["restriction"]
    assert entry["require"] == ["onprem"]
    assert entry["by"] == [{"source": "header", "name": HEADER_REQUIRE, "labels": ["onprem"]}]
    assert entry["removed"] == ["cloud"]
    assert entry["overridden"] == "cloud"
    assert done.record.candidates == ["local"]


async def test_unrestricted_requests_are_untouched(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("pick"))
    assert done.target == "cloud"
    assert "restriction" not in done.record.details


async def test_fallbacks_never_reach_a_forbidden_target(rig: Callable[..., Rig]) -> None:
    r = make(rig, local=[UpstreamStatusError("HTTP 503", upstream_status=503)])
    with pytest.raises(UpstreamStatusError):
        await r.engine.complete(request("chain"), ONPREM)
    assert r.backend.targets_called() == ["local"]
    assert r.records[-1].details["restriction"]["removed"] == ["cloud"]


async def test_context_window_fallback_skips_forbidden_targets(rig: Callable[..., Rig]) -> None:
    overflow = ContextWindowExceededError("maximum context length is 8 tokens", upstream_status=400)
    r = make(rig, local=[overflow])
    done = await r.engine.complete(request("overflow"), ONPREM)
    assert done.target == "local_big"
    assert r.backend.targets_called() == ["local", "local_big"]
    assert done.record.candidates == ["local", "local_big"]


async def test_no_eligible_target_is_a_clear_error_naming_restriction_and_targets(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    with pytest.raises(RestrictedError) as caught:
        await r.engine.complete(request("cloud_only"), ONPREM)
    message = caught.value.message
    assert "onprem" in message and HEADER_REQUIRE in message and "cloud, judge" in message
    assert caught.value.status == 403
    assert r.backend.calls == []
    record = r.records[-1]
    assert record.status == 403 and record.candidates == []
    assert record.details["restriction"]["removed"] == ["cloud", "judge"]


@pytest.mark.parametrize(
    ("path", "fmt", "error_type"),
    [
        ("/v1/chat/completions", "openai_chat", "permission_error"),
        ("/v1/messages", "anthropic_messages", "permission_error"),
        ("/v1/responses", "openai_responses", "permission_error"),
    ],
)
async def test_the_error_comes_in_the_callers_shape(
    rig: Callable[..., Rig], path: str, fmt: str, error_type: str
) -> None:
    r = make(rig)
    if fmt == "openai_responses":
        body: dict[str, Any] = {"model": "cloud_only", "input": "hi"}
    else:
        body = {"model": "cloud_only", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    reply = await r.engine.handle(fmt, json.dumps(body).encode(), ONPREM, path=path)
    assert reply.status == 403
    assert reply.body is not None
    payload = json.loads(reply.body)
    assert payload["error"]["type"] == error_type
    assert "no target of route 'cloud_only'" in payload["error"]["message"]
    assert r.backend.calls == []


async def test_streams_honour_the_restriction(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    events = await r.engine.stream(request("pick").model_copy(update={"stream": True}), ONPREM)
    async for _ in events:
        pass
    assert r.backend.targets_called() == ["local"]


async def test_a_judge_on_a_forbidden_target_is_never_called(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("classify"), ONPREM)
    assert_no_leak(r)
    assert done.target == "local"
    assert done.record.details["restriction"]["refused_calls"] == [["judge"]]
    assert done.record.router_cost.calls == 0


async def test_a_weak_first_answer_on_a_forbidden_target_is_never_made(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("escalate"), ONPREM)
    assert_no_leak(r)
    assert done.target == "local"
    assert ["cloud"] in done.record.details["restriction"]["refused_calls"]


async def test_an_advisor_executor_on_a_forbidden_target_is_never_called(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("advise_exec"), ONPREM)
    assert_no_leak(r)
    assert done.target == "local"


async def test_an_advisor_review_on_a_forbidden_target_is_never_made(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("advise_review"), ONPREM)
    assert_no_leak(r)
    assert done.target == "local"
    assert done.record.details["restriction"]["refused_calls"] == [["judge"]]


async def test_a_subagent_policy_cannot_reach_a_forbidden_target(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    headers = {**ONPREM, "x-switchyard-is-subagent": "true"}
    done = await r.engine.complete(request("delegated"), headers)
    assert done.record.source.startswith("subagents/")
    assert done.target == "local"
    assert_no_leak(r)
    unrestricted = await r.engine.complete(request("delegated"), {"x-switchyard-is-subagent": "true"})
    assert unrestricted.target == "cloud"  # the policy's own choice, when nothing restricts it


async def test_decide_reports_the_restricted_choice(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    record = await r.engine.decide(request("pick"), ONPREM)
    assert record.selected == "local"
    assert r.backend.calls == []


async def test_the_api_keys_labels_restrict(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    token = required_labels.set(("ops", frozenset({"onprem"})))
    try:
        done = await r.engine.complete(request("pick"))
    finally:
        required_labels.reset(token)
    assert done.target == "local"
    assert done.record.details["restriction"]["by"] == [{"source": "api_key", "name": "ops", "labels": ["onprem"]}]
    assert_no_leak(r)


async def test_several_header_labels_are_all_required(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    done = await r.engine.complete(request("overflow"), {HEADER_REQUIRE: "onprem, eu"})
    assert done.target == "local_big"
    assert r.backend.targets_called() == ["local_big"]


async def test_a_route_rule_restricts_requests_with_secrets_without_recording_them(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    secret = "sk-ant-api03-" + "A" * 40
    done = await r.engine.complete(request("secrets", f"deploy with key {secret} please"))
    assert done.target == "local"
    assert_no_leak(r)
    entry = done.record.details["restriction"]
    assert entry["by"] == [{"source": "route", "name": "secrets", "labels": ["onprem"], "matches": 1}]
    assert secret not in done.record.to_json().decode()
    plain = await r.engine.complete(request("secrets", "deploy please"))
    assert plain.target == "cloud"


async def test_secrets_in_tool_results_count_too(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    req = ChatRequest.model_validate(
        {
            "model": "secrets",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read .env"}]},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_call", "id": "c1", "name": "read", "arguments": "{}"}],
                },
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool_result",
                            "call_id": "c1",
                            "content": [{"type": "text", "text": "AWS_KEY=AKIAABCDEFGHIJKLMNOP"}],
                        }
                    ],
                },
            ],
        }
    )
    done = await r.engine.complete(req)
    assert done.target == "local"


async def test_rules_add_up_and_can_leave_nothing(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    with pytest.raises(RestrictedError) as caught:
        await r.engine.complete(request("secrets", "CUST-123456 uses sk-" + "b" * 40))
    assert "route rule 'customer-ids' requires eu" in caught.value.message
    assert r.backend.calls == []


async def test_token_counts_go_only_to_eligible_targets(rig: Callable[..., Rig]) -> None:
    r = make(rig)
    body = json.dumps({"model": "pick", "messages": [{"role": "user", "content": "hi"}]}).encode()
    reply = await r.engine.count_tokens(body, ONPREM)
    assert reply.status == 200
    assert reply.headers["x-switchyard-selected-model"] == "local"
    reply = await r.engine.count_tokens(json.dumps({**json.loads(body), "model": "cloud_only"}).encode(), ONPREM)
    assert reply.status == 403


async def test_a_verification_retry_never_reaches_a_forbidden_target(rig: Callable[..., Rig]) -> None:
    """``verify:`` hands a failed efficient answer to the capable target: not when it is forbidden."""
    routes = {
        "gated": {
            "type": "passthrough",
            "target": "local",
            "verify": {"efficient": "local", "capable": "cloud", "checks": [{"type": "regex", "pattern": "^ok$"}]},
        }
    }
    r = rig({name: [answer("not ok")] for name in TARGETS}, targets=TARGETS, routes=routes)
    with pytest.raises(Exception, match="lacks a label"):
        await r.engine.complete(request("gated"), ONPREM)
    assert r.backend.targets_called() == ["local"]
    assert r.records[-1].details["verify"]["failed"]["check"] == "regex"
