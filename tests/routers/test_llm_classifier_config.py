"""Config of llm_classifier routes: per-mode keys, errors with YAML paths, examples that validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchyard.config.build import build_routes, target_infos
from switchyard.config.load import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


def config(route: dict[str, Any]) -> dict[str, Any]:
    return {
        "llm_clients": {"l": {"base_url": "http://127.0.0.1:9/v1"}},
        "targets": {n: {"client": "l", "model": f"m-{n}"} for n in ("weak", "strong", "judge")},
        "routes": {"r": {"type": "llm_classifier", "classifier_target": "judge", **route}},
    }


CAP = {"strong_target": "strong", "weak_target": "weak", "base_threshold": 0.5}
ESC = {"mode": "escalation", "strong_target": "strong", "weak_target": "weak"}
CUSTOM = {
    "mode": "custom",
    "prompt": "Pick.",
    "targets": {"a": "weak", "b": "strong"},
    "default_target": "strong",
    "response_schema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
    "selector": "/x",
}


def errors(route: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        loaded = load_config(config(route))
        build_routes(loaded, target_infos(loaded))
    return str(err.value)


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ({**CAP, "threshold_step": 0.3}, "routes.r.threshold_step: base_threshold + 2 * threshold_step must be <= 1"),
        ({**CAP, "base_threshold": 1.5}, "routes.r.base_threshold:"),
        ({**CAP, "confirmations": 2}, "routes.r.confirmations: unknown key"),
        ({**ESC, "base_threshold": 0.5}, "routes.r.base_threshold: unknown key"),
        ({**ESC, "confirmaitons": 2}, "did you mean 'confirmations'?"),
        ({**ESC, "confirmations": 0}, "routes.r.confirmations:"),
        ({**ESC, "window_message_chars": 10}, "routes.r.window_message_chars:"),
        ({**ESC, "classify_trigger": "user_turn"}, "routes.r.classify_trigger: unknown key"),
        ({**CAP, "mode": "cascade"}, "routes.r.mode: Input should be 'capability', 'custom', 'escalation'"),
        ({**CAP, "weak_target": "ghost"}, "routes.r.weak_target: unknown target 'ghost'"),
        ({**CAP, "classifier_target": "ghost"}, "routes.r.classifier_target: unknown target 'ghost'"),
        ({**CAP, "classify_trigger": "sometimes"}, "routes.r.classify_trigger:"),
        ({**CAP, "message_hash_fallback": True}, "message_hash_fallback keys session affinity"),
        ({**CAP, "prompt": "Schema: {{RESPONSE_SCHEMA}}"}, "remove it, the schema is supplied automatically"),
        ({**CAP, "prompt": "a", "prompt_file": "b.md"}, "either 'prompt' or 'prompt_file'"),
        ({**CAP, "prompt_file": "/nonexistent/judge.md"}, "routes.r: prompt_file: cannot read /nonexistent/judge.md"),
        ({**CAP, "response_format_type": "xml"}, "routes.r.response_format_type:"),
        ({**CAP, "judge_timeout_s": 0}, "routes.r.judge_timeout_s:"),
        ({**CUSTOM, "prompt": None}, "mode 'custom' needs 'prompt' or 'prompt_file'"),
        ({**CUSTOM, "targets": {"a": "weak"}}, "routes.r.targets:"),
        ({**CUSTOM, "targets": {"a": "weak", "b": "weak"}}, "each label must name a different target"),
        ({**CUSTOM, "selector": "route"}, "must be a JSON Pointer into the verdict"),
        ({**CUSTOM, "response_schema": "{not json"}, "routes.r.response_schema: is not valid JSON"),
        (
            {**CUSTOM, "response_schema": {"type": "object", "properties": {"x": {"oneOf": []}}}},
            "schema at /properties/x uses unsupported keyword(s) ['oneOf']",
        ),
        ({**CUSTOM, "response_schema": {"type": "string"}}, "must describe a JSON object"),
        ({**CUSTOM, "default_target": "ghost"}, "routes.r.default_target: unknown target 'ghost'"),
        ({**CUSTOM, "targets": {"a": "weak", "b": "ghost"}}, "routes.r.targets.b: unknown target 'ghost'"),
    ],
)
def test_bad_config_names_the_yaml_path(route: dict[str, Any], expected: str) -> None:
    assert expected in errors(route)


def test_yaml_errors_carry_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(
        "llm_clients: {l: {base_url: 'http://127.0.0.1:9/v1'}}\n"
        "targets:\n  w: {client: l, model: w}\n  s: {client: l, model: s}\n"
        "routes:\n  r:\n    type: llm_classifier\n    mode: escalation\n    classifier_target: s\n"
        "    strong_target: s\n    weak_target: w\n    confirmations: -1\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{path}:12: routes.r.confirmations:" in str(err.value)


def test_modes_build_and_report_their_targets() -> None:
    for route, refs in [
        (CAP, ["strong", "weak"]),
        (ESC, ["strong", "weak"]),
        ({**CUSTOM, "default_target": "judge"}, ["weak", "strong", "judge"]),
    ]:
        loaded = load_config(config(route))
        spec = loaded.routes["r"]
        assert [t for _, t in spec.target_refs()] == refs
        assert spec.auxiliary_refs() == [("classifier_target", "judge")]
        built = build_routes(loaded, target_infos(loaded))["r"]
        assert built.targets == tuple(refs)  # the judge is never a routing destination


def test_statefulness_follows_the_trigger() -> None:
    def route_of(extra: dict[str, Any]) -> Any:
        loaded = load_config(config(extra))
        return build_routes(loaded, target_infos(loaded))["r"]

    assert route_of(CAP).stateful is False
    assert route_of({**CAP, "classify_trigger": "user_turn"}).stateful is True
    hashed = route_of({**CAP, "classify_trigger": "new_session", "message_hash_fallback": True})
    assert (hashed.stateful, hashed.hash_session_fallback) == (True, True)
    assert route_of(ESC).stateful is True


def test_prompt_file_is_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "judge.md").write_text("Only my words.")
    path = tmp_path / "router.yaml"
    path.write_text(
        "llm_clients: {l: {base_url: 'http://127.0.0.1:9/v1'}}\n"
        "targets: {w: {client: l, model: w}, s: {client: l, model: s}}\n"
        "routes: {r: {type: llm_classifier, mode: escalation, classifier_target: s, strong_target: s,"
        " weak_target: w, prompt_file: judge.md}}\n"
    )
    loaded = load_config(path)
    router: Any = build_routes(loaded, target_infos(loaded))["r"].router
    assert router.judge.instructions == "Only my words."


@pytest.mark.parametrize("name", ["llm-classifier.yaml", "escalation.yaml"])
def test_examples_validate_and_build(name: str) -> None:
    loaded = load_config(ROOT / "examples" / name, env={})
    routes = build_routes(loaded, target_infos(loaded))
    assert {spec.type for spec in loaded.routes.values()} == {"llm_classifier"}
    assert routes
