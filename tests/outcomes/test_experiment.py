"""Shadow mode and a control group as route settings (issue 48, item 2): what serves, what the
record says, the sticky control draw, and config validation with YAML paths."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard import Switchyard
from switchyard.config.load import ConfigError
from switchyard.routers.experiment import control_draw

HELLO = [{"role": "user", "content": "hello"}]


def with_route(config: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {**config, "routes": {**config["routes"], "exp": spec}}


async def test_shadow_serves_the_capable_target_and_records_would_select(config: dict[str, Any]) -> None:
    spec = {"type": "stage_router", "capable": "capable", "efficient": "efficient", "experiment": {"mode": "shadow"}}
    async with Switchyard.from_config(with_route(config, spec)) as sy:
        done = await sy.complete(model="exp", messages=HELLO, session_id="s1")
    record = done.record
    assert record.selected == "capable"  # served by the baseline
    assert record.details["arm"] == "shadow"
    assert record.details["would_select"] == "efficient"  # a calm first turn: the router's choice
    # The same tokens at the efficient target's price: what routing would have cost.
    assert 0 < record.details["would_cost_usd"] < record.cost_usd


async def test_shadow_serves_a_named_baseline(config: dict[str, Any]) -> None:
    spec = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],
        "experiment": {"mode": "shadow", "baseline": "capable"},
    }
    async with Switchyard.from_config(with_route(config, spec)) as sy:
        record = (await sy.complete(model="exp", messages=HELLO)).record
    assert (record.selected, record.details["would_select"]) == ("capable", "efficient")


async def test_control_sessions_stay_on_the_baseline_and_the_rest_are_routed(config: dict[str, Any]) -> None:
    spec = {
        "type": "random",
        "targets": ["efficient", "capable"],
        "weights": [1, 0],  # the router always picks efficient
        "experiment": {"control_share": 0.5, "baseline": "capable"},
    }
    sessions = [f"s{i}" for i in range(12)]
    expected = {s: ("control" if control_draw(None, s) < 0.5 else "routed") for s in sessions}
    assert set(expected.values()) == {"control", "routed"}  # both arms appear among these ids
    async with Switchyard.from_config(with_route(config, spec)) as sy:
        for session in sessions:
            for _ in range(2):  # sticky: every request of a session in the same arm
                record = (await sy.complete(model="exp", messages=HELLO, session_id=session)).record
                assert record.details["arm"] == expected[session]
                assert record.selected == ("capable" if expected[session] == "control" else "efficient")
                assert "would_select" not in record.details
                if expected[session] == "control":
                    assert record.source == "control"


def test_the_control_draw_is_sticky_and_near_the_share_over_many_sessions() -> None:
    # Deterministic: SHA-256 of fixed ids, so the count is the same on every run and machine.
    ids = [f"session-{i}" for i in range(20_000)]
    draws = [control_draw("tenant-a", s) for s in ids]
    assert draws == [control_draw("tenant-a", s) for s in ids]
    share = sum(d < 0.1 for d in draws) / len(ids)
    assert 0.09 < share < 0.11
    # Another tenant's same ids draw independently.
    other = [control_draw("tenant-b", s) < 0.1 for s in ids]
    assert sum(a and b for a, b in zip((d < 0.1 for d in draws), other, strict=True)) < 0.02 * len(ids)


@pytest.mark.parametrize(
    ("experiment", "path"),
    [
        ({"control_share": 1.0}, "routes.exp.experiment.control_share"),
        ({"control_share": -0.1}, "routes.exp.experiment.control_share"),
        ({"mode": "canary"}, "routes.exp.experiment.mode"),
        ({"mode": "shadow", "control_share": 0.2}, "routes.exp.experiment"),
        ({"baseline": "broken"}, "routes.exp.experiment.baseline"),
        ({"share": 0.1}, "routes.exp.experiment.share"),
    ],
)
def test_a_bad_experiment_block_names_its_yaml_path(
    config: dict[str, Any], experiment: dict[str, Any], path: str
) -> None:
    spec = {"type": "stage_router", "capable": "capable", "efficient": "efficient", "experiment": experiment}
    with pytest.raises(ConfigError) as caught:
        Switchyard.from_config(with_route(config, spec))
    assert path in str(caught.value)


def test_a_route_without_a_capable_tier_must_name_its_baseline(config: dict[str, Any]) -> None:
    spec = {"type": "random", "targets": ["efficient", "capable"], "experiment": {"mode": "shadow"}}
    with pytest.raises(ConfigError, match=r"set experiment\.baseline") as caught:
        Switchyard.from_config(with_route(config, spec))
    assert "routes.exp.experiment" in str(caught.value)
