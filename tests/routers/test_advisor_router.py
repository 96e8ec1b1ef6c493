"""The advisor gate with scripted model calls: triggers, verdicts, budget, refunds, transcript."""

from __future__ import annotations

from typing import Any

import pytest
from _routing_helpers import assistant_call, context, tool_result, user

from switchyard.config.load import ConfigError, load_config
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.messages import ReasoningPart, TextPart, ToolCallPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.routers.advisor import AdvisorConfig, AdvisorRouter, parse_verdict, review_transcript
from switchyard.routers.advisor.review import MIDDLE_MARKER, NO_TEXT, REASONING_LABEL
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

DONE = "All done: the tests pass."


def turn(text: str = DONE, *, tool: bool = False, reasoning: str = "") -> ChatResponse:
    parts: list[Any] = [ReasoningPart(text=reasoning)] if reasoning else []
    if text:
        parts.append(TextPart(text=text))
    if tool:
        parts.append(ToolCallPart(id="c9", name="bash", arguments='{"cmd": "pytest"}'))
    return ChatResponse(
        id="t",
        content=parts,
        stop_reason="tool_use" if tool else "end_turn",
        usage=Usage(input_tokens=100, output_tokens=40),
    )


def convo(results: int = 1, assistant_turns: int = 1) -> ChatRequest:
    messages = [user("fix the bug")]
    for i in range(max(results, assistant_turns)):
        messages.append(assistant_call(f"c{i}"))
        if i < results:
            messages.append(tool_result(f"c{i}", f"output {i}"))
    return ChatRequest(model="r", messages=messages)


def gate(**keys: Any) -> AdvisorRouter:
    return AdvisorRouter(AdvisorConfig(executor_target="weak", advisor_target="strong", **keys))


async def test_no_tool_call_turn_is_reviewed_and_approved_unchanged() -> None:
    answer = turn()
    call = ScriptedCall({"weak": [answer], "strong": ["**APPROVE** looks complete"]})
    store = MemoryStore()
    decision = await gate(gate_min_tool_results=1).route(convo(), context(store), call)
    assert decision.source == "advisor:approve" and decision.response is answer
    assert decision.answered_by == "weak"
    assert call.targets_called() == ["weak", "strong"]
    assert await store.get("advisor") == {"reviews": 1, "failed": 0, "stall_fired": False}


async def test_redo_discards_the_turn_and_re_asks_the_executor_with_the_plan() -> None:
    call = ScriptedCall({"weak": [turn()], "strong": ["Verdict: REDO - run the full test suite, not one file."]})
    req = convo()
    decision = await gate().route(req, context(), call)
    assert decision.source == "advisor:redo" and decision.response is None
    assert decision.candidates[0] == "weak"
    assert decision.request is not None
    extra = decision.request.messages[len(req.messages) :]
    assert [m.role for m in extra] == ["assistant", "user"]
    assert extra[0].text == DONE
    assert extra[1].text.endswith("run the full test suite, not one file.")
    assert decision.details["advisor"]["discarded_output_tokens"] == 40
    assert req.messages[-1].role == "tool"  # the caller's request is untouched


async def test_tool_calling_turn_does_not_trigger_no_tool_call_and_min_tool_results_gates() -> None:
    call = ScriptedCall({"weak": [turn(tool=True)], "strong": ["APPROVE"]})
    decision = await gate().route(convo(), context(), call)
    assert decision.source == "advisor:no_trigger" and call.targets_called() == ["weak"]
    few = ScriptedCall({"weak": [turn()], "strong": ["APPROVE"]})
    decision = await gate(gate_min_tool_results=3).route(convo(results=2), context(), few)
    assert decision.source == "advisor:no_trigger"


async def test_pattern_trigger_reads_the_visible_text() -> None:
    g = gate(gate_trigger="pattern", gate_trigger_pattern=r"(?i)\bdone\b")
    hit = await g.route(convo(), context(), ScriptedCall({"weak": [turn(tool=True)], "strong": ["APPROVE"]}))
    assert hit.source == "advisor:approve" and hit.details["advisor"]["trigger"] == "pattern"
    miss = await g.route(convo(), context(), ScriptedCall({"weak": [turn("working on it")], "strong": ["APPROVE"]}))
    assert miss.source == "advisor:no_trigger"


async def test_stall_fires_once_per_session_after_n_assistant_turns() -> None:
    g = gate(gate_trigger="pattern", gate_trigger_pattern="NEVER", gate_stall_turns=3, max_reviews=5)
    store = MemoryStore()
    early = await g.route(convo(assistant_turns=2), context(store, turn=2), ScriptedCall({"weak": [turn(tool=True)]}))
    assert early.source == "advisor:no_trigger"
    call = ScriptedCall({"weak": [turn(tool=True)], "strong": ["APPROVE"]})
    fired = await g.route(convo(assistant_turns=3), context(store, turn=3), call)
    assert fired.details["advisor"]["trigger"] == "stall"
    again = await g.route(convo(assistant_turns=4), context(store, turn=4), call)
    assert again.source == "advisor:no_trigger"  # once per session
    other = await g.route(convo(assistant_turns=4), context(MemoryStore(), turn=4), call)
    assert other.details["advisor"]["trigger"] == "stall"  # another session has its own marker


async def test_budget_spent_serves_the_executor_unbuffered() -> None:
    store = MemoryStore()
    g = gate(max_reviews=2)
    for _ in range(2):
        await g.route(convo(), context(store), ScriptedCall({"weak": [turn()], "strong": ["APPROVE"]}))
    call = ScriptedCall({"weak": [turn()], "strong": ["APPROVE"]})
    decision = await g.route(convo(), context(store), call)
    assert decision.source == "advisor:unreviewed" and decision.response is None
    assert decision.candidates[0] == "weak" and call.calls == []  # the engine makes (and streams) the call


@pytest.mark.parametrize("reply", ["Looks fine to me.", "", "APPROVED!"])
async def test_unparseable_verdict_refunds_and_approves(reply: str) -> None:
    store = MemoryStore()
    answer = turn()
    decision = await gate().route(convo(), context(store), ScriptedCall({"weak": [answer], "strong": [reply]}))
    assert decision.source == "advisor:fail_open" and decision.response is answer
    assert await store.get("advisor") == {"reviews": 0, "failed": 1, "stall_fired": False}


async def test_failed_advisor_call_refunds_approves_and_three_failures_stop_reviews() -> None:
    store = MemoryStore()
    g = gate(max_reviews=5)
    down = UpstreamError("advisor down", status=503)
    for _ in range(3):
        d = await g.route(convo(), context(store), ScriptedCall({"weak": [turn()], "strong": [down]}))
        assert d.source == "advisor:fail_open"
    assert await store.get("advisor") == {"reviews": 0, "failed": 3, "stall_fired": False}
    spent = await g.route(convo(), context(store), ScriptedCall({"weak": [turn()]}))
    assert spent.source == "advisor:unreviewed" and "advisor failing" in spent.reason


async def test_fail_open_false_fails_the_request_on_a_failed_call_but_still_refunds() -> None:
    store = MemoryStore()
    with pytest.raises(UpstreamError):
        await gate(fail_open=False).route(
            convo(), context(store), ScriptedCall({"weak": [turn()], "strong": [UpstreamError("x", status=500)]})
        )
    assert (await store.get("advisor") or {})["reviews"] == 0


async def test_executor_failure_lets_the_advisor_serve() -> None:
    call = ScriptedCall({"weak": [UpstreamError("weak down", status=500)]})
    decision = await gate().route(convo(), context(), call)
    assert decision.source == "advisor:executor_failed" and decision.candidates[0] == "strong"


async def test_redo_of_a_tool_only_turn_describes_the_calls_instead_of_an_empty_message() -> None:
    g = gate(gate_trigger="pattern", gate_trigger_pattern=".*", max_reviews=2)
    decision = await g.route(convo(), context(), ScriptedCall({"weak": [turn("", tool=True)], "strong": ["REDO"]}))
    assert decision.request is not None
    discarded = decision.request.messages[-2]
    assert discarded.role == "assistant" and "bash" in discarded.text
    assert "state how you verified" in decision.request.messages[-1].text  # default plan for a bare REDO


def test_verdict_parsing() -> None:
    def reply(text: str, reasoning: str = "") -> ChatResponse:
        return turn(text, reasoning=reasoning)

    for text in ("APPROVE", "approve.", "> **Verdict:** APPROVE", "# Final verdict: Approve", "`APPROVE`"):
        got = parse_verdict(reply(text))
        assert got is not None and got.kind == "approve", text
    redo = parse_verdict(reply("REDO: 1. add a test\n2. run it"))
    assert redo is not None and redo.kind == "redo" and redo.plan == "1. add a test\n2. run it"
    for text in ("I approve", "APPROVED", "REDOING", "maybe"):
        assert parse_verdict(reply(text)) is None, text
    from_reasoning = parse_verdict(reply("", reasoning="REDO check the edge case"))
    assert from_reasoning is not None and from_reasoning.from_reasoning and from_reasoning.plan == "check the edge case"


def test_transcript_is_bounded_with_the_middle_dropped_and_the_turn_last() -> None:
    messages = [user("TASK-START " + "a" * 5000), *[user(f"middle {i} " + "b" * 500) for i in range(50)]]
    messages.append(user("LATEST-WORK " + "c" * 200))
    text = review_transcript(messages, turn("FINAL TURN"), 4000)
    assert len(text) <= 4000
    assert MIDDLE_MARKER in text and text.startswith("[user] TASK-START")
    assert "LATEST-WORK" in text and text.rstrip().endswith("FINAL TURN")
    short = review_transcript([user("hi")], turn(""), 4000)
    assert MIDDLE_MARKER not in short and short.endswith(NO_TEXT)
    thinking = review_transcript([user("hi")], turn("", reasoning="thinking hard"), 4000)
    assert REASONING_LABEL in thinking and thinking.endswith("thinking hard")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"gate_trigger": "pattern"}, "gate_trigger 'pattern' needs gate_trigger_pattern"),
        ({"gate_trigger_pattern": "x"}, "only used with gate_trigger 'pattern'"),
        ({"gate_trigger": "pattern", "gate_trigger_pattern": "("}, "not a valid regex"),
        (
            {"gate_trigger": "pattern", "gate_trigger_pattern": "("},
            "routes.a.gate_trigger_pattern: gate_trigger_pattern",
        ),
        ({"transcript_max_chars": 100}, "routes.a.transcript_max_chars"),
        ({"max_reviews": 0}, "routes.a.max_reviews"),
        ({"advisor_target": "ghost"}, "routes.a.advisor_target: unknown target 'ghost'"),
        ({"gate_trigger": "stall"}, "routes.a.gate_trigger"),
    ],
)
def test_config_errors(keys: dict[str, Any], message: str) -> None:
    cfg = {
        "llm_clients": {"l": {"base_url": "http://127.0.0.1:9/v1"}},
        "targets": {"weak": {"client": "l", "model": "w"}, "strong": {"client": "l", "model": "s"}},
        "routes": {"a": {"type": "advisor", "executor_target": "weak", "advisor_target": "strong", **keys}},
    }
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert message in str(err.value)


async def test_parallel_turns_cannot_overspend_the_review_budget() -> None:
    import asyncio

    store = MemoryStore()
    g = gate(max_reviews=1)
    inner = ScriptedCall({"weak": [turn(), turn()], "strong": ["APPROVE", "APPROVE"]})

    async def slow(target: Any, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(0.01)  # both turns wait on their executor call at the same time
        return await inner(target, request)

    decisions = await asyncio.gather(*(g.route(convo(), context(store), slow) for _ in range(2)))
    assert sorted(d.source for d in decisions) == ["advisor:approve", "advisor:unreviewed"]
    assert inner.targets_called().count("strong") == 1
    assert await store.get("advisor") == {"reviews": 1, "failed": 0, "stall_fired": False}


def test_stored_review_state_is_read_with_exact_types() -> None:
    from switchyard.routers.advisor.gate import ReviewState

    # bool is an int subclass: a stored true is no review count, and a count no stall flag
    state = ReviewState.from_dict({"reviews": True, "failed": 2, "stall_fired": 1, "other": "x"})
    assert (state.reviews, state.failed, state.stall_fired) == (0, 2, False)
    assert ReviewState.from_dict({"reviews": 3, "stall_fired": True}).reviews == 3
