"""The LLM classifier router: capability policy, fail-open, custom selectors, triggers, affinity."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _routing_helpers import (
    anthropic_tool_result,
    assistant_call,
    capability,
    context,
    judge_view,
    request,
    tool_result,
    user,
)

from switchyard.protocol.errors import UpstreamStatusError
from switchyard.protocol.messages import ReasoningPart
from switchyard.protocol.response import ChatResponse
from switchyard.routers.base import BuildContext, Router
from switchyard.routers.classifier import CapabilityJudge, Thresholds
from switchyard.routers.judge import JudgeSettings
from switchyard.routers.llm_classifier import LlmClassifierSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall


def build(**keys: Any) -> Router:
    block = {
        "type": "llm_classifier",
        "classifier_target": "judge",
        "strong_target": "strong",
        "weak_target": "weak",
        "base_threshold": 0.5,
        "threshold_step": 0.2,
        **keys,
    }
    spec = LlmClassifierSpec.model_validate(block)
    return spec.build(BuildContext(route="r", targets={}))


TASK = request(user("Fix the off-by-one in pager.py"))


@pytest.mark.parametrize(
    ("p", "rule", "boundary", "chosen", "threshold"),
    [
        (0.50, "SUP-3", "supported", "weak", 0.5),  # exactly the threshold routes weak
        (0.49, "SUP-3", "supported", "strong", 0.5),
        (0.70, "UNC-1", "uncertain", "weak", 0.7),
        (0.69, "UNC-2", "uncertain", "strong", 0.7),
        (0.70, "none", "unmatched", "weak", 0.7),
        (0.89, "LIM-1", "unsupported", "strong", 0.9),
        (0.90, "LIM-2", "unsupported", "weak", 0.9),
    ],
)
async def test_capability_threshold_by_boundary(
    p: float, rule: str, boundary: str, chosen: str, threshold: float
) -> None:
    call = ScriptedCall({"judge": [capability(p, rule, boundary)]})
    decision = await build().route(TASK, context(), call)
    assert decision.candidates == (chosen,)
    assert decision.source == "llm-classifier"
    assert decision.score == pytest.approx(1 - p)
    assert decision.details["threshold"] == pytest.approx(threshold)
    assert decision.details["verdict"]["primary_rule"] == rule


async def test_judge_request_goes_to_the_judge_target_only() -> None:
    call = ScriptedCall({"judge": [capability(0.9)]})
    await build().route(TASK, context(), call)
    assert call.targets_called() == ["judge"]
    sent = call.calls[0][1]
    assert "You are Claude Code" not in sent.messages[0].text  # client system prompt not shown
    assert "Fix the off-by-one in pager.py" in judge_view(sent)


@pytest.mark.parametrize(
    "reply",
    [
        "garbage",
        capability(1.2),
        capability(0.9, "SUP-1", "unsupported"),  # inconsistent boundary/rule
        UpstreamStatusError("down", upstream_status=500),
        "",
    ],
)
async def test_any_judge_failure_routes_strong(reply: Any) -> None:
    decision = await build().route(TASK, context(), ScriptedCall({"judge": [reply]}))
    assert decision.candidates == ("strong",)
    assert decision.source == "fail_open"
    assert decision.details["judge_failure"]
    assert decision.score is None


async def test_judge_timeout_routes_strong() -> None:
    call = ScriptedCall({"judge": [capability(0.99)]}, delays={"judge": 5})
    decision = await build(judge_timeout_s=0.05).route(TASK, context(), call)
    assert (decision.candidates, decision.source, decision.details["judge_failure"]) == (
        ("strong",),
        "fail_open",
        "timeout",
    )


async def test_fenced_verdict_routes() -> None:
    call = ScriptedCall({"judge": [f"```json\n{capability(0.95)}\n```"]})
    assert (await build().route(TASK, context(), call)).candidates == ("weak",)


async def test_reasoning_only_verdict_needs_the_flag() -> None:
    reply = ChatResponse(id="x", content=[ReasoningPart(text=f"thinking... {capability(0.95)}")])
    off = await build().route(TASK, context(), ScriptedCall({"judge": [reply]}))
    assert (off.source, off.details["judge_failure"]) == ("fail_open", "empty")
    on = await build(verdict_from_reasoning=True).route(TASK, context(), ScriptedCall({"judge": [reply]}))
    assert (on.candidates, on.source) == (("weak",), "llm-classifier")


async def test_json_object_mode_validates_locally() -> None:
    router = build(response_format_type="json_object")
    call = ScriptedCall({"judge": [capability(0.3, "LIM-1", "unsupported")]})
    decision = await router.route(TASK, context(), call)
    assert decision.candidates == ("strong",)
    assert call.calls[0][1].response_format == {"type": "json_object"}


# -- triggers and affinity -------------------------------------------------------------------------


def session_turns() -> list[Any]:
    """Requests of one session: user turn, tool continuation, Anthropic continuation, next user turn."""
    first = [user("Write the migration")]
    cont = [*first, assistant_call("c1"), tool_result("c1", "ok")]
    cont2 = [*cont, assistant_call("c2"), anthropic_tool_result("c2", "ok")]
    second = [*cont2, user("Now document it")]
    return [request(*m) for m in (first, cont, cont2, second)]


async def test_every_request_judges_every_call() -> None:
    call = ScriptedCall({"judge": [capability(0.9), capability(0.1, "LIM-1", "unsupported")]})
    router, ctx = build(), context()
    sources = [(await router.route(r, ctx, call)).candidates for r in session_turns()]
    assert sources == [("weak",), ("strong",), ("strong",), ("strong",)]
    assert call.targets_called() == ["judge"] * 4


async def test_user_turn_keeps_the_target_over_tool_continuations() -> None:
    call = ScriptedCall({"judge": [capability(0.9), capability(0.1, "LIM-1", "unsupported")]})
    router, ctx = build(classify_trigger="user_turn"), context()
    out = [await router.route(r, ctx, call) for r in session_turns()]
    assert [(d.candidates[0], d.source) for d in out] == [
        ("weak", "llm-classifier"),
        ("weak", "affinity"),
        ("weak", "affinity"),
        ("strong", "llm-classifier"),
    ]
    assert out[1].score == pytest.approx(0.1)  # the deciding verdict's score travels along
    assert call.targets_called() == ["judge", "judge"]


async def test_new_session_judges_once() -> None:
    call = ScriptedCall({"judge": [capability(0.9)]})
    router, ctx = build(classify_trigger="new_session"), context()
    out = [await router.route(r, ctx, call) for r in session_turns()]
    assert [d.source for d in out] == ["llm-classifier", "affinity", "affinity", "affinity"]
    assert {d.candidates for d in out} == {("weak",)}
    assert len(call.calls) == 1


async def test_fail_open_assignment_is_provisional_under_new_session() -> None:
    call = ScriptedCall({"judge": ["not json", capability(0.9)]})
    router, ctx = build(classify_trigger="new_session"), context()
    out = [await router.route(r, ctx, call) for r in session_turns()]
    # Outage: strong; the tool continuations keep strong; the next user turn asks again.
    assert [(d.candidates[0], d.source) for d in out] == [
        ("strong", "fail_open"),
        ("strong", "affinity"),
        ("strong", "affinity"),
        ("weak", "llm-classifier"),
    ]
    later = await router.route(request(user("Write the migration"), user("more")), ctx, call)
    assert later.source == "affinity"  # a real verdict now latches the session
    assert len(call.calls) == 2


async def test_sessions_and_sub_agents_have_their_own_assignment() -> None:
    call = ScriptedCall({"judge": [capability(0.9), capability(0.1, "LIM-1", "unsupported")]})
    router = build(classify_trigger="new_session")
    first, other = context(MemoryStore()), context(MemoryStore(), session="s2")
    assert (await router.route(TASK, first, call)).candidates == ("weak",)
    assert (await router.route(TASK, other, call)).candidates == ("strong",)
    assert (await router.route(TASK, first, call)).source == "affinity"


async def test_without_a_session_affinity_degrades_to_every_request() -> None:
    call = ScriptedCall({"judge": [capability(0.9)]})
    router, store = build(classify_trigger="new_session"), MemoryStore()
    for _ in range(2):
        await router.route(TASK, context(store, session=None), call)
    assert len(call.calls) == 2
    assert len(store) == 0


async def test_affinity_expires_with_its_ttl() -> None:
    call = ScriptedCall({"judge": [capability(0.9)]})
    store = MemoryStore(default_ttl_s=3600)
    router = build(classify_trigger="new_session", state_ttl_s=0.000001)
    await router.route(TASK, context(store), call)
    assert (await router.route(TASK, context(store), call)).source == "llm-classifier"


async def test_stale_assignment_to_an_unknown_target_is_ignored() -> None:
    store = MemoryStore()
    await store.set("affinity", {"target": "removed-target", "source": "llm-classifier"})
    call = ScriptedCall({"judge": [capability(0.9)]})
    decision = await build(classify_trigger="new_session").route(TASK, context(store), call)
    assert decision.source == "llm-classifier"


# -- windowed view ---------------------------------------------------------------------------------


async def test_recent_turn_window_shows_recent_messages() -> None:
    call = ScriptedCall({"judge": [capability(0.9)]})
    req = session_turns()[2]
    await build(recent_turn_window=2).route(req, context(), call)
    view = judge_view(call.calls[0][1])
    assert "## Recent conversation" in view and "tool_call bash" in view


# -- the reusable judge ----------------------------------------------------------------------------


async def test_capability_judge_is_reusable() -> None:
    judge = CapabilityJudge(JudgeSettings("judge", timeout_s=1.0))
    verdict = await judge.classify(TASK, context(), ScriptedCall({"judge": [capability(0.42, "UNC-1", "uncertain")]}))
    assert verdict is not None
    assert (verdict.p_solve, verdict.capability_boundary, verdict.score) == (0.42, "uncertain", pytest.approx(0.58))
    assert await judge.classify(TASK, context(), ScriptedCall({"judge": ["nope"]})) is None
    assert Thresholds(0.5, 0.1).prefers_weak(verdict) is False


def test_threshold_rules() -> None:
    with pytest.raises(ValueError, match=r"base_threshold \+ 2"):
        Thresholds(0.8, 0.15)
    with pytest.raises(ValueError):
        Thresholds(1.2)
    assert Thresholds(0.4, 0.3).threshold("unsupported") == pytest.approx(1.0)


# -- custom mode -----------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "object",
            "properties": {"route": {"type": "string", "enum": ["fast", "medium", "deep", "other"]}},
            "required": ["route"],
            "additionalProperties": False,
        },
        "why": {"type": "string"},
    },
    "required": ["decision", "why"],
    "additionalProperties": False,
}


def custom(**keys: Any) -> Router:
    block = {
        "type": "llm_classifier",
        "mode": "custom",
        "classifier_target": "judge",
        "prompt": "Pick a tier.",
        "targets": {"fast": "weak", "medium": "mid", "deep": "strong"},
        "default_target": "mid",
        "response_schema": SCHEMA,
        "selector": "/decision/route",
        **keys,
    }
    return LlmClassifierSpec.model_validate(block).build(BuildContext(route="r", targets={}))


def label(route: str) -> str:
    return json.dumps({"decision": {"route": route}, "why": "because"})


@pytest.mark.parametrize(("route", "target"), [("fast", "weak"), ("medium", "mid"), ("deep", "strong")])
async def test_custom_selector_picks_the_labelled_target(route: str, target: str) -> None:
    call = ScriptedCall({"judge": [label(route)]})
    decision = await custom().route(TASK, context(), call)
    assert (decision.candidates, decision.source, decision.details["label"]) == ((target,), "llm-classifier", route)
    sent = call.calls[0][1]
    assert sent.messages[0].text == "Pick a tier."
    assert sent.response_format is not None and sent.response_format["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize(
    "reply",
    [label("other"), json.dumps({"decision": {"route": "fast"}}), "junk", json.dumps({"why": 1})],
)
async def test_custom_unusable_verdicts_go_to_the_default_target(reply: str) -> None:
    decision = await custom().route(TASK, context(), ScriptedCall({"judge": [reply]}))
    assert (decision.candidates, decision.source) == (("mid",), "fail_open")


async def test_custom_schema_given_as_json_string_and_json_object_mode() -> None:
    router = custom(response_schema=json.dumps(SCHEMA), response_format_type="json_object")
    call = ScriptedCall({"judge": [label("deep")]})
    assert (await router.route(TASK, context(), call)).candidates == ("strong",)
    assert '"decision"' in call.calls[0][1].messages[0].text


async def test_custom_user_turn_affinity() -> None:
    call = ScriptedCall({"judge": [label("fast"), label("deep")]})
    router, ctx = custom(classify_trigger="user_turn"), context()
    out = [(await router.route(r, ctx, call)).candidates[0] for r in session_turns()]
    assert out == ["weak", "weak", "weak", "strong"]
