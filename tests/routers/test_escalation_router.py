"""The escalation router: buffered efficient turn, judge, streak, latch, recovery."""

from __future__ import annotations

from typing import Any

import pytest
from _routing_helpers import assistant_call, context, escalate, hand_back, judge_view, request, tool_result, user

from switchyard.protocol.errors import ContextWindowExceededError, UpstreamConnectionError
from switchyard.protocol.messages import ReasoningPart
from switchyard.protocol.response import ChatResponse
from switchyard.routers.base import BuildContext, Decision, Router
from switchyard.routers.escalation import EscalationState
from switchyard.routers.llm_classifier import LlmClassifierSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall


def build(**keys: Any) -> Router:
    block = {
        "type": "llm_classifier",
        "mode": "escalation",
        "classifier_target": "judge",
        "strong_target": "strong",
        "weak_target": "weak",
        "confirmations": 2,
        **keys,
    }
    return LlmClassifierSpec.model_validate(block).build(BuildContext(route="r", targets={}))


def turn(i: int) -> Any:
    msgs = [user("Make the build green")]
    for k in range(i):
        msgs += [assistant_call(f"c{k}"), tool_result(f"c{k}", f"result {k}")]
    return request(*msgs)


async def run(router: Router, verdicts: list[Any], turns: int, **call_kw: Any) -> tuple[list[Decision], ScriptedCall]:
    call = ScriptedCall({"weak": ["efficient answer"], "judge": verdicts}, **call_kw)
    store = MemoryStore()
    out = [await router.route(turn(i), context(store, turn=i), call) for i in range(turns)]
    return out, call


async def test_clear_verdict_serves_the_buffered_efficient_answer() -> None:
    (decision,), call = await run(build(), [escalate(False)], 1)
    assert decision.response is not None and decision.response.text == "efficient answer"
    assert (decision.answered_by, decision.source, decision.candidates) == ("weak", "escalation", ())
    assert call.targets_called() == ["weak", "judge"]
    view = judge_view(call.calls[1][1])
    assert "## Turn under review" in view and "efficient answer" in view


async def test_latch_at_the_confirmation_and_no_judge_afterwards() -> None:
    verdicts = [escalate(False), escalate(True), escalate(True), escalate(True)]
    out, call = await run(build(confirmations=2), verdicts, 6)
    assert [(d.source, d.candidates[:1] or (d.answered_by,)) for d in out] == [
        ("escalation", ("weak",)),
        ("escalation", ("weak",)),  # streak 1 of 2: efficient answer still served
        ("escalation", ("strong",)),  # streak 2 of 2: buffered answer discarded, strong serves
        ("latched", ("strong",)),
        ("latched", ("strong",)),
        ("latched", ("strong",)),
    ]
    assert out[2].response is None and out[2].details["escalation"]["latched"] is True
    assert call.targets_called() == ["weak", "judge"] * 3  # nothing after the latch


async def test_a_clear_verdict_resets_the_streak() -> None:
    verdicts = [escalate(True), escalate(False), escalate(True), escalate(False), escalate(True)]
    out, _ = await run(build(confirmations=2), verdicts, 5)
    assert all(d.response is not None for d in out)
    assert [d.details["escalation"]["streak"] for d in out] == [1, 0, 1, 0, 1]
    assert [d.score for d in out] == [0.5, 0.0, 0.5, 0.0, 0.5]


async def test_judge_failure_keeps_the_streak_and_serves_efficient() -> None:
    verdicts = [escalate(True), "garbage", escalate(True)]
    out, _ = await run(build(confirmations=2), verdicts, 3)
    assert out[1].source == "fail_open" and out[1].response is not None
    assert out[1].details["judge_failure"] == "parse_error"
    assert out[1].details["escalation"]["streak"] == 1
    assert out[2].candidates[0] == "strong"  # the streak survived the failure


async def test_judge_timeout_fails_open() -> None:
    out, _ = await run(build(judge_timeout_s=0.05), [escalate(True)], 1, delays={"judge": 5})
    assert (out[0].source, out[0].details["judge_failure"], out[0].answered_by) == ("fail_open", "timeout", "weak")


async def test_fenced_and_reasoning_only_verdicts() -> None:
    fenced = f"```json\n{escalate(True)}\n```"
    out, _ = await run(build(confirmations=1), [fenced], 1)
    assert out[0].candidates[0] == "strong"
    thinking = ChatResponse(id="x", content=[ReasoningPart(text=f"hmm {escalate(True)}")])
    out, _ = await run(build(confirmations=1, verdict_from_reasoning=True), [thinking], 1)
    assert out[0].candidates[0] == "strong"
    out, _ = await run(build(confirmations=1), [thinking], 1)
    assert out[0].source == "fail_open"


async def test_invalid_verdict_fails_open() -> None:
    out, _ = await run(build(confirmations=1), ['{"escalate": "yes", "reason": "x"}'], 1)
    assert (out[0].source, out[0].details["judge_failure"]) == ("fail_open", "invalid_verdict")


@pytest.mark.parametrize(
    "error", [ContextWindowExceededError("big", upstream_status=400), UpstreamConnectionError("x")]
)
async def test_efficient_failure_serves_strong_this_turn_only(error: Exception) -> None:
    router, store = build(confirmations=1), MemoryStore()
    call = ScriptedCall({"weak": [error, "fine"], "judge": [escalate(False)]})
    first = await router.route(turn(0), context(store), call)
    assert (first.candidates, first.source) == (("strong", "weak"), "escalation")
    assert "efficient_error" in first.details["escalation"]
    second = await router.route(turn(1), context(store), call)
    assert second.response is not None  # not latched
    assert call.targets_called() == ["weak", "weak", "judge"]


async def test_sessions_have_separate_streaks_and_no_session_never_latches() -> None:
    router = build(confirmations=2)
    call = ScriptedCall({"weak": ["a"], "judge": [escalate(True)]})
    for i in range(3):
        decision = await router.route(turn(i), context(MemoryStore(), session=None), call)
        assert decision.response is not None  # fresh state each time: streak 1 of 2
    one, two = MemoryStore(), MemoryStore()
    await router.route(turn(0), context(one), call)
    await router.route(turn(0), context(two), call)
    assert (await router.route(turn(1), context(one), call)).candidates[0] == "strong"
    assert EscalationState.from_dict(await two.get("escalation")).streak == 1


async def test_judge_sees_a_condensed_window() -> None:
    router = build(recent_turn_window=3, window_message_chars=60)
    call = ScriptedCall({"weak": ["x"], "judge": [escalate(False)]})
    await router.route(turn(10), context(), call)
    view = judge_view(call.calls[1][1])
    # The window of 3 starts on a tool result, so it grows by one to include its call.
    assert "showing the last 4 of 20 messages" in view
    assert "result 9" in view and "result 7" not in view
    assert "You are Claude Code" in view  # system anchors are part of the task framing


# -- recovery --------------------------------------------------------------------------------------


async def test_recovery_de_latches_after_n_hand_backs_then_probation() -> None:
    router = build(confirmations=2, recovery_confirmations=2)
    call = ScriptedCall(
        {
            "weak": ["efficient"],
            "judge": [
                escalate(True),
                escalate(True),  # latch (turn 1)
                hand_back(False),
                hand_back(True),
                hand_back(True),  # de-latch on turn 4, which then runs the normal flow:
                escalate(False),
                escalate(True),  # probation: a single escalate re-latches (turn 5)
            ],
        }
    )
    store = MemoryStore()
    out = [await router.route(turn(i), context(store, turn=i), call) for i in range(8)]
    assert [d.source for d in out] == [
        "escalation",
        "escalation",
        "latched",
        "latched",
        "escalation",
        "escalation",
        "latched",
        "latched",
    ]
    assert out[1].candidates[0] == "strong"
    assert out[4].response is not None and out[4].details["escalation"]["recovered"] is True
    assert out[5].candidates[0] == "strong"
    assert out[3].details["escalation"]["hand_back_streak"] == 1
    # max_recoveries 1: after the second latch no hand-back judge is asked any more.
    assert call.targets_called()[-2:] == ["weak", "judge"]
    assert len(call.calls) == 2 * 2 + 3 + 2 * 2
    state = EscalationState.from_dict(await store.get("escalation"))
    assert (state.latched, state.recoveries, state.probation) == (True, 1, False)


async def test_recovery_judge_failure_stays_latched() -> None:
    router = build(confirmations=1, recovery_confirmations=1)
    call = ScriptedCall({"weak": ["e"], "judge": [escalate(True), "junk"]})
    store = MemoryStore()
    out = [await router.route(turn(i), context(store, turn=i), call) for i in range(3)]
    assert [d.source for d in out] == ["escalation", "latched", "latched"]
    assert out[1].details["judge_failure"] == "parse_error"
    assert "hand_back" in call.calls[2][1].messages[0].text.lower()


def test_state_round_trip_and_tolerance() -> None:
    state = EscalationState(streak=2, latched=True, latched_turn=7, recoveries=1)
    assert EscalationState.from_dict(state.to_dict()) == state
    odd = EscalationState.from_dict({"streak": "2", "latched": 1, "latched_turn": True, "junk": 3})
    assert odd == EscalationState()


async def test_concurrent_turns_of_one_session_count_every_verdict() -> None:
    import asyncio

    router = build(confirmations=1000)
    store = MemoryStore()
    # Every call waits, so all 50 turns read the state before any verdict is applied.
    call = ScriptedCall({"weak": ["efficient answer"], "judge": [escalate(True)]}, delays={"weak": 0.01})
    await asyncio.gather(*(router.route(turn(3), context(store, turn=3), call) for _ in range(50)))
    state = EscalationState.from_dict(await store.get("escalation"))
    assert (state.streak, state.judged_turns, state.latched) == (50, 50, False)
