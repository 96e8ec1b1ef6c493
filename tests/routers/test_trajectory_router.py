"""The trajectory router on scripted sessions: turn 0 from the task text, switching when the gain
reaches the threshold, the latch, the switch price, live control, and its checkpoint."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from routers._routing_helpers import assistant_call, context, request, tool_result, user

from switchyard.protocol.targets import Price, TargetInfo
from switchyard.routers.base import BuildContext
from switchyard.routers.registry import spec_for
from switchyard.routers.trajectory.features import DENSE, Tally, advance, read_task, vector
from switchyard.routers.trajectory.model import (
    BUILTIN,
    Head,
    TrajectoryCheckpointError,
    TrajectoryModel,
    from_dict,
    load,
)
from switchyard.routers.trajectory.router import Prices, TrajectoryConfig, TrajectoryRouter, switch_price
from switchyard.state.memory import MemoryStore
from switchyard.testing import ScriptedCall

DIMS = 1024
WIDTH = len(DENSE) + DIMS
NEVER = Head(-30.0, (0.0,) * WIDTH)  # the loss head: P(reverse) ~ 0


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def model_with(weights: dict[int, float], bias: float) -> TrajectoryModel:
    w = [0.0] * WIDTH
    for i, v in weights.items():
        w[i] = v
    return TrajectoryModel(DIMS, ((Head(bias, tuple(w)), NEVER),), {})


def error_model() -> TrajectoryModel:
    """Gain 0.1 on a clean run; every failed tool result raises the logit (log_errors = log1p(n)/2)."""
    return model_with({DENSE.index("log_errors"): 8.0}, logit(0.1))


def router(model: TrajectoryModel, **kw: object) -> TrajectoryRouter:
    config = TrajectoryConfig(capable="strong", efficient="weak", **kw)  # type: ignore[arg-type]
    return TrajectoryRouter(config, model)


def session(n_errors: int, n_ok: int = 0) -> list:
    msgs: list = [user("Pay the bill in bill.txt")]
    for i in range(n_ok):
        msgs += [assistant_call(f"ok{i}", "read_file", f'{{"n": {i}}}'), tool_result(f"ok{i}", "amount: 98.70")]
    for i in range(n_errors):
        msgs += [
            assistant_call(f"e{i}", "send_money", f'{{"try": {i}}}'),
            tool_result(f"e{i}", "ValueError: no such IBAN"),
        ]
    return msgs


async def test_turn_zero_decides_from_the_task_text_alone() -> None:
    hard = read_task("Reconcile every transaction of March and refund the duplicates", DIMS).grams
    assert not set(hard) & set(read_task("hi", DIMS).grams)
    weights = {len(DENSE) + g: 40.0 for g in hard}
    r = router(model_with(weights, logit(0.05)), threshold=0.3)
    hard_first = await r.route(
        request(user("Reconcile every transaction of March and refund the duplicates")), context(), ScriptedCall({})
    )
    easy_first = await r.route(request(user("hi")), context(session="s2"), ScriptedCall({}))
    assert hard_first.candidates == ("strong", "weak") and hard_first.source == "trajectory"
    assert hard_first.details["turn"] == 0 and hard_first.details["gain"] > 0.3
    assert easy_first.candidates == ("weak", "strong") and easy_first.details["gain"] < 0.3


async def test_switches_at_the_first_turn_whose_gain_reaches_the_threshold_then_latches() -> None:
    r = router(error_model(), threshold=0.6)
    store = MemoryStore()
    tiers = []
    for n in range(4):
        d = await r.route(request(*session(n)), context(store), ScriptedCall({}))
        tiers.append((d.candidates[0], d.source))
        low, high = d.details.get("gain_interval", [0, 0])
        assert low <= d.details.get("gain", 0) <= high
    # 0 errors: 0.10; 1: sigmoid(logit(.1) + 8·log(2)/2) ≈ 0.70 — the second turn switches
    assert tiers == [("weak", "trajectory"), ("strong", "trajectory"), ("strong", "latched"), ("strong", "latched")]
    # the latch holds on a clean turn too
    clean = await r.route(request(user("Pay the bill in bill.txt")), context(store), ScriptedCall({}))
    assert clean.source == "latched" and clean.candidates[0] == "strong"


async def test_without_the_latch_a_clean_turn_goes_back() -> None:
    r = router(error_model(), threshold=0.6, latch=False)
    store = MemoryStore()
    assert (await r.route(request(*session(1)), context(store), ScriptedCall({}))).candidates[0] == "strong"
    assert (await r.route(request(user("another task")), context(store), ScriptedCall({}))).candidates[0] == "weak"


def test_the_tally_continues_where_the_session_left_off() -> None:
    msgs = session(3, 2)
    whole = advance(None, msgs, DIMS)
    stepwise: Tally | None = None
    for i in range(1, len(msgs) + 1):
        stepwise = advance(stepwise, msgs[:i], DIMS)
    assert stepwise == whole
    assert whole.turns == 5 and whole.errors == 3 and whole.streak == 3 and whole.calls == 5
    assert vector(whole, DIMS) == vector(stepwise, DIMS)


async def test_the_router_reads_only_the_new_messages_of_a_session() -> None:
    r = router(error_model(), threshold=0.99)
    store = MemoryStore()
    await r.route(request(*session(2)), context(store), ScriptedCall({}))
    longer = request(*session(2), assistant_call("z", "ls"), tool_result("z", "ok"))
    cached = r._tallies.lookup("s1", longer.messages)  # the previous turn's tally covers its prefix
    assert cached is not None and cached.covered == len(longer.messages) - 2
    d = await r.route(longer, context(store), ScriptedCall({}))
    assert d.details["turn"] == 3


def test_switch_price_is_the_cache_write_plus_a_run_as_long_again() -> None:
    tally = Tally(chars=400_000, turns=10)  # 100k tokens
    prices = Prices(capable_write=3.75, capable_read=0.30, capable_out=15.0, efficient_read=0.05, efficient_out=0.4)
    # write 100k at 3.75 + 10 turns x (100k x 0.25 + 400 x 14.6) per Mtok
    expected = (100_000 * 3.75 + 10 * (100_000 * 0.25 + 400 * 14.6)) / 1e6
    assert switch_price(tally, prices, 400) == pytest.approx(expected)


async def test_a_valued_task_switches_only_when_the_gain_pays_for_the_switch() -> None:
    prices = Prices(capable_write=3.75, capable_read=0.3, capable_out=15.0, efficient_read=0.05, efficient_out=0.4)
    model = error_model()
    cheap = TrajectoryRouter(TrajectoryConfig("strong", "weak", threshold=0.5, value_per_task_usd=100.0), model, prices)
    stingy = TrajectoryRouter(
        TrajectoryConfig("strong", "weak", threshold=0.5, value_per_task_usd=0.001), model, prices
    )
    d1 = await cheap.route(request(*session(1)), context(), ScriptedCall({}))
    d2 = await stingy.route(request(*session(1)), context(), ScriptedCall({}))
    assert d1.candidates[0] == "strong" and d2.candidates[0] == "weak"
    assert d2.details["switch_usd"] > 0 and d2.details["net_gain"] < d2.details["gain"]


async def test_run_rules_switch_whatever_the_estimate_says() -> None:
    from switchyard.routers.stage.runrules import RunRules

    r = router(model_with({}, logit(0.01)), threshold=0.5, run_rules=RunRules(repeats=2))
    d = await r.route(request(*session(2)), context(), ScriptedCall({}))
    assert d.candidates[0] == "strong" and d.source == "persistent_errors"


def _spec(block: dict[str, object]) -> object:
    spec_cls = spec_for("trajectory")
    return spec_cls.model_validate({"type": "trajectory", "capable": "strong", "efficient": "weak", **block})


def _build(block: dict[str, object], path: Path | None = None) -> TrajectoryRouter:
    spec = _spec(block)
    targets = {
        "strong": TargetInfo(name="strong", model="m", price=Price(input_per_mtok=3, output_per_mtok=15)),
        "weak": TargetInfo(name="weak", model="m", price=Price(input_per_mtok=0.1, output_per_mtok=0.4)),
    }
    built = spec.build(BuildContext(route="agent", targets=targets, config_dir=str(path) if path else None))  # type: ignore[attr-defined]
    assert isinstance(built, TrajectoryRouter)
    return built


async def test_live_control_holds_a_share_of_calls(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(json.dumps(error_model().to_dict()))
    r = _build(
        {
            "checkpoint": "m.json",
            "threshold": {"target_capable_share": 0.3, "warmup": 4, "window": 16, "feedback_window": 16},
        },
        tmp_path,
    )
    first = r.control_state()
    assert first is not None and first["threshold"] == pytest.approx(0.15)  # the default warm start
    thresholds = []
    for i in range(40):
        d = await r.route(request(*session(i % 3)), context(session=f"s{i}"), ScriptedCall({}))
        assert d.details["control"]["seen"] == i + 1
        if d.source == "trajectory":
            if abs(d.score - d.details["threshold"]) > 1e-6:  # the record rounds to 6 places
                assert (d.candidates[0] == "strong") == (d.score >= d.details["threshold"])
            thresholds.append(d.details["threshold"])
    assert len(set(thresholds)) > 3  # the controller moved the threshold with the scores


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="threshold"):
        _spec({"threshold": "high"})
    with pytest.raises(ValueError, match="target_capable_share"):
        _spec({"threshold": {"target_capable_share": 2}})


def test_the_shipped_checkpoint_loads_and_stays_small() -> None:
    assert BUILTIN.stat().st_size <= 5_000_000
    model = load()
    assert len(model.members) >= 2 and model.dims > 0
    assert isinstance(model.training.get("default_threshold"), float)
    est = model.estimate(vector(advance(None, session(2), model.dims), model.dims))
    assert -1.0 <= est.low <= est.high <= 1.0 and -1.0 <= est.gain <= 1.0


def test_a_malformed_checkpoint_is_refused_with_the_field() -> None:
    data = error_model().to_dict()
    data["members"][0]["gain"]["w"] = data["members"][0]["gain"]["w"][:-1]
    with pytest.raises(TrajectoryCheckpointError, match=r"members\[0\]\.gain\.w"):
        from_dict(data)
    with pytest.raises(TrajectoryCheckpointError, match="feature_version"):
        from_dict({**error_model().to_dict(), "feature_version": 0})


def test_the_cost_head_survives_a_round_trip_and_prices_the_task() -> None:
    base = error_model()
    cost = Head(math.log(3.0), (0.0,) * WIDTH)  # every task costs 3x the typical one
    model = TrajectoryModel(base.dims, base.members, {}, cost=(cost,))
    again = from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.cost == (cost,)
    assert again.estimate({}).rel_cost == pytest.approx(3.0)
    assert from_dict(base.to_dict()).estimate({}).rel_cost == 1.0


def test_the_default_threshold_follows_the_mode(tmp_path: Path) -> None:
    cost = Head(0.0, (0.0,) * WIDTH)
    model = TrajectoryModel(DIMS, error_model().members, {}, cost=(cost,)).to_dict()
    model["training"] = {
        "default_threshold": 0.11,
        "default_threshold_with_rules": 0.22,
        "default_threshold_per_cost": 0.33,
    }
    (tmp_path / "m.json").write_text(json.dumps(model))
    assert _build({"checkpoint": "m.json"}, tmp_path).config.threshold == 0.11
    assert _build({"checkpoint": "m.json", "persistent_errors": {}}, tmp_path).config.threshold == 0.22
    per_cost = _build({"checkpoint": "m.json", "score": "gain_per_cost"}, tmp_path)
    assert per_cost.config.threshold == 0.33 and per_cost.config.per_cost
    assert _build({"checkpoint": "m.json", "threshold": 0.5}, tmp_path).config.threshold == 0.5
    (tmp_path / "plain.json").write_text(json.dumps(error_model().to_dict()))
    with pytest.raises(ValueError, match="cost head"):
        _build({"checkpoint": "plain.json", "score": "gain_per_cost"}, tmp_path)


def test_tool_results_inside_user_messages_count_as_results() -> None:
    """Anthropic Messages (Claude Code) sends tool results as user messages: they are results,
    not follow-up instructions, and the task stays the first user text."""
    from routers._routing_helpers import anthropic_tool_result

    msgs = [user("Fix the build"), assistant_call("a", "bash"), anthropic_tool_result("a", "ValueError: bad flag")]
    tally = advance(None, msgs, DIMS)
    assert tally.results == 1 and tally.errors == 1 and tally.users == 0
    assert tally.task == read_task("Fix the build", DIMS)


async def test_without_a_session_every_turn_is_decided_afresh() -> None:
    r = router(error_model(), threshold=0.6)
    first = await r.route(request(*session(1)), context(session=None), ScriptedCall({}))
    clean = await r.route(request(user("Pay the bill in bill.txt")), context(session=None), ScriptedCall({}))
    assert first.candidates[0] == "strong" and first.source == "trajectory"
    assert clean.candidates[0] == "weak" and clean.source == "trajectory"
