"""Config of decision_model routes: errors name the YAML path; the decision client picks the protocol."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.config.build import build_routes, target_infos
from switchyard.config.load import ConfigError, load_config
from switchyard.routers.decision.router import DecisionModelRouter


def config(route: dict[str, Any], **extra_routes: dict[str, Any]) -> dict[str, Any]:
    return {
        "llm_clients": {
            "l": {"base_url": "http://127.0.0.1:9/v1"},
            "ts": {"format": "system_one", "base_url": "http://127.0.0.1:9/v1"},
        },
        "targets": {
            **{n: {"client": "l", "model": f"m-{n}"} for n in ("weak", "strong", "judge")},
            "jev": {"client": "ts", "model": "jev-latest"},
        },
        "routes": {
            "r": {
                "type": "decision_model",
                "decision_target": "judge",
                "labels": {"easy": "weak", "hard": "strong"},
                "default_target": "weak",
                **route,
            },
            **extra_routes,
        },
    }


def errors(route: dict[str, Any], **extra_routes: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        loaded = load_config(config(route, **extra_routes))
        build_routes(loaded, target_infos(loaded))
    return str(err.value)


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ({"labels": {"easy": "weak", "hard": "stong"}}, "routes.r.labels.hard: unknown target 'stong'"),
        (
            {"labels": {"easy": "weak", "hard": {"target": "stong"}}},
            "routes.r.labels.hard.target: unknown target 'stong'",
        ),
        ({"labels": {"easy": "weak", "hard": {"model": "strong"}}}, "routes.r.labels.hard"),
        ({"labels": {"easy": "weak"}}, "routes.r.labels:"),
        ({"labels": {"easy": "weak", "also_easy": "weak"}}, "routes.r.labels: labels must name at least two"),
        ({"labels": {"easy one": "weak", "hard": "strong"}}, "routes.r.labels: label 'easy one' must be 1 to 64"),
        ({"min_probability": 1.5}, "routes.r.min_probability: Input should be less than or equal to 1"),
        ({"min_probability": -0.1}, "routes.r.min_probability: Input should be greater than or equal to 0"),
        ({"sum_tolerance": 0.9}, "routes.r.sum_tolerance:"),
        ({"timeout_s": 0}, "routes.r.timeout_s:"),
        ({"default_target": "nobody"}, "routes.r.default_target: unknown target 'nobody'"),
        ({"decision_target": "nobody"}, "routes.r.decision_target: unknown target 'nobody'"),
        ({"decision_target": "weak"}, "decision_target must not be the default_target"),
        ({"message_hash_fallback": True}, "message_hash_fallback keys session affinity"),
        ({"classify_trigger": "sometimes"}, "routes.r.classify_trigger:"),
        ({"cutoff": 0.5}, "routes.r.cutoff: unknown key"),
        (
            {"labels": {"easy": "weak", "hard": "jev"}, "decision_target": "judge"},
            "routes.r.labels.hard: target 'jev' is a decision model (its client has format 'system_one')",
        ),
    ],
)
def test_errors_name_the_yaml_path(route: dict[str, Any], expected: str) -> None:
    assert expected in errors(route)


def test_a_system_one_target_cannot_serve_any_route() -> None:
    message = errors({}, plain={"type": "passthrough", "target": "jev"})
    assert "routes.plain.target: target 'jev' is a decision model" in message


@pytest.mark.parametrize(("decider", "protocol"), [("judge", "rlcd"), ("jev", "system_one")])
def test_the_decision_client_picks_the_protocol(decider: str, protocol: str) -> None:
    loaded = load_config(config({"decision_target": decider}))
    router = build_routes(loaded, target_infos(loaded))["r"].router
    assert isinstance(router, DecisionModelRouter)
    assert router.asker.protocol == protocol


def test_decision_target_is_called_not_routed_to() -> None:
    loaded = load_config(config({"decision_target": "jev", "default_target": "strong"}))
    route = build_routes(loaded, target_infos(loaded))["r"]
    assert route.targets == ("weak", "strong")
    assert loaded.routes["r"].uses_session_state() is False
    stateful = load_config(config({"classify_trigger": "user_turn"}))
    assert stateful.routes["r"].uses_session_state() is True
