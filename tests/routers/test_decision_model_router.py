"""The decision_model router with scripted decision calls: verdicts, fail-open reasons, affinity."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _routing_helpers import context, request, user

from switchyard.protocol.decision import ChoiceAnswer
from switchyard.protocol.errors import UpstreamStatusError
from switchyard.protocol.messages import ReasoningPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import BuildContext, Router
from switchyard.routers.decision.spec import DecisionModelSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

TARGETS = {
    "weak": TargetInfo(name="weak", model="m-weak"),
    "mid": TargetInfo(name="mid", model="m-mid"),
    "strong": TargetInfo(name="strong", model="m-strong"),
    "judge": TargetInfo(name="judge", model="m-judge"),
    "jev": TargetInfo(name="jev", model="jev-latest", client="ts", format="system_one"),
}
LABELS = {"easy": "weak", "medium": "mid", "hard": "strong"}
TASK = request(user("Fix the race condition in the scheduler"))


def build(**keys: Any) -> Router:
    block = {
        "type": "decision_model",
        "decision_target": "judge",
        "labels": LABELS,
        "default_target": "weak",
        **keys,
    }
    return DecisionModelSpec.model_validate(block).build(BuildContext(route="r", targets=TARGETS))


def rlcd(probs: dict[str, Any], target: str | None = None) -> str:
    named = target if target is not None else max(probs, key=lambda k: probs[k])
    return json.dumps({"target": named, "probabilities": [{"option": k, "probability": v} for k, v in probs.items()]})


def choice(probs: dict[str, float], pick: str | None = None, confidence: float | None = 0.7) -> ChatResponse:
    return ChatResponse(
        id="s1",
        model="jev-1.13.0",
        usage=Usage(input_tokens=300, output_tokens=4),
        choice=ChoiceAnswer(
            choice=pick or max(probs, key=lambda k: probs[k]), probabilities=probs, confidence=confidence
        ),
    )


async def test_argmax_chosen_the_rest_fallbacks_by_probability() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.2, "medium": 0.1, "hard": 0.7})]})
    decision = await build().route(TASK, context(), call)
    assert decision.candidates == ("strong", "weak", "mid")
    assert decision.source == "decision-model"
    assert not decision.abstained
    assert decision.confidence == pytest.approx(0.7)
    assert decision.details["probabilities"] == {"weak": 0.2, "mid": 0.1, "strong": 0.7}
    assert decision.details["label"] == "hard"
    facts = decision.details["decision_model"]
    assert (facts["protocol"], facts["target"], facts["input_tokens"], facts["output_tokens"]) == (
        "rlcd",
        "judge",
        10,
        5,
    )
    assert facts["latency_ms"] >= 0


async def test_rlcd_request_offers_every_label_and_asks_json() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.6, "medium": 0.2, "hard": 0.2})]})
    await build(labels={"easy": {"target": "weak", "description": "typo fixes"}, "hard": "strong"}).route(
        TASK, context(), call
    )
    sent = call.calls[0][1]
    assert sent.response_format == {"type": "json_object"}
    system, shown = sent.messages[0].text, sent.messages[1].text
    assert "- `easy`: typo fixes" in system
    assert "- `hard`: the model 'm-strong' (target 'strong')" in system
    assert "Fix the race condition" in shown
    assert "You are Claude Code" not in system + shown  # the caller's system prompt is not forwarded


async def test_json_schema_mode_constrains_labels() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.6, "medium": 0.2, "hard": 0.2})]})
    await build(response_format_type="json_schema").route(TASK, context(), call)
    fmt = call.calls[0][1].response_format
    assert fmt is not None and fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert schema["properties"]["target"]["enum"] == ["easy", "medium", "hard"]


async def test_labels_sharing_a_target_add_up() -> None:
    call = ScriptedCall({"judge": [rlcd({"typo": 0.3, "docs": 0.3, "hard": 0.4})]})
    router = build(labels={"typo": "weak", "docs": "weak", "hard": "strong"})
    decision = await router.route(TASK, context(), call)
    assert decision.candidates == ("weak", "strong")
    assert decision.details["probabilities"] == {"weak": pytest.approx(0.6), "strong": pytest.approx(0.4)}
    assert decision.details["label"] in ("typo", "docs")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I think the hard one.", "parse_error"),
        ("", "empty"),
        (json.dumps({"probabilities": {"easy": 1.0}}), "invalid_verdict"),
        (json.dumps({"probabilities": [{"option": "easy", "probability": 1.0}]}), "invalid_verdict"),
        (rlcd({"easy": 0.5, "hard": 0.5}), "missing_labels"),
        (rlcd({"easy": 0.4, "medium": 0.2, "hard": 0.2, "expert": 0.2}), "unknown_labels"),
        (
            json.dumps(
                {
                    "target": "easy",
                    "probabilities": [{"option": lb, "probability": 0.25} for lb in ("easy", "easy", "medium", "hard")],
                }
            ),
            "duplicate_labels",
        ),
        (rlcd({"easy": 0.5, "medium": 0.3, "hard": 0.1}), "probability_sum"),
        (rlcd({"easy": 0.6, "medium": 0.6, "hard": -0.2}), "bad_probability"),
        (rlcd({"easy": "high", "medium": 0.5, "hard": 0.5}, target="medium"), "bad_probability"),
        (rlcd({"easy": 0.2, "medium": 0.1, "hard": 0.7}, target="easy"), "inconsistent"),
        (rlcd({"easy": 0.2, "medium": 0.1, "hard": 0.7}, target="expert"), "inconsistent"),
    ],
)
async def test_malformed_verdicts_fail_open_with_the_reason(reply: str, reason: str) -> None:
    call = ScriptedCall({"judge": [reply]})
    decision = await build(default_target="mid").route(TASK, context(), call)
    assert decision.source == "fail_open"
    assert decision.abstained
    assert decision.candidates == ("mid", "weak", "strong")  # default first, the rest after it
    assert decision.details["judge_failure"] == reason
    assert decision.details["judge_failure_detail"]
    assert decision.details["decision_model"]["input_tokens"] == 10  # the call still cost tokens


async def test_sum_within_tolerance_is_normalised() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.5, "medium": 0.2, "hard": 0.31})]})
    decision = await build(sum_tolerance=0.02).route(TASK, context(), call)
    assert decision.source == "decision-model"
    assert sum(decision.details["probabilities"].values()) == pytest.approx(1.0)
    assert decision.details["probabilities"]["weak"] == pytest.approx(0.5 / 1.01, abs=1e-6)


async def test_tied_named_pick_is_accepted() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.4, "medium": 0.2, "hard": 0.4}, target="hard")]})
    decision = await build().route(TASK, context(), call)
    assert decision.source == "decision-model"
    assert decision.candidates[0] in ("weak", "strong")


async def test_below_cutoff_serves_default_but_records_probabilities() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.3, "medium": 0.25, "hard": 0.45})]})
    decision = await build(min_probability=0.5, default_target="mid").route(TASK, context(), call)
    assert decision.source == "fail_open"
    assert decision.details["judge_failure"] == "below_cutoff"
    assert decision.candidates == ("mid", "strong", "weak")  # the rest in order of probability
    assert decision.details["probabilities"]["strong"] == pytest.approx(0.45)
    assert decision.confidence == pytest.approx(0.45)


async def test_exactly_the_cutoff_is_trusted() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.25, "medium": 0.25, "hard": 0.5})]})
    decision = await build(min_probability=0.5).route(TASK, context(), call)
    assert (decision.source, decision.candidates[0]) == ("decision-model", "strong")


async def test_timeout_fails_open() -> None:
    call = ScriptedCall({"judge": [rlcd({"easy": 0.1, "medium": 0.1, "hard": 0.8})]}, delays={"judge": 5.0})
    decision = await build(timeout_s=0.05).route(TASK, context(), call)
    assert decision.source == "fail_open"
    assert decision.details["judge_failure"] == "timeout"
    assert decision.candidates[0] == "weak"
    assert "input_tokens" not in decision.details["decision_model"]  # no answer came back


async def test_upstream_error_fails_open_not_the_request() -> None:
    error = UpstreamStatusError("down", upstream_status=503, body=b"", target="judge")
    decision = await build().route(TASK, context(), ScriptedCall({"judge": [error]}))
    assert (decision.source, decision.details["judge_failure"]) == ("fail_open", "upstream_5xx")


async def test_verdict_from_reasoning_when_content_is_empty() -> None:
    verdict = rlcd({"easy": 0.1, "medium": 0.1, "hard": 0.8})
    answer = ChatResponse(id="r", content=[ReasoningPart(text=f"Thinking. {verdict}")])
    decision = await build(verdict_from_reasoning=True).route(TASK, context(), ScriptedCall({"judge": [answer]}))
    assert decision.candidates[0] == "strong"


# -- System One (typed choice) ----------------------------------------------------------------


async def test_system_one_asks_a_typed_choice() -> None:
    call = ScriptedCall({"jev": [choice({"easy": 0.1, "medium": 0.2, "hard": 0.7}, confidence=0.66)]})
    router = build(decision_target="jev", question="Who should do this?")
    decision = await router.route(TASK, context(), call)
    sent: ChatRequest = call.calls[0][1]
    assert sent.choice is not None
    assert sent.choice.instructions == "Who should do this?"
    assert list(sent.choice.options) == ["easy", "medium", "hard"]
    assert "Fix the race condition" in sent.messages[0].text
    assert decision.candidates == ("strong", "mid", "weak")
    facts = decision.details["decision_model"]
    assert (facts["protocol"], facts["model"], facts["confidence"], facts["input_tokens"]) == (
        "system_one",
        "jev-1.13.0",
        0.66,
        300,
    )


async def test_system_one_choice_that_is_not_the_argmax_fails_open() -> None:
    call = ScriptedCall({"jev": [choice({"easy": 0.9, "medium": 0.05, "hard": 0.05}, pick="hard")]})
    decision = await build(decision_target="jev").route(TASK, context(), call)
    assert (decision.source, decision.details["judge_failure"]) == ("fail_open", "inconsistent")


async def test_system_one_text_answer_fails_open() -> None:
    decision = await build(decision_target="jev").route(TASK, context(), ScriptedCall({"jev": ["easy"]}))
    assert decision.details["judge_failure"] == "invalid_response"


# -- session affinity (classify_trigger) -------------------------------------------------------


async def test_new_session_asks_once_per_session() -> None:
    router = build(classify_trigger="new_session")
    store = MemoryStore()
    call = ScriptedCall({"judge": [rlcd({"easy": 0.1, "medium": 0.1, "hard": 0.8})]})
    first = await router.route(TASK, context(store), call)
    second = await router.route(request(user("and now a typo")), context(store, turn=1), call)
    assert first.source == "decision-model"
    assert (second.source, second.candidates) == ("affinity", ("strong",))
    assert call.targets_called() == ["judge"]


async def test_fail_open_is_provisional_next_user_turn_asks_again() -> None:
    router = build(classify_trigger="new_session")
    store = MemoryStore()
    call = ScriptedCall({"judge": ["not json", rlcd({"easy": 0.1, "medium": 0.1, "hard": 0.8})]})
    first = await router.route(TASK, context(store), call)
    second = await router.route(request(user("try again")), context(store, turn=1), call)
    assert (first.source, second.source, second.candidates[0]) == ("fail_open", "decision-model", "strong")
    assert call.targets_called() == ["judge", "judge"]


# -- option orders (position bias) ------------------------------------------------------------


def first_listed_wins(request: ChatRequest) -> ChatResponse:
    """A decision model that always prefers the option it is offered first (0.6, the rest shared)."""
    assert request.choice is not None
    order = list(request.choice.options)
    probs = {label: (0.6 if i == 0 else 0.4 / (len(order) - 1)) for i, label in enumerate(order)}
    return choice(probs, confidence=0.6)


async def test_option_orders_average_away_a_position_preference() -> None:
    call = ScriptedCall({"jev": [first_listed_wins]})
    router = build(decision_target="jev", labels={"easy": "weak", "hard": "strong"}, option_orders=3)
    decision = await router.route(TASK, context(), call)
    offered = [list(req.choice.options) for _, req in call.calls if req.choice is not None]
    assert offered == [["easy", "hard"], ["hard", "easy"]]  # the third order would repeat the first
    assert decision.details["label_probabilities"] == {"easy": pytest.approx(0.5), "hard": pytest.approx(0.5)}
    facts = decision.details["decision_model"]
    assert (facts["option_orders"], facts["input_tokens"], facts["confidence"]) == (2, 600, pytest.approx(0.6))


async def test_option_orders_three_labels_and_one_bad_order_fails_open() -> None:
    good = rlcd({"easy": 0.2, "medium": 0.1, "hard": 0.7})
    call = ScriptedCall({"judge": [good, good, "not json"]})
    decision = await build(option_orders=3).route(TASK, context(), call)
    systems = [req.messages[0].text for _, req in call.calls]
    assert [s.index("`easy`") < s.index("`hard`") for s in systems] == [True, False, False]
    assert (decision.source, decision.details["judge_failure"]) == ("fail_open", "parse_error")
    assert decision.details["decision_model"]["input_tokens"] == 30  # three calls were made
