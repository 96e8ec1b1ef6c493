"""A ``prefill_probe`` route with ``threshold: {target_capable_share: ...}``: the threshold each
decision used and the controller's state are in the decision, and the route-wide store is shared."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from probe.test_router import FakeExtractor, build, identity_probe, logit, request  # noqa: E402
from switchyard.protocol.session import SessionInfo  # noqa: E402
from switchyard.routers.base import RouteContext  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.routers.learned.sync import KEY  # noqa: E402
from switchyard.state.memory import MemoryStore  # noqa: E402
from switchyard.testing import ScriptedCall  # noqa: E402

CONTROL = {"target_capable_share": 0.3, "warmup": 4, "window": 16, "feedback_window": 16, "sync_every": 5}


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    cp = identity_probe(["efficient", "capable"])
    cp.meta["training"] = {"operating_points": [{"target_share": 0.3, "threshold": 0.61}]}
    ckpt.save(cp, tmp_path / "probe")
    return tmp_path / "probe"


def table(n: int, seed: int = 0) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {f"t{i}": [logit(0.5), logit(rng.uniform(0.55, 0.95))] for i in range(n)}  # scores 0.525..0.725


async def test_each_decision_records_the_threshold_it_used_and_the_controller_state(probe_dir: Path) -> None:
    texts = table(60)
    router = build(probe_dir, FakeExtractor(texts), threshold=CONTROL)
    shared = MemoryStore()
    ctx = RouteContext(route="r", session=SessionInfo(), targets={}, store=MemoryStore(), shared=shared)
    used = []
    for n, text in enumerate(texts):
        expected = router.control_state()["threshold"]
        decision = await router.route(request(text), ctx, ScriptedCall({}))
        assert decision.details["threshold"] == pytest.approx(expected)
        assert (decision.candidates[0] == "capable") == (decision.score >= decision.details["threshold"])
        assert decision.details["control"]["seen"] == n + 1 and "(controlled)" in decision.reason
        used.append(decision.details["threshold"])
    assert used[0] == pytest.approx(0.61)  # warm start: the checkpoint's calibrated threshold for 30 %
    assert len(set(used)) > 5  # it moved with the scores
    state = router.control_state()
    assert state["mode"] == "share" and state["syncs"] == 12 and state["pending"] == 0
    value: Any = await shared.get(KEY)
    assert value["seen"] == 60  # five decisions per write
    # a cached decision is booked too (the same text scores the same, the threshold may differ)
    again = await router.route(request("t0"), ctx, ScriptedCall({}))
    assert again.details["cached"] and again.details["control"]["seen"] == 61


async def test_a_fixed_threshold_keeps_its_record_shape(probe_dir: Path) -> None:
    router = build(probe_dir, FakeExtractor(table(3)), threshold=0.6)
    decision = await router.route(request("t1"), RouteContext("r", SessionInfo(), {}, MemoryStore()), ScriptedCall({}))
    assert "threshold" not in decision.details and "control" not in decision.details
    assert router.control_state() is None


def test_the_spec_rejects_a_bad_block_naming_the_key(probe_dir: Path) -> None:
    with pytest.raises(ValueError, match="target_capable_share"):
        build(probe_dir, FakeExtractor({}), threshold={"target_capable_share": 2})
    with pytest.raises(ValueError, match="a number in \\[0, 1\\] or a block"):
        build(probe_dir, FakeExtractor({}), threshold="high")


async def test_eval_replays_a_controlled_route_in_dataset_order(tmp_path: Path) -> None:
    import json

    from switchyard.config.load import load_config
    from switchyard.eval.dataset import Dataset
    from switchyard.eval.evaluate import run_eval
    from switchyard.protocol.features import FeatureRecipe
    from switchyard.testing import serve_fake
    from switchyard.testing.fake_features import FakeFeatureServer

    dim = 16
    comps = (np.random.default_rng(0).standard_normal((2, dim)) * 3.0).astype(np.float32)
    transform = ckpt.Transform(np.zeros(dim, np.float32), np.ones(dim, np.float32), np.zeros(dim, np.float32), comps)
    member = ckpt.Member(hidden=[], output=(np.eye(2, dtype=np.float32), np.zeros(2, np.float32)))
    recipe = FeatureRecipe(source="embeddings", model="toy-emb", hidden_size=dim)
    ckpt.save(ckpt.Checkpoint("prefill_probe", ["efficient", "capable"], recipe, transform, [member]), tmp_path / "cp")
    rng = random.Random(1)
    data = tmp_path / "items.jsonl"
    with data.open("w") as fh:
        for i in range(40):
            prompt = " ".join(f"w{rng.randrange(100)}" for _ in range(5))
            models = {"small": {"correct": rng.random() < 0.5}, "big": {"correct": rng.random() < 0.8}}
            fh.write(json.dumps({"id": f"i{i}", "benchmark": "toy", "prompt": prompt, "models": models}) + "\n")
    app = FakeFeatureServer(hidden_states_dir=tmp_path / "hs", embedding_dim=dim)
    server = serve_fake(app)
    try:
        features = {"backend": "embeddings", "base_url": f"http://127.0.0.1:{server.port}/v1", "model": "toy-emb"}
        config = {
            "llm_clients": {"local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
            "targets": {
                "efficient": {"client": "local", "model": "small", "price": {"input_per_mtok": 1}},
                "capable": {"client": "local", "model": "big", "price": {"input_per_mtok": 9}},
            },
            "routes": {
                "learned": {
                    "type": "prefill_probe",
                    "targets": ["efficient", "capable"],
                    "capable": "capable",
                    "checkpoint": str(tmp_path / "cp"),
                    "features": features,
                    "threshold": {"target_capable_share": 0.3, "warmup": 4, "window": 8},
                }
            },
        }
        order: list[str] = []
        result = await run_eval(
            load_config(config),
            "learned",
            Dataset(data),
            mapping={"efficient": "small", "capable": "big"},
            concurrency=8,
            progress=False,
            on_item=lambda item: order.append(item.id),
        )
    finally:
        server.stop()
    assert order == [f"i{i}" for i in range(40)]
    # every item's text was extracted in one batched request ahead of the decisions
    assert [len(r["input"]) for r in app.requests if "input" in r] == [40]
    assert any("controls its threshold online" in note for note in result.notes)
    assert result.row.n == 40
    # the route's P(success) per target against the recorded outcomes: ECE and the bins, next to APGR
    from switchyard.eval.report import render

    assert result.calibration is not None and result.calibration.n == 80
    text = render(result)
    assert f"ECE {result.calibration.ece:.3f}" in text and "P(success) bin" in text
    assert result.to_dict()["ece"] == result.calibration.ece


async def test_prefetch_extracts_in_batches_and_each_decision_uses_it_once(probe_dir: Path) -> None:
    texts = table(5)
    extractor = FakeExtractor(texts)
    router = build(probe_dir, extractor, threshold=0.6)
    assert await router.prefetch([*texts, "t0", "  "], batch_size=3) == 5
    assert extractor.calls == [["t0", "t1", "t2"], ["t3", "t4"]]
    ctx = RouteContext(route="r", session=SessionInfo(), targets={}, store=MemoryStore())
    first = await router.route(request("t1"), ctx, ScriptedCall({}))
    assert not first.details["cached"] and first.details["feature_ms"] >= 0 and len(extractor.calls) == 2
    again = await router.route(request("t1"), ctx, ScriptedCall({}))
    assert again.details["cached"] and again.score == first.score
    extractor.fail = RuntimeError("down")
    assert await router.prefetch(["t9"]) == 0  # a failed batch is left to the decisions
