"""The learned routers' decision path: λ-utility, score, threshold, caching, falling open, config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from switchyard.config.build import build_routes, target_infos  # noqa: E402
from switchyard.config.load import ConfigError, load_config  # noqa: E402
from switchyard.protocol.features import FeatureError, FeatureRecipe  # noqa: E402
from switchyard.protocol.request import ChatRequest  # noqa: E402
from switchyard.protocol.session import SessionInfo  # noqa: E402
from switchyard.routers.base import BuildContext, RouteContext  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.routers.learned.checkpoint import Checkpoint, Member  # noqa: E402
from switchyard.routers.learned.policy import UtilityPolicy  # noqa: E402
from switchyard.routers.learned.probe import PrefillProbeSpec  # noqa: E402
from switchyard.state.memory import MemoryStore  # noqa: E402
from switchyard.testing import ScriptedCall  # noqa: E402

RECIPE = FeatureRecipe(source="fake", model="toy", layers=(0,), pooling=("mean",), hidden_size=2)


class FakeExtractor:
    """Features are given per text; ``fail`` makes the next calls raise."""

    def __init__(self, table: dict[str, list[float]], recipe: FeatureRecipe = RECIPE) -> None:
        self.table = table
        self.calls: list[list[str]] = []
        self.fail: Exception | None = None
        self._recipe = recipe
        self.closed = False

    @property
    def recipe(self) -> FeatureRecipe:
        return self._recipe

    async def extract(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        if self.fail is not None:
            raise self.fail
        return np.array([self.table[t] for t in texts], dtype=np.float32)

    async def aclose(self) -> None:
        self.closed = True


def identity_probe(names: list[str]) -> Checkpoint:
    """A probe whose logits are the two features: P(names[i]) = sigmoid(x_i)."""
    eye = np.eye(2, dtype=np.float32)
    transform = ckpt.Transform(np.zeros(2, np.float32), np.ones(2, np.float32), np.zeros(2, np.float32), eye)
    member = Member(hidden=[], output=(eye, np.zeros(2, np.float32)))
    return Checkpoint(kind="prefill_probe", output_names=names, recipe=RECIPE, transform=transform, members=[member])


def logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


TABLE = {
    "easy": [logit(0.9), logit(0.92)],  # both succeed: efficient wins on cost
    "hard": [logit(0.1), logit(0.9)],  # only capable succeeds
    "mid": [logit(0.5), logit(0.75)],
}


def ctx() -> RouteContext:
    return RouteContext(route="r", session=SessionInfo(), targets={}, store=MemoryStore())


def request(text: str) -> ChatRequest:
    return ChatRequest.model_validate(
        {"model": "r", "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    )


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    ckpt.save(identity_probe(["efficient", "capable"]), tmp_path / "probe")
    return tmp_path / "probe"


def build(probe_dir: Path, extractor: FakeExtractor, **keys: Any) -> Any:
    spec = PrefillProbeSpec.model_validate(
        {
            "type": "prefill_probe",
            "targets": ["efficient", "capable"],
            "checkpoint": str(probe_dir),
            "features": {"backend": "embeddings", "base_url": "http://127.0.0.1:9/v1", "model": "toy"},
            "costs": {"efficient": 1, "capable": 20},
            **keys,
        }
    )
    return spec.build(BuildContext(route="r", targets={}, features=lambda cfg, d: extractor))


async def test_lambda_utility_decisions_and_score(probe_dir: Path) -> None:
    router = build(probe_dir, FakeExtractor(TABLE), **{"lambda": 0.75})
    easy = await router.route(request("easy"), ctx(), ScriptedCall({}))
    hard = await router.route(request("hard"), ctx(), ScriptedCall({}))
    assert easy.candidates == ("efficient", "capable") and easy.source == "probe"
    assert hard.candidates == ("capable", "efficient")
    assert easy.score == pytest.approx(0.5 * (1 + 0.92 - 0.9), abs=1e-5)
    assert hard.score == pytest.approx(0.9, abs=1e-5)
    assert hard.details["p_success"] == pytest.approx({"efficient": 0.1, "capable": 0.9}, abs=1e-5)
    assert hard.details["utility"]["capable"] == pytest.approx(0.75 * 0.9 - 0.25, abs=1e-5)
    # λ rule == score > 1/(2λ): mid has score 0.625 < 0.667 -> efficient at λ=0.75, capable at λ=0.9
    mid = await router.route(request("mid"), ctx(), ScriptedCall({}))
    assert mid.candidates[0] == "efficient"
    eager = build(probe_dir, FakeExtractor(TABLE), **{"lambda": 0.9})
    assert (await eager.route(request("mid"), ctx(), ScriptedCall({}))).candidates[0] == "capable"


async def test_threshold_mode_follows_the_score(probe_dir: Path) -> None:
    router = build(probe_dir, FakeExtractor(TABLE), threshold=0.6)
    assert (await router.route(request("mid"), ctx(), ScriptedCall({}))).candidates[0] == "capable"
    assert (await router.route(request("easy"), ctx(), ScriptedCall({}))).candidates[0] == "efficient"


async def test_decisions_are_cached_per_task_text_failures_are_not(probe_dir: Path) -> None:
    extractor = FakeExtractor(TABLE)
    router = build(probe_dir, extractor, cache_size=1)
    first = await router.route(request("hard"), ctx(), ScriptedCall({}))
    again = await router.route(request("hard"), ctx(), ScriptedCall({}))
    assert len(extractor.calls) == 1 and again.details["cached"] and not first.details["cached"]
    assert again.candidates == first.candidates and again.score == first.score
    await router.route(request("easy"), ctx(), ScriptedCall({}))  # evicts "hard" (capacity 1)
    await router.route(request("hard"), ctx(), ScriptedCall({}))
    assert len(extractor.calls) == 3
    extractor.fail = FeatureError("vLLM down", reason="connect")
    down = await router.route(request("mid"), ctx(), ScriptedCall({}))
    assert down.source == "fail_open" and down.candidates == ("capable", "efficient")
    assert down.details == {"error": "connect"} and down.score is None
    extractor.fail = None
    up = await router.route(request("mid"), ctx(), ScriptedCall({}))
    assert up.source == "probe" and len(extractor.calls) == 5


async def test_input_views(probe_dir: Path) -> None:
    extractor = FakeExtractor(TABLE)
    router = build(probe_dir, extractor, input="first_user")
    convo = ChatRequest.model_validate(
        {
            "model": "r",
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
                {"role": "user", "content": [{"type": "text", "text": "hard"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": [{"type": "text", "text": "easy"}]},
            ],
        }
    )
    assert (await router.route(convo, ctx(), ScriptedCall({}))).candidates[0] == "capable"
    assert extractor.calls == [["hard"]]
    last = build(probe_dir, FakeExtractor(TABLE), input="last_user")
    assert (await last.route(convo, ctx(), ScriptedCall({}))).candidates[0] == "efficient"
    # the default reads the newest turns after a digest of the system prompt
    text = "system (8 chars): be brief\nuser: hard\nassistant: ok\nuser: easy"
    seen = FakeExtractor({**TABLE, text: TABLE["mid"]})
    default = build(probe_dir, seen)
    assert (await default.route(convo, ctx(), ScriptedCall({}))).source == "probe"
    assert seen.calls == [[text]]
    two = FakeExtractor({**TABLE, "user: easy": TABLE["mid"]})
    await build(probe_dir, two, turns=1).route(convo, ctx(), ScriptedCall({}))
    assert two.calls == [["system (8 chars): be brief\nuser: easy"]]
    # a lone user message reads as itself, so single-prompt data is the same under every view
    lone = FakeExtractor(TABLE)
    await build(probe_dir, lone).route(request("hard"), ctx(), ScriptedCall({}))
    assert lone.calls == [["hard"]]


async def test_bad_features_at_runtime_fail_open(probe_dir: Path) -> None:
    router = build(probe_dir, FakeExtractor({"x": [1.0, 2.0, 3.0]}))
    decision = await router.route(request("x"), ctx(), ScriptedCall({}))
    assert decision.source == "fail_open" and decision.candidates[0] == "capable"
    empty = await router.route(request("   "), ctx(), ScriptedCall({}))
    assert empty.source == "fail_open" and empty.details == {"error": "no_text"}


def test_recipe_mismatch_and_missing_head_fail_at_build(probe_dir: Path) -> None:
    other = FakeExtractor(TABLE, FeatureRecipe(source="fake", model="other", layers=(0,), pooling=("mean",)))
    with pytest.raises(ValueError, match="model: trained on 'toy', served by 'other'"):
        build(probe_dir, other)
    with pytest.raises(ValueError, match="no head 'strong'"):
        build(probe_dir, FakeExtractor(TABLE), heads={"capable": "strong"})


def test_policy_n_way_orders_by_utility() -> None:
    policy = UtilityPolicy(["small", "medium", "large"], [1, 5, 21], lam=0.8)
    assert policy.normcost == (0.0, 0.2, 1.0)
    choice = policy.choose([0.2, 0.7, 0.95])
    # utilities: small .16, medium .56-.04=.52, large .76-.2=.56
    assert choice.candidates == ("large", "medium", "small")
    assert policy.fail_open() == ("large", "small", "medium")
    assert choice.score == pytest.approx(0.5 * (1 + 0.95 - 0.2))
    assert UtilityPolicy(["a", "b"], [3, 3], lam=0.5).choose([0.4, 0.4]).candidates == ("a", "b")


def test_config_errors_name_the_yaml_path(tmp_path: Path, probe_dir: Path) -> None:
    cfg = tmp_path / "router.yaml"
    cfg.write_text(
        f"""
llm_clients:
  local: {{base_url: http://127.0.0.1:9/v1}}
targets:
  efficient: {{client: local, model: e}}
  capable: {{client: local, model: c}}
  other: {{client: local, model: o}}
routes:
  probe:
    type: prefill_probe
    targets: [efficient, capable, other]
    checkpoint: {probe_dir}
    threshold: 0.5
    features: {{backend: vllm_hidden_states, base_url: http://127.0.0.1:9/v1, model: m,
               hidden_states_dir: /tmp, layers: [1, 1], pooling: [median]}}
"""
    )
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    text = str(info.value)
    assert "routes.probe.features.vllm_hidden_states.layers: layer ids must be unique" in text
    assert "routes.probe.features.vllm_hidden_states.pooling[0]" in text
    fixed = cfg.read_text().replace("layers: [1, 1], pooling: [median]", "layers: [1, 2]")
    cfg.write_text(fixed)
    with pytest.raises(ConfigError, match=r"routes\.probe: 'threshold' needs exactly two targets"):
        load_config(cfg)


def test_built_through_config_with_a_real_extractor(tmp_path: Path, probe_dir: Path) -> None:
    loaded = load_config(
        {
            "llm_clients": {"local": {"base_url": "http://127.0.0.1:9/v1"}},
            "targets": {
                "efficient": {"client": "local", "model": "e", "price": {"input_per_mtok": 0.1}},
                "capable": {"client": "local", "model": "c", "price": {"input_per_mtok": 15}},
            },
            "routes": {
                "p": {
                    "type": "prefill_probe",
                    "targets": ["efficient", "capable"],
                    "checkpoint": str(probe_dir),
                    "features": {"backend": "embeddings", "base_url": "http://127.0.0.1:9/v1", "model": "toy"},
                }
            },
        }
    )
    with pytest.raises(ConfigError, match=r"routes\.p: features do not match"):
        build_routes(loaded, target_infos(loaded))
    spec = loaded.routes["p"]
    assert spec.tiers() is None and spec.threshold_key() == "threshold"
    assert PrefillProbeSpec.model_validate({**spec.model_dump(by_alias=True), "capable": "capable"}).tiers() == {
        "capable": "capable",
        "efficient": "efficient",
    }


def test_probe_examples_validate() -> None:
    import yaml

    from switchyard.features import parse_features

    root = Path(__file__).resolve().parents[2] / "examples" / "probe"
    loaded = load_config(root / "router.yaml", env={})
    agent = loaded.routes["agent"]
    assert agent.input == "conversation"  # type: ignore[attr-defined]
    # live control by default, warm-started from train-probe's 30 % operating point
    threshold = agent.threshold  # type: ignore[attr-defined]
    assert threshold.target_capable_share == 0.3 and threshold.start == pytest.approx(0.579)
    for name in ("smollm2-features.yaml", "minilm-features.yaml"):
        block = parse_features(yaml.safe_load((root / name).read_text()))
        assert block.truncation == "tail"  # type: ignore[union-attr]
    smol = parse_features(yaml.safe_load((root / "smollm2-features.yaml").read_text()))
    assert smol.model_dump() == agent.features.model_dump()  # type: ignore[attr-defined]


async def test_abstain_band_around_the_threshold_and_the_lambda_boundary(probe_dir: Path) -> None:
    # scores: easy 0.51, mid 0.625, hard 0.9; threshold 0.6 with band 0.05 -> only mid is too close
    router = build(probe_dir, FakeExtractor(TABLE), threshold=0.6, abstain_band=0.05)
    mid = await router.route(request("mid"), ctx(), ScriptedCall({}))
    assert mid.abstained and mid.candidates[0] == "capable"  # standalone it still serves its choice
    assert mid.details["margin"] == pytest.approx(0.025, abs=1e-5) and "abstains" in mid.reason
    for text in ("easy", "hard"):
        assert not (await router.route(request(text), ctx(), ScriptedCall({}))).abstained
    # λ mode: the boundary is 1/(2λ) = 0.667 at λ=0.75; mid (0.625) is 0.042 away
    lam = build(probe_dir, FakeExtractor(TABLE), **{"lambda": 0.75, "abstain_band": 0.05})
    assert (await lam.route(request("mid"), ctx(), ScriptedCall({}))).abstained
    never = build(probe_dir, FakeExtractor(TABLE), threshold=0.625)
    assert not (await never.route(request("mid"), ctx(), ScriptedCall({}))).abstained  # band 0: never abstains
    failing = FakeExtractor(TABLE)
    failing.fail = FeatureError("down")
    broken = build(probe_dir, failing, threshold=0.6)
    assert (await broken.route(request("easy"), ctx(), ScriptedCall({}))).abstained  # fail-open is no verdict
