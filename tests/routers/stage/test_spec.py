"""``type: stage_router`` in the YAML config: keys, defaults and errors with their YAML paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from _stage_yaml import BASE, load

from switchyard.config.load import ConfigError, load_config
from switchyard.routers import router_types, spec_for
from switchyard.routers.base import BuildContext
from switchyard.routers.stage import StageRouter, StageRouterSpec, ToolKind


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, extra)
    return str(err.value)


def test_registered() -> None:
    assert "stage_router" in router_types()
    assert spec_for("stage_router") is StageRouterSpec


def test_defaults(tmp_path: Path) -> None:
    spec = load(tmp_path).routes["agent"]
    config = spec.config()
    assert (config.picker, config.threshold, config.window, config.compat) == ("efficient_first", 0.5, 3, "none")
    assert config.notes is None and not config.hold and not spec.stateful
    assert isinstance(spec.build(None), StageRouter)
    assert spec.target_refs() == [("capable", "frontier"), ("efficient", "lightning")]


def test_every_key(tmp_path: Path) -> None:
    spec = load(
        tmp_path,
        """\
        picker: capable_first
        confidence_threshold: 0.7
        recent_turn_window: 5
        tool_semantics: {Get_User: read, book: write, fix: edit, think: plan, run: shell, Read: other}
        handoff_notes:
          escalation_note: up
          deescalation_note: down
          only_on_wrong_signal_escalation: false
        capable_system_prompt: careful
        efficient_system_prompt: quick
        hold_turns: {capable: 3}
        compat: nvidia
        """,
    ).routes["agent"]
    config = spec.config()
    assert (config.picker, config.threshold, config.window, config.compat) == ("capable_first", 0.7, 5, "nvidia")
    assert config.semantics["get_user"] is ToolKind.READ and config.semantics["read"] is ToolKind.OTHER
    assert config.notes is not None
    assert (config.notes.escalation, config.notes.deescalation, config.notes.only_on_signal_escalation) == (
        "up",
        "down",
        False,
    )
    assert config.notes.when == "every_turn", "compat: nvidia notes every decided turn by default"
    assert (config.capable_system_prompt, config.efficient_system_prompt) == ("careful", "quick")
    assert config.hold == {"capable": 3, "efficient": 0} and spec.stateful


def test_hold_turns_as_one_number(tmp_path: Path) -> None:
    assert load(tmp_path, "hold_turns: 2\n").routes["agent"].config().hold == {"capable": 2, "efficient": 2}


def test_classifier_block_needs_a_known_judge_target(tmp_path: Path) -> None:
    message = error(tmp_path, "classifier: {target: judge, base_threshold: 0.5}\n")
    assert "routes.agent.classifier.target: unknown target 'judge'" in message


def test_classifier_block_builds_the_capability_judge(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(
        BASE.replace(
            "  frontier: {client: local, model: frontier}\n",
            "  frontier: {client: local, model: frontier}\n  judge: {client: local, model: judge}\n",
        )
        + "    classifier: {target: judge, base_threshold: 0.6, threshold_step: 0.1, classify_trigger: every_request}\n"
    )
    spec = load_config(path).routes["agent"]
    assert spec.auxiliary_refs() == [("classifier.target", "judge")]
    assert spec.target_refs() == [("capable", "frontier"), ("efficient", "lightning")], "a judge is never a destination"
    router = spec.build(BuildContext(route="agent", targets={}))
    assert isinstance(router, StageRouter) and router.classifier is not None


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("{target: j, base_threshold: 0.8, threshold_step: 0.2}", "base_threshold + 2 * threshold_step must be <= 1"),
        ("{target: j, classify_trigger: new_session}", "routes.agent.classifier.classify_trigger"),
        ("{target: j, promt: hi}", "routes.agent.classifier.promt: unknown key (did you mean 'prompt'?)"),
    ],
)
def test_classifier_block_errors(tmp_path: Path, block: str, expected: str) -> None:
    assert expected in error(tmp_path, f"classifier: {block}\n")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("picker: cheapest_first\n", "routes.agent.picker"),
        ("confidence_threshold: 1.5\n", "routes.agent.confidence_threshold"),
        ("recent_turn_window: 0\n", "routes.agent.recent_turn_window"),
        ("tool_semantics: {lookup: fetch}\n", "tool 'lookup': unknown kind 'fetch'; use one of write, edit, read"),
        ("tool_semantics: {Book: write, book: read}\n", "given twice"),
        ("handoff_notes: {only_on_wrong_signal_escalation: true}\n", "set escalation_note, deescalation_note or both"),
        ("handoff_notes: {escalation_note: x, when: always}\n", "routes.agent.handoff_notes.when"),
        ("hold_turns: -1\n", "routes.agent.hold_turns"),
        ("hold_turns: {capable: 1, cheap: 2}\n", "routes.agent.hold_turns.cheap: unknown key"),
        ("compat: litellm\n", "routes.agent.compat"),
        ("confidence_treshold: 0.4\n", "unknown key (did you mean 'confidence_threshold'?)"),
    ],
)
def test_config_errors_name_the_yaml_path(tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in error(tmp_path, extra)


def test_targets_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(BASE.replace("capable: frontier", "capable: frontir"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "routes.agent.capable: unknown target 'frontir' (did you mean 'frontier'?)" in str(err.value)
    path.write_text(BASE.replace("capable: frontier", "capable: lightning"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "capable and efficient must name different targets" in str(err.value)


def test_the_example_config_loads() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "stage-router.yaml"
    loaded = load_config(example, env={"ANTHROPIC_API_KEY": "x"})
    config = loaded.routes["agent"].config()
    assert config.hold == {"capable": 2, "efficient": 0}
    assert config.semantics["run"] is ToolKind.SHELL and config.notes is not None
