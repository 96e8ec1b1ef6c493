"""``passthrough`` and ``random``: candidates, weights, seeds and the spec's validation."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.session import SessionInfo
from switchyard.protocol.targets import TargetInfo
from switchyard.routers.base import BuildContext, Decision, RouteContext, Router
from switchyard.routers.registry import router_types, spec_for
from switchyard.routers.static import PassthroughSpec, RandomRouter, RandomSpec
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

TARGETS = {n: TargetInfo(name=n, model=f"model-{n}") for n in ("a", "b", "c")}
REQUEST = ChatRequest(model="r", messages=[Message.of("user", "hello")])


def ctx() -> RouteContext:
    return RouteContext(route="r", session=SessionInfo(), targets=TARGETS, store=MemoryStore())


def build(spec: PassthroughSpec | RandomSpec) -> Router:
    return spec.build(BuildContext(route="r", targets=TARGETS))


async def decide(router: Router, call: ScriptedCall | None = None) -> Decision:
    return await router.route(REQUEST, ctx(), call or ScriptedCall({}))


async def test_passthrough_always_its_target_and_no_model_calls() -> None:
    call = ScriptedCall({})
    router = build(PassthroughSpec(type="passthrough", target="b"))
    for _ in range(3):
        decision = await decide(router, call)
        assert decision.candidates == ("b",)
        assert decision.source == "passthrough"
        assert decision.response is None and decision.request is None
    assert call.calls == []


async def test_a_passthrough_decides_without_a_context_unless_a_subclass_routes_itself() -> None:
    from switchyard.routers.static import PassthroughRouter

    router = PassthroughRouter("b")
    assert router.fixed() == await decide(router)
    assert router.fixed() is not router.fixed()  # a fresh decision per request: nothing shared to mutate

    class Sticky(PassthroughRouter):
        async def route(self, request: ChatRequest, ctx: RouteContext, call: object) -> Decision:
            return Decision(candidates=("a",), source="sticky")

    assert Sticky("b").fixed() is None  # the engine calls its route() with a full context


async def test_the_engine_builds_no_context_for_a_fixed_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchyard.config.build import build_engine
    from switchyard.config.load import load_config
    from switchyard.engine import decide

    config = {
        "llm_clients": {"up": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
        "targets": {"a": {"client": "up", "model": "m-a"}, "b": {"client": "up", "model": "m-b"}},
        "routes": {"solo": {"type": "passthrough", "target": "b", "fallbacks": ["a"]}},
    }
    engine = build_engine(load_config(config, env={}), env={})
    built: list[object] = []
    monkeypatch.setattr(decide, "RouteContext", lambda *a, **k: built.append(a))
    record = await engine.decide(REQUEST.model_copy(update={"model": "solo"}), {"x-switchyard-session-id": "s1"})
    assert (record.selected, record.source, record.reason) == ("b", "passthrough", "single target")
    assert record.candidates == ["b", "a"] and built == []
    await engine.aclose()


async def test_random_candidate_order_is_choice_then_others_in_config_order() -> None:
    router = build(RandomSpec(type="random", targets=["a", "b", "c"], seed=1))
    seen: set[str] = set()
    for _ in range(60):
        decision = await decide(router)
        chosen = decision.candidates[0]
        seen.add(chosen)
        assert decision.candidates == (chosen, *[t for t in ("a", "b", "c") if t != chosen])
        assert decision.source == "random"
    assert seen == {"a", "b", "c"}


async def test_random_seed_reproduces_the_sequence() -> None:
    spec = RandomSpec(type="random", targets=["a", "b", "c"], weights=[1, 2, 3], seed=7)
    one, two = build(spec), build(spec)
    seq_one = [(await decide(one)).candidates[0] for _ in range(50)]
    seq_two = [(await decide(two)).candidates[0] for _ in range(50)]
    assert seq_one == seq_two
    other = build(RandomSpec(type="random", targets=["a", "b", "c"], weights=[1, 2, 3], seed=8))
    assert [(await decide(other)).candidates[0] for _ in range(50)] != seq_one


def test_random_weights_are_respected() -> None:
    # 6000 seeded draws with weights 1:2:3; the bounds are ~6 standard deviations wide, and the
    # seed makes the test deterministic anyway.
    router = RandomRouter(["a", "b", "c"], [1.0, 2.0, 3.0], seed=123)
    counts = Counter(router.pick() for _ in range(6000))
    assert 800 <= counts["a"] <= 1200
    assert 1750 <= counts["b"] <= 2250
    assert 2700 <= counts["c"] <= 3300


async def test_weight_zero_is_never_first_but_still_a_fallback() -> None:
    router = build(RandomSpec(type="random", targets=["a", "b", "c"], weights=[0, 1, 1], seed=3))
    for _ in range(300):
        decision = await decide(router)
        assert decision.candidates[0] != "a"
        assert "a" in decision.candidates[1:]


async def test_default_weights_are_equal() -> None:
    router = build(RandomSpec(type="random", targets=["a", "b"], seed=5))
    counts = Counter([(await decide(router)).candidates[0] for _ in range(2000)])
    assert 850 <= counts["a"] <= 1150


def test_spec_target_refs_name_yaml_sub_paths() -> None:
    assert PassthroughSpec(type="passthrough", target="a").target_refs() == [("target", "a")]
    spec = RandomSpec(type="random", targets=["a", "b"], fallbacks=["c"])
    assert spec.target_refs() == [("targets[0]", "a"), ("targets[1]", "b")]
    assert spec.auxiliary_refs() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"targets": []}, "at least 1 item"),
        ({"targets": ["a", "a"]}, "targets must be unique"),
        ({"targets": ["a", "b"], "weights": [1]}, "has 1 entries but targets has 2"),
        ({"targets": ["a", "b"], "weights": [1, -1]}, "finite and >= 0"),
        ({"targets": ["a", "b"], "weights": [1, float("inf")]}, "finite and >= 0"),
        ({"targets": ["a", "b"], "weights": [1, float("nan")]}, "finite and >= 0"),
        ({"targets": ["a", "b"], "weights": [0, 0]}, "at least one weight must be > 0"),
        ({"targets": ["a"], "seed": "x"}, "valid integer"),
        ({"targets": ["a"], "temperature": 1}, "Extra inputs are not permitted"),
    ],
)
def test_random_spec_rejects_bad_config(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as err:
        RandomSpec.model_validate({"type": "random", **kwargs})
    assert message in str(err.value)


def test_registry_knows_both_and_rejects_others() -> None:
    assert {"passthrough", "random"} <= set(router_types())
    assert spec_for("passthrough") is PassthroughSpec
    assert spec_for("random") is RandomSpec
    with pytest.raises(KeyError, match="known types"):
        spec_for("no-such-router")
