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
