"""Calibrated P(success): good-enough labels, the isotonic/Platt fit, the versioned artifact, the
served route's record and the tolerance policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

from switchyard.eval.good_enough import GoodEnough, GoodEnoughError, parse_bars  # noqa: E402
from switchyard.eval.reliability import reliability  # noqa: E402
from switchyard.probe.calibration_fit import fit_calibration, fit_curve  # noqa: E402
from switchyard.probe.data import read_rows  # noqa: E402
from switchyard.routers.learned import calibration as calib  # noqa: E402
from switchyard.routers.learned import checkpoint as ckpt  # noqa: E402
from switchyard.routers.learned.policy import UtilityPolicy  # noqa: E402
from switchyard.testing import ScriptedCall  # noqa: E402
from tests.probe.test_router import TABLE, FakeExtractor, build, ctx, identity_probe, request  # noqa: E402


def test_good_enough_bars_by_outcome_type() -> None:
    rule = GoodEnough()
    # 0/1 correctness is kept whatever the type says
    assert rule.label(1.0, binary=True, outcome_type="gpt4_judge_score_1_to_10") == 1.0
    assert rule.label(0.0, binary=True, outcome_type=None) == 0.0
    # MT-Bench grades cut at 8, RouterDC fractions and AlpacaEval preferences at 0.5
    assert rule.label(8.0, binary=False, outcome_type="gpt4_judge_score_1_to_10") == 1.0
    assert rule.label(7.5, binary=False, outcome_type="gpt4_judge_score_1_to_10") == 0.0
    assert rule.label(0.6, binary=False, outcome_type="score_0_1") == 1.0
    assert rule.label(0.4, binary=False, outcome_type="score_0_1") == 0.0
    assert rule.label(0.5, binary=False, outcome_type="gpt4_turbo_judge_preference_0_1") == 1.0  # the reference
    assert rule.label(0.0259, binary=False, outcome_type="gpt4_turbo_judge_preference_0_1") == 0.0
    assert np.isnan(rule.label(float("nan"), binary=False, outcome_type="score_0_1"))
    with pytest.raises(GoodEnoughError, match="--good-enough stars_1_to_5=BAR"):
        rule.label(4.0, binary=False, outcome_type="stars_1_to_5")
    assert GoodEnough(parse_bars(["stars_1_to_5=4"])).label(4.0, binary=False, outcome_type="stars_1_to_5") == 1.0
    assert GoodEnough({"*": 3}).label(2.0, binary=False, outcome_type=None) == 0.0
    with pytest.raises(GoodEnoughError, match="OUTCOME_TYPE=NUMBER"):
        parse_bars(["mt=high"])


def test_rows_from_two_datasets_become_labels(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows_a = [
        {"id": "a1", "prompt": "x", "benchmark": "mmlu", "models": {"m": {"correct": True}, "g": {"correct": False}}},
        {"id": "a2", "prompt": "y", "benchmark": "mt", "outcome_type": "gpt4_judge_score_1_to_10",
         "models": {"m": {"score": 9}, "g": {"score": 7}}},
    ]  # fmt: skip
    rows_b = [
        {"id": "b1", "prompt": "z", "benchmark": "alpaca_eval", "outcome_type": "gpt4_turbo_judge_preference_0_1",
         "models": {"mixtral": {"score": 0.2}, "gpt4t": {"score": 0.5}}},
    ]  # fmt: skip
    a.write_text("".join(json.dumps(r) + "\n" for r in rows_a))
    b.write_text("".join(json.dumps(r) + "\n" for r in rows_b))
    mapping = {"efficient": ("m", "mixtral"), "capable": ("g", "gpt4t")}
    ra, _ = read_rows(a, mapping)
    rb, _ = read_rows(b, mapping)
    rows = ra.concat(rb)
    assert rows.ids == ["a1", "a2", "b1"] and rows.sources() == ["mmlu", "mt", "alpaca_eval"]
    # raw outcomes stay for scoring; labels: correct as is, 9 >= 8, 7 < 8, 0.2 < 0.5, 0.5 >= 0.5
    assert rows.quality["efficient"].tolist() == [1.0, 9.0, 0.2]
    assert rows.good(["efficient", "capable"], GoodEnough()).tolist() == [[1, 0], [1, 0], [0, 1]]


def _miscalibrated(n: int, seed: int) -> tuple[object, object]:
    rng = np.random.default_rng(seed)
    truth = rng.random(n)
    y = (rng.random(n) < truth).astype(float)
    return truth**3, y  # overconfident in failure: raw p far below the observed rate


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_fitting_on_held_out_rows_reduces_ece(method: str) -> None:
    p_fit, y_fit = _miscalibrated(4000, 0)
    p_new, y_new = _miscalibrated(4000, 1)
    curve = fit_curve(p_fit, y_fit, method)
    before = reliability(p_new.tolist(), y_new.tolist()).ece
    after = reliability([curve(float(p)) for p in p_new], y_new.tolist()).ece
    assert before > 0.15 and after < 0.05


def test_artifact_round_trips_and_is_versioned(tmp_path: Path, probe_dir: Path) -> None:
    p, y = _miscalibrated(2000, 0)
    both = np.stack([p, p], axis=1)
    labels = np.stack([y, y], axis=1)
    cal = fit_calibration(both, labels, ["efficient", "capable"], calib.weights_digest(probe_dir))
    path = calib.save(cal, probe_dir)
    loaded = calib.load(probe_dir, ["efficient", "capable"])
    assert loaded is not None and loaded.method == "isotonic" and loaded.tag.startswith("isotonic/v1/")
    assert loaded.apply(["efficient", "capable"], [0.3, 0.9]) == pytest.approx(
        cal.apply(["efficient", "capable"], [0.3, 0.9])
    )
    raw = json.loads(path.read_text())
    raw["format_version"] = 2
    path.write_text(json.dumps(raw))
    with pytest.raises(calib.CalibrationError, match="format_version 2, but this switchyard reads"):
        calib.load(probe_dir)
    raw["format_version"] = 1
    raw["checkpoint_sha256"] = "0" * 64
    path.write_text(json.dumps(raw))
    with pytest.raises(calib.CalibrationError, match="fitted for other weights"):
        calib.load(probe_dir)
    path.unlink()
    assert calib.load(probe_dir) is None


def _shifted(probe_dir: Path, efficient: tuple[list[float], list[float]]) -> None:
    """A calibration that maps the efficient head through ``efficient`` knots (capable unchanged)."""
    heads = {"efficient": calib.Curve("isotonic", x=tuple(efficient[0]), y=tuple(efficient[1]))}
    calib.save(calib.Calibration("isotonic", heads, calib.weights_digest(probe_dir)), probe_dir)


async def test_route_records_calibrated_p_success_and_keeps_the_raw_score(probe_dir: Path) -> None:
    _shifted(probe_dir, ([0.0, 1.0], [0.0, 0.5]))  # the efficient head halved
    router = build(probe_dir, FakeExtractor(TABLE), threshold=0.6)
    easy = await router.route(request("easy"), ctx(), ScriptedCall({}))
    assert easy.details["p_success"]["efficient"] == pytest.approx(0.45, abs=1e-5)
    assert easy.details["p_success_raw"]["efficient"] == pytest.approx(0.9, abs=1e-5)
    assert easy.details["calibration"].startswith("isotonic/v1/")
    assert easy.score == pytest.approx(0.5 * (1 + 0.92 - 0.9), abs=1e-5)  # from the raw head: unchanged
    plain = build(probe_dir, FakeExtractor(TABLE), threshold=0.6, calibration=False)
    assert "p_success_raw" not in (await plain.route(request("easy"), ctx(), ScriptedCall({}))).details


async def test_tolerance_policy_picks_the_cheapest_within_reach_of_the_best(probe_dir: Path) -> None:
    router = build(probe_dir, FakeExtractor(TABLE), tolerance=0.05)
    easy = await router.route(request("easy"), ctx(), ScriptedCall({}))  # 0.90 vs 0.92: within 0.05
    mid = await router.route(request("mid"), ctx(), ScriptedCall({}))  # 0.50 vs 0.75: not
    assert easy.candidates == ("efficient", "capable") and mid.candidates == ("capable", "efficient")
    assert "tolerance 0.05" in easy.reason
    # the calibrated P decides: halving the efficient head sends "easy" to capable
    _shifted(probe_dir, ([0.0, 1.0], [0.0, 0.5]))
    calibrated = build(probe_dir, FakeExtractor(TABLE), tolerance=0.05)
    assert (await calibrated.route(request("easy"), ctx(), ScriptedCall({}))).candidates[0] == "capable"
    three = UtilityPolicy(["a", "b", "c"], [1, 5, 20], tolerance=0.1)
    assert three.choose([0.70, 0.85, 0.9]).candidates == ("b", "c", "a")
    with pytest.raises(ValueError, match="tolerance"):
        build(probe_dir, FakeExtractor(TABLE), tolerance=0.05, threshold=0.5)


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    ckpt.save(identity_probe(["efficient", "capable"]), tmp_path / "probe")
    return tmp_path / "probe"
