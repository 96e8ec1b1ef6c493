"""``type: cascade``: stages in order, abstention per router, the deciding stage in the record,
config errors at their YAML paths, and the offline-evaluation hooks."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from _routing_helpers import context, tool_result, user

from switchyard.config.build import build_routes, target_infos
from switchyard.config.load import ConfigError, load_config
from switchyard.protocol.call import ModelCall
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import Decision, RouteContext
from switchyard.routers.cascade import CascadeRouter, CascadeSpec, Stage
from switchyard.routers.stage import StageConfig, StageRouter
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

BASE: dict[str, Any] = {
    "llm_clients": {"local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
    "targets": {
        "efficient": {"client": "local", "model": "e", "price": {"input_per_mtok": 0.1}},
        "capable": {"client": "local", "model": "c", "price": {"input_per_mtok": 15}},
        "judge": {"client": "local", "model": "j"},
    },
}
CLASSIFIER = {
    "type": "llm_classifier",
    "mode": "capability",
    "classifier_target": "judge",
    "strong_target": "capable",
    "weak_target": "efficient",
    "base_threshold": 0.5,
}
STAGE = {"type": "stage_router", "capable": "capable", "efficient": "efficient"}


class Fixed:
    """A router that always returns the same decision and counts its calls."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.seen: list[RouteContext] = []

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        self.seen.append(ctx)
        await ctx.store.set("mark", {"n": len(self.seen)})
        return self.decision


def ctx_for(store: MemoryStore, *, turn: int = 0) -> RouteContext:
    base = context(store, turn=turn)
    return dataclasses.replace(base, targets={n: TargetInfo(name=n, model=n) for n in BASE["targets"]})


def request(*messages: Message) -> ChatRequest:
    return ChatRequest(model="r", messages=list(messages) or [user("hi")])


async def test_first_decisive_stage_wins_and_names_itself() -> None:
    abstains = Fixed(Decision(candidates=("capable",), source="fall_open", abstained=True, reason="nothing"))
    decides = Fixed(Decision(candidates=("efficient", "capable"), source="probe", score=0.2, reason="easy"))
    never = Fixed(Decision(candidates=("capable",), source="x"))
    router = CascadeRouter(
        [Stage(abstains, "stage_router"), Stage(decides, "prefill_probe", scored=True), Stage(never, "llm_classifier")],
        "capable",
    )
    store = MemoryStore()
    decision = await router.route(request(), context(store), ScriptedCall({}))
    assert decision.source == "cascade:2/prefill_probe"
    assert decision.candidates == ("efficient", "capable") and decision.score == 0.2
    assert not decision.abstained and not never.seen
    trail = decision.details["cascade"]
    assert [(s["stage"], s["abstained"], s["source"]) for s in trail] == [(1, True, "fall_open"), (2, False, "probe")]
    assert decision.details["stage_source"] == "probe"
    # each stage keeps its own slot of the cascade's session state
    assert await store.get("stage1.mark") == {"n": 1} and await store.get("stage2.mark") == {"n": 1}


async def test_default_closes_when_every_stage_abstains_and_unscored_stages_report_no_score() -> None:
    a = Fixed(Decision(candidates=("capable",), abstained=True, score=0.9, source="fail_open"))
    router = CascadeRouter([Stage(a, "llm_classifier"), Stage(a, "knn")], "efficient")
    decision = await router.route(request(), context(), ScriptedCall({}))
    assert decision.source == "cascade:default" and decision.candidates == ("efficient",)
    assert decision.score is None and len(decision.details["cascade"]) == 2
    decided = CascadeRouter([Stage(Fixed(Decision(candidates=("capable",), score=0.9)), "knn")], "efficient")
    assert (await decided.route(request(), context(), ScriptedCall({}))).score is None  # not the scored stage


async def test_a_stage_that_already_answered_is_decisive_even_if_marked_abstained() -> None:
    answer = ChatResponse(id="r1", content=[])
    router = CascadeRouter(
        [Stage(Fixed(Decision(response=answer, answered_by="efficient", abstained=True)), "llm_classifier")],
        "capable",
    )
    decision = await router.route(request(), context(), ScriptedCall({}))
    assert decision.response is answer and decision.source == "cascade:1/llm_classifier"


async def test_stage_router_abstains_only_without_a_decisive_signal() -> None:
    router = StageRouter(StageConfig(capable="capable", efficient="efficient", threshold=0.5))
    calm = await router.route(request(user("write a haiku")), context(session=None), ScriptedCall({}))
    assert calm.source == "fall_open" and calm.abstained
    oom = request(user("run it"), tool_result("c1", "MemoryError: out of memory"))
    loud = await router.route(oom, context(session=None), ScriptedCall({}))
    assert loud.source == "override" and not loud.abstained


async def test_classifier_abstains_on_an_unusable_verdict_and_a_kept_fail_open_still_abstains() -> None:
    loaded = load_config({**BASE, "routes": {"c": {**CLASSIFIER, "classify_trigger": "new_session"}}})
    router = build_routes(loaded, target_infos(loaded))["c"].router
    store = MemoryStore()
    broken = ScriptedCall({"judge": ["not json at all"]})
    first = await router.route(request(user("task")), ctx_for(store), broken)
    assert first.source == "fail_open" and first.abstained
    # a tool continuation keeps the provisional assignment, which is still no verdict
    later = request(user("task"), Message(role="assistant", content=[]), tool_result("c1", "ok"))
    kept = await router.route(later, ctx_for(store, turn=1), broken)
    assert kept.source == "affinity" and kept.abstained
    good = ScriptedCall(
        {"judge": ['{"crux": "x", "primary_rule": "SUP-1", "capability_boundary": "supported", "p_solve": 0.9}']}
    )
    decided = await router.route(request(user("another task")), context(MemoryStore()), good)
    assert decided.source == "llm-classifier" and not decided.abstained


def _load(routes: dict[str, Any]) -> Any:
    return load_config({**BASE, "routes": routes})


def test_config_builds_named_and_inline_stages_once() -> None:
    loaded = _load(
        {
            "agent": {"type": "cascade", "stages": [STAGE, "judged", CLASSIFIER], "default": "capable"},
            "judged": CLASSIFIER,
        }
    )
    routes = build_routes(loaded, target_infos(loaded))
    cascade = routes["agent"].router
    assert isinstance(cascade, CascadeRouter)
    assert cascade.stages[1].router is routes["judged"].router  # the named route's own router
    assert [s.kind for s in cascade.stages] == ["stage_router", "llm_classifier", "llm_classifier"]
    assert routes["agent"].targets == ("capable", "efficient")
    spec = loaded.routes["agent"]
    assert isinstance(spec, CascadeSpec)
    assert ("stages[2].classifier_target", "judge") in spec.auxiliary_refs()


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        (
            {"a": {"type": "cascade", "stages": ["b"], "default": "capable"},
             "b": {"type": "cascade", "stages": [STAGE, "a"], "default": "capable"}},
            ["routes.b.stages[1]: routes refer to each other in a cycle: a → b → a"],
        ),
        (
            {"a": {"type": "cascade", "stages": ["a"], "default": "capable"}},
            ["routes.a.stages[0]: routes refer to each other in a cycle: a → a"],
        ),
        (
            {"a": {"type": "cascade", "stages": ["judgd"], "default": "capable"}, "judged": CLASSIFIER},
            ["routes.a.stages[0]: unknown route 'judgd' (did you mean 'judged'?)"],
        ),
        (
            {"a": {"type": "cascade", "stages": [{**STAGE, "capable": "ghost"}], "default": "nowhere"}},
            ["routes.a.stages[0].capable: unknown target 'ghost'", "routes.a.default: unknown target 'nowhere'"],
        ),
        (
            {"a": {"type": "cascade", "stages": [{**STAGE, "fallbacks": ["capable"], "confidence_treshold": 1}],
                   "default": "capable"}},
            ["routes.a.stages[0].fallbacks: 'fallbacks' belongs on the route itself",
             "routes.a.stages[0].confidence_treshold: unknown key (did you mean 'confidence_threshold'?)"],
        ),
        (
            {"a": {"type": "cascade", "stages": [{"type": "nope"}], "default": "capable"}},
            ["routes.a.stages[0].type: unknown route type 'nope'"],
        ),
        (
            {"a": {"type": "cascade", "stages": [STAGE, 3], "default": "capable"}},
            ["routes.a.stages: stages[1] must be a route name or an inline router"],
        ),
        (
            {"a": {"type": "cascade", "stages": [], "default": "capable"}},
            ["routes.a.stages: List should have at least 1 item"],
        ),
    ],
)  # fmt: skip
def test_config_errors_name_the_yaml_path(routes: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        _load(routes)
    text = str(err.value)
    for piece in expected:
        assert piece in text, text


def test_eval_hooks_tiers_and_the_calibrated_stage_key() -> None:
    probe_like = {**CLASSIFIER}
    loaded = _load({"a": {"type": "cascade", "stages": [STAGE, probe_like], "default": "capable"}})
    spec = loaded.routes["a"]
    assert spec.tiers() == {"capable": "capable", "efficient": "efficient"}
    # the classifier is the only stage with a threshold: calibrate writes its base_threshold,
    # on the classifier's own scale (p_solve for the weak tier = 1 - score threshold)
    assert spec.threshold_key() == "stages[1].base_threshold"
    assert spec.threshold_for_score(0.3) == pytest.approx(0.7)
    other = _load({"a": {"type": "cascade", "stages": [STAGE, CLASSIFIER], "default": "judge"}}).routes["a"]
    assert other.tiers() is None  # the default is neither tier
    named = _load({"a": {"type": "cascade", "stages": ["c"], "default": "capable", "calibrate": 1}, "c": CLASSIFIER})
    assert named.routes["a"].threshold_key() is None  # calibrate the named route itself


def test_compose_example_validates_and_builds() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "compose.yaml"
    loaded = load_config(path, env={"ANTHROPIC_API_KEY": "x"})
    routes = build_routes(loaded, target_infos(loaded))
    assert {spec.type for spec in loaded.routes.values()} == {"cascade", "advisor"}
    assert loaded.routes["agent"].subagent_spec() is not None
    assert set(routes["agent"].targets) == {"capable", "efficient"}
