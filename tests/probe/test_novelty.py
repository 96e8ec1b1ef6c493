"""Novelty: distance to the training rows, the bound set at training time, and what a route does
beyond it (abstain, or a safe tier), recorded in the decision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from probe.test_router import TABLE, FakeExtractor, build, ctx, identity_probe, request  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.routers.learned import novelty  # noqa: E402
from switchyard.routers.learned.checkpoint import CheckpointError  # noqa: E402
from switchyard.testing import ScriptedCall  # noqa: E402


def test_the_bound_fires_rarely_on_training_like_rows_and_often_off_them() -> None:
    rng = np.random.default_rng(0)
    train = rng.standard_normal((3000, 8))
    ref = novelty.fit(train, seed=0)
    assert ref.points.shape == (2400, 8) and ref.k == 10 and ref.percentile == 99.0
    same = ref.distance(rng.standard_normal((2000, 8)))
    shifted = ref.distance(rng.standard_normal((2000, 8)) + np.array([4.0] + [0.0] * 7))
    fired_same, fired_shifted = (same > ref.bound).mean(), (shifted > ref.bound).mean()
    assert 0.0 < fired_same < 0.03
    assert fired_shifted > 10 * fired_same and fired_shifted > 0.5


def test_small_training_sets_use_leave_one_out() -> None:
    z = np.random.default_rng(1).standard_normal((30, 3))
    ref = novelty.fit(z, k=3)
    assert ref.points.shape == (30, 3) and ref.bound > 0  # a row is not its own neighbour


def probe_with_novelty(bound: float) -> ckpt.Checkpoint:
    cp = identity_probe(["efficient", "capable"])
    # reference points around the "easy" prompt's projected features only
    easy = cp.project(np.array(TABLE["easy"], np.float32))
    cp.novelty = novelty.Novelty(np.repeat(easy, 3, axis=0).astype(np.float32), k=2, bound=bound)
    return cp


def test_checkpoints_keep_the_reference_and_old_ones_still_load(tmp_path: Path) -> None:
    ckpt.save(probe_with_novelty(0.5), tmp_path / "new")
    back = ckpt.load(tmp_path / "new")
    assert back.novelty is not None and back.novelty.bound == 0.5 and back.novelty.points.shape == (3, 2)
    meta = json.loads((tmp_path / "new" / "router.json").read_text())
    assert meta["novelty"]["k"] == 2 and meta["novelty"]["n"] == 3
    ckpt.save(identity_probe(["efficient", "capable"]), tmp_path / "old")
    assert "novelty" not in json.loads((tmp_path / "old" / "router.json").read_text())
    assert ckpt.load(tmp_path / "old").novelty is None
    meta["novelty"]["bound"] = "far"
    (tmp_path / "new" / "router.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"novelty\.bound"):
        ckpt.load(tmp_path / "new")


@pytest.mark.parametrize(
    ("action", "first", "abstained"),
    [("abstain", "capable", True), ("capable", "capable", False), ("efficient", "efficient", False)],
)
async def test_beyond_the_bound_the_route_abstains_or_serves_the_safe_tier(
    tmp_path: Path, action: str, first: str, abstained: bool
) -> None:
    ckpt.save(probe_with_novelty(0.5), tmp_path / "cp")
    router = build(tmp_path / "cp", FakeExtractor(TABLE), threshold=0.6, novelty={"action": action})
    near = await router.route(request("easy"), ctx(), ScriptedCall({}))
    assert near.candidates[0] == "efficient" and not near.abstained
    assert near.details["novelty"] == {"distance": 0.0, "bound": 0.5, "novel": False}
    # "hard" lies far from every reference point; by score alone it would go capable
    far = await router.route(request("hard"), ctx(), ScriptedCall({}))
    assert far.candidates[0] == first and far.abstained is abstained
    assert far.details["novelty"]["novel"] and far.details["novelty"]["action"] == action
    assert "novel: distance" in far.reason
    again = await router.route(request("hard"), ctx(), ScriptedCall({}))  # the cache keeps the distance
    assert again.details["cached"] and again.details["novelty"] == far.details["novelty"]


async def test_without_a_novelty_block_the_distance_is_only_recorded(tmp_path: Path) -> None:
    ckpt.save(probe_with_novelty(0.5), tmp_path / "cp")
    router = build(tmp_path / "cp", FakeExtractor(TABLE), threshold=0.6)
    far = await router.route(request("hard"), ctx(), ScriptedCall({}))
    assert far.details["novelty"]["novel"] and "action" not in far.details["novelty"]
    assert far.candidates[0] == "capable" and not far.abstained


def test_a_novelty_block_needs_a_checkpoint_with_a_reference(tmp_path: Path) -> None:
    ckpt.save(identity_probe(["efficient", "capable"]), tmp_path / "old")
    with pytest.raises(CheckpointError, match=r"novelty: checkpoint .* has no novelty reference"):
        build(tmp_path / "old", FakeExtractor(TABLE), novelty={"action": "capable"})
    with pytest.raises(ValueError, match="action"):
        build(tmp_path / "old", FakeExtractor(TABLE), novelty={"action": "maybe"})
