"""The stage router's classifier block: the capability judge decides ambiguous turns only."""

from __future__ import annotations

import json

from _convo import Step, bash, decode

from switchyard.protocol.session import SessionInfo
from switchyard.routers.base import RouteContext
from switchyard.routers.stage import StageRouterSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

TASK: Step = ("user", "Rename the helper in utils.py.")
QUIET: list[Step] = [("system", "You are a coding agent."), TASK]
OOM: list[Step] = [TASK, bash("python train.py", "torch.OutOfMemoryError: CUDA out of memory")]


def verdict(p_solve: float, boundary: str = "supported", rule: str = "SUP-1") -> str:
    return json.dumps({"crux": "a rename", "primary_rule": rule, "capability_boundary": boundary, "p_solve": p_solve})


def build(**classifier: object) -> object:
    block = {"target": "judge", "base_threshold": 0.6, **classifier}
    spec = StageRouterSpec.model_validate(
        {"type": "stage_router", "capable": "frontier", "efficient": "lightning", "classifier": block}
    )
    from switchyard.routers.base import BuildContext

    return spec.build(BuildContext(route="agent", targets={}))


def ctx(session: str | None, store: MemoryStore) -> RouteContext:
    return RouteContext(route="agent", session=SessionInfo(session_id=session), targets={}, store=store)


async def test_judge_sends_an_ambiguous_turn_to_the_efficient_tier() -> None:
    router = build()
    judge = ScriptedCall({"judge": [verdict(0.9)]})
    decision = await router.route(decode(QUIET), ctx(None, MemoryStore()), judge)  # type: ignore[attr-defined]
    assert decision.candidates[0] == "lightning" and decision.source == "llm-classifier"
    assert decision.score is not None and abs(decision.score - 0.1) < 1e-9
    assert decision.details["classifier"]["p_solve"] == 0.9
    assert [name for name, _ in judge.calls] == ["judge"]


async def test_a_low_forecast_goes_capable_and_the_step_raises_the_bar() -> None:
    router = build(threshold_step=0.15)
    judge = ScriptedCall({"judge": [verdict(0.8, "uncertain", "UNC-1")]})
    decision = await router.route(decode(QUIET), ctx(None, MemoryStore()), judge)  # type: ignore[attr-defined]
    # uncertain needs 0.6 + 0.15 = 0.75: 0.8 clears it.
    assert decision.candidates[0] == "lightning"
    judge = ScriptedCall({"judge": [verdict(0.8, "unsupported", "LIM-1")]})
    decision = await router.route(decode(QUIET), ctx(None, MemoryStore()), judge)  # type: ignore[attr-defined]
    assert decision.candidates[0] == "frontier", "unsupported needs 0.6 + 2 * 0.15 = 0.9"
    assert abs(decision.details["classifier"]["p_solve_needed"] - 0.9) < 1e-9


async def test_decided_turns_never_reach_the_judge() -> None:
    router = build()
    judge = ScriptedCall({"judge": [verdict(0.99)]})
    decision = await router.route(decode(OOM), ctx(None, MemoryStore()), judge)  # type: ignore[attr-defined]
    assert decision.candidates[0] == "frontier" and decision.source != "llm-classifier"
    assert judge.calls == []


async def test_a_broken_judge_falls_open_to_the_picker() -> None:
    router = build()
    judge = ScriptedCall({"judge": ["this is not json"]})
    decision = await router.route(decode(QUIET), ctx(None, MemoryStore()), judge)  # type: ignore[attr-defined]
    assert decision.source == "fall_open" and decision.candidates[0] == "lightning"


async def test_one_verdict_per_user_turn_with_a_session() -> None:
    router = build()
    store = MemoryStore()
    judge = ScriptedCall({"judge": [verdict(0.1), verdict(0.95)]})
    first = await router.route(decode(QUIET), ctx("s1", store), judge)  # type: ignore[attr-defined]
    again = await router.route(decode([*QUIET, ("assistant", "Looking.")]), ctx("s1", store), judge)  # type: ignore[attr-defined]
    assert first.candidates[0] == again.candidates[0] == "frontier"
    assert again.details["classifier"]["reused"] is True
    assert len(judge.calls) == 1, "a continuation of the same user turn reuses the verdict"
    nxt = [*QUIET, ("assistant", "Done."), ("user", "Now update the docs too.")]
    later = await router.route(decode(nxt), ctx("s1", store), judge)  # type: ignore[attr-defined]
    assert later.candidates[0] == "lightning" and len(judge.calls) == 2


async def test_every_request_asks_each_time() -> None:
    router = build(classify_trigger="every_request")
    store = MemoryStore()
    judge = ScriptedCall({"judge": [verdict(0.1)]})
    for _ in range(3):
        await router.route(decode(QUIET), ctx("s1", store), judge)  # type: ignore[attr-defined]
    assert len(judge.calls) == 3
