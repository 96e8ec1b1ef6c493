"""The stage router end to end (no HTTP): cascade, classifier seam, notes, prompts, hysteresis."""

from __future__ import annotations

from typing import Any

import pytest
from _convo import Step, bash, decode, tool

from switchyard.protocol.call import ModelCall
from switchyard.protocol.messages import TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import NamespacedStore, SessionInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.stage import HandoffNotes, Signals, StageConfig, StageRouter, TierVerdict
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

TB = 'Traceback (most recent call last):\n  File "/app/p.py", line {n}, in parse\nValueError: bad {n}'
TASK: Step = ("user", "Fix the parser so the tests pass.")
NOTES = HandoffNotes("[router] escalated: re-check first.", "[router] handed back: routine work.")

QUIET: list[Step] = [("system", "You are a coding agent."), TASK]
OOM: list[Step] = [TASK, bash("python train.py", "torch.OutOfMemoryError: CUDA out of memory")]
STUCK: list[Step] = [TASK, tool("Read", "src")] + [bash("python -m pytest -q", TB.format(n=i)) for i in (1, 2)]
SPINNING: list[Step] = [
    TASK,
    bash("python run.py", "starting"),
    bash("python run.py", "ImportError: cannot import name 'x'"),
    bash("python run.py --fast", "still starting"),
    bash("python run.py --debug", "starting again"),
]
SETTLED: list[Step] = [
    TASK,
    bash("python -m pytest -q", TB.format(n=1)),
    tool("Edit", "File updated.", file_path="p.py"),
    tool("Edit", "File updated.", file_path="t.py"),
    bash("python -m pytest -q", "===== 9 passed in 0.31s ====="),
]
WRITING: list[Step] = [TASK, tool("Write", "ok", path="a.py"), tool("Edit", "ok", path="a.py")]


def router(**kw: Any) -> StageRouter:
    return StageRouter(StageConfig(capable="frontier", efficient="lightning", **kw))


def ctx(session: str | None = None, turn: int = 0, store: Any = None) -> RouteContext:
    return RouteContext(
        route="agent",
        session=SessionInfo(session_id=session, turn_index=turn),
        targets={},
        store=store if store is not None else MemoryStore(),
    )


async def route(r: StageRouter, steps: list[Step], c: RouteContext | None = None, call: Any = None) -> Decision:
    request = decode(steps)
    before = request.model_dump()
    decision = await r.route(request, c or ctx(), call or ScriptedCall({}))
    assert request.model_dump() == before, "the caller's request must not be mutated"
    return decision


# -- the cascade -------------------------------------------------------------------------------------


async def test_override_on_critical_error() -> None:
    d = await route(router(), OOM)
    assert d.candidates == ("frontier", "lightning")
    assert (d.source, d.score, d.confidence) == ("override", 1.0, 1.0)
    assert d.details["signals"]["errors"] == ["oom"] and d.details["tier"] == "capable"
    assert "critical error" in d.reason


async def test_override_on_the_same_failure_twice() -> None:
    d = await route(router(), STUCK)
    assert (d.candidates[0], d.source) == ("frontier", "override")
    assert d.details["signals"]["repeated_failure"] is True


async def test_tests_passed_drops_back_even_under_capable_first() -> None:
    d = await route(router(picker="capable_first"), SETTLED)
    assert (d.candidates, d.source, d.score) == (("lightning", "frontier"), "tests_passed", 0.0)


async def test_dimensions_escalate_a_deep_stall_with_an_error() -> None:
    d = await route(router(), SPINNING)
    assert (d.candidates[0], d.source) == ("frontier", "dimensions")
    assert d.confidence == pytest.approx(0.762, abs=1e-3)
    assert d.score == pytest.approx((0.762 + 1) / 2, abs=1e-3)
    assert d.details["scorer_score"] == pytest.approx(0.762, abs=1e-3)


@pytest.mark.parametrize(("picker", "target"), [("efficient_first", "lightning"), ("capable_first", "frontier")])
async def test_fall_open_to_the_picker_default(picker: str, target: str) -> None:
    d = await route(router(picker=picker), QUIET)
    assert (d.candidates[0], d.source) == (target, "fall_open")
    assert d.score == 0.5 and d.confidence == 0.0
    assert d.request is None, "nothing rewritten: the caller's body can be replayed verbatim"


async def test_capable_first_offloads_production_after_the_fix_only() -> None:
    assert (await route(router(picker="capable_first"), WRITING)).candidates[0] == "lightning"
    nvidia = await route(router(picker="capable_first", compat="nvidia"), WRITING)
    assert (nvidia.candidates[0], nvidia.source) == ("frontier", "fall_open")


# -- the classifier seam ----------------------------------------------------------------------------


class FakeClassifier:
    def __init__(self, answer: TierVerdict | Exception | None) -> None:
        self.answer = answer
        self.seen: list[Signals] = []

    async def classify(
        self, request: ChatRequest, signals: Signals, ctx: RouteContext, call: ModelCall
    ) -> TierVerdict | None:
        self.seen.append(signals)
        await call("judge", request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_classifier_decides_ambiguous_turns_only() -> None:
    judge = FakeClassifier(TierVerdict("capable", confidence=0.8, p_capable=0.9, reason="hard task"))
    r = StageRouter(StageConfig(capable="frontier", efficient="lightning"), classifier=judge)
    call = ScriptedCall({"judge": ["{}"]})
    d = await route(r, QUIET, call=call)
    assert (d.candidates[0], d.source, d.score, d.confidence, d.reason) == (
        "frontier",
        "llm-classifier",
        0.9,
        0.8,
        "hard task",
    )
    assert len(judge.seen) == 1 and [t for t, _ in call.calls] == ["judge"]
    await route(r, OOM, call=call)
    assert len(judge.seen) == 1, "a decided turn never reaches the classifier"


@pytest.mark.parametrize("answer", [None, RuntimeError("judge down")])
async def test_classifier_abstaining_or_failing_falls_open(answer: Any) -> None:
    r = StageRouter(StageConfig(capable="frontier", efficient="lightning"), classifier=FakeClassifier(answer))
    d = await route(r, QUIET, call=ScriptedCall({"judge": ["{}"]}))
    assert (d.candidates[0], d.source) == ("lightning", "fall_open")
    if answer is not None:
        assert d.details["classifier_error"] == "RuntimeError: judge down"


# -- handoff notes and tier prompts -------------------------------------------------------------------


def last_text(request: ChatRequest) -> tuple[str, str]:
    msg = request.messages[-1]
    part = msg.content[-1]
    assert isinstance(part, TextPart)
    return msg.role, part.text


async def test_escalation_note_goes_in_a_new_user_message_after_tool_results() -> None:
    d = await route(router(notes=NOTES), OOM)
    assert d.request is not None
    assert last_text(d.request) == ("user", NOTES.escalation)
    assert d.request.messages[:-1] == decode(OOM).messages


async def test_note_is_appended_to_a_trailing_user_message() -> None:
    steps = [*SPINNING, ("user", "Please hurry.")]
    d = await route(router(notes=NOTES), steps)
    assert d.request is not None
    last = d.request.messages[-1]
    assert last.role == "user" and [p.text for p in last.content] == ["Please hurry.", NOTES.escalation]  # type: ignore[union-attr]
    assert len(d.request.messages) == len(decode(steps).messages)


async def test_deescalation_note_on_tests_passed() -> None:
    d = await route(router(notes=NOTES), SETTLED)
    assert d.request is not None and last_text(d.request)[1] == NOTES.deescalation


async def test_no_note_on_fall_open_and_classifier_escalations_are_gated() -> None:
    assert (await route(router(notes=NOTES, picker="capable_first"), QUIET)).request is None
    judge = FakeClassifier(TierVerdict("capable"))
    config = StageConfig(capable="frontier", efficient="lightning", notes=NOTES)
    gated = await route(StageRouter(config, classifier=judge), QUIET, call=ScriptedCall({"judge": ["{}"]}))
    assert gated.request is None
    ungated_notes = HandoffNotes(NOTES.escalation, None, only_on_signal_escalation=False)
    config = StageConfig(capable="frontier", efficient="lightning", notes=ungated_notes)
    ungated = await route(StageRouter(config, classifier=judge), QUIET, call=ScriptedCall({"judge": ["{}"]}))
    assert ungated.request is not None and last_text(ungated.request)[1] == NOTES.escalation


async def test_switch_notes_only_on_the_turn_the_tier_changes() -> None:
    r = router(notes=NOTES)  # when="switch" is the default
    store = MemoryStore()
    first = await route(r, QUIET, ctx("s1", 0, store))
    assert first.request is None
    switched = await route(r, OOM, ctx("s1", 1, store))
    assert switched.request is not None and last_text(switched.request)[1] == NOTES.escalation
    stayed = await route(r, [*OOM, bash("python train.py", "MemoryError")], ctx("s1", 2, store))
    assert stayed.source == "override" and stayed.request is None
    # Without a session a switch cannot be seen: every decided turn carries its note.
    assert (await route(r, OOM, ctx(None))).request is not None


async def test_tier_system_prompt_is_put_first() -> None:
    r = router(capable_system_prompt="Think hard.", efficient_system_prompt="Be quick.")
    d = await route(r, OOM)
    assert d.request is not None
    assert d.request.messages[0].role == "system" and d.request.messages[0].text == "Think hard."
    assert d.request.messages[1:] == decode(OOM).messages
    quiet = await route(r, QUIET)
    assert quiet.request is not None and quiet.request.messages[0].text == "Be quick."
    assert quiet.request.messages[1].text == "You are a coding agent."


# -- hysteresis --------------------------------------------------------------------------------------------


async def test_hold_keeps_the_new_tier_for_n_turns() -> None:
    r = router(hold={"capable": 2, "efficient": 0}, threshold=0.3)
    store = NamespacedStore(MemoryStore(), "agent:")
    c = lambda turn: ctx("s1", turn, store)  # noqa: E731
    assert (await route(r, QUIET, c(0))).source == "fall_open"
    assert (await route(r, OOM, c(1))).source == "override"
    calm = [*OOM, tool("Write", "ok"), tool("Edit", "ok"), tool("Edit", "ok")]  # the OOM left the window
    held = await route(r, calm, c(3))
    assert (held.candidates[0], held.source) == ("frontier", "hold")
    assert held.details["held_from"] == {"tier": "efficient", "source": "dimensions"}
    assert held.details["hold_left"] == 1
    # A retry of the same turn is judged like the first attempt: the hold does not count down twice.
    again = await route(r, calm, c(3))
    assert (again.source, again.details["hold_left"]) == ("hold", 1)
    held2 = await route(r, [*calm, tool("Edit", "ok")], c(4))
    assert (held2.source, held2.details["hold_left"]) == ("hold", 0)
    free = await route(r, [*calm, tool("Edit", "ok"), tool("Edit", "ok")], c(5))
    assert (free.candidates[0], free.source) == ("lightning", "dimensions")


async def test_hard_signals_end_a_hold() -> None:
    r = router(hold={"capable": 2, "efficient": 2})
    store = MemoryStore()
    await route(r, QUIET, ctx("s", 0, store))
    assert (await route(r, OOM, ctx("s", 1, store))).candidates[0] == "frontier"
    passed = await route(r, SETTLED, ctx("s", 2, store))
    assert (passed.candidates[0], passed.source) == ("lightning", "tests_passed")
    # Now the efficient tier is held; an override still escalates at once.
    assert (await route(r, OOM, ctx("s", 3, store))).source == "override"


async def test_without_a_session_there_is_no_hold() -> None:
    r = router(hold={"capable": 5, "efficient": 5})
    await route(r, OOM)
    d = await route(r, WRITING)
    assert d.source == "fall_open" and "hold_left" not in d.details


def test_stateful_only_when_hold_or_switch_notes() -> None:
    assert not router().config.stateful
    assert router(hold={"capable": 1}).config.stateful
    assert router(notes=NOTES).config.stateful
    assert not router(notes=HandoffNotes("x", when="every_turn")).config.stateful


# -- the per-session prefix cache ------------------------------------------------------------------------


async def test_cached_prefix_gives_the_same_signals_as_a_full_walk() -> None:
    r = router()
    steps: list[Step] = [("system", "sys"), TASK]
    for i in range(12):
        steps.append(bash(f"python step{i}.py", TB.format(n=i) if i % 5 == 4 else "ok"))
        if i == 6:
            steps.append(("user", "This session is being continued from a previous conversation."))
        request = decode(steps)
        assert r.signals(request, "sess") == r.signals(request), i
    assert len(r._prefixes) == 1


async def test_edited_history_is_walked_again() -> None:
    r = router()
    steps: list[Step] = [TASK, *[tool("Read", "x") for _ in range(6)]]
    r.signals(decode(steps), "sess")
    rewritten: list[Step] = [TASK, ("user", "This session is being continued from a summary."), *steps[1:]]
    assert r.signals(decode(rewritten), "sess").compacted
    shorter = steps[:3]
    assert r.signals(decode(shorter), "sess") == r.signals(decode(shorter))
