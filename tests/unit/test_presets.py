"""Target presets: application, precedence, errors at the YAML path, the example config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchyard.cli import main
from switchyard.config import ConfigError, load_config
from switchyard.config.build import target_infos
from switchyard.config.presets import PRESETS, deep_merge

ROOT = Path(__file__).resolve().parents[2]


def config(**target: Any) -> dict[str, Any]:
    return {
        "llm_clients": {"lightning": {"format": "openai_chat", "base_url": "http://127.0.0.1:8000/v1"}},
        "targets": {"lightning": {"client": "lightning", **target}},
        "routes": {"run": {"type": "passthrough", "target": "lightning"}},
    }


def test_preset_fills_the_target() -> None:
    loaded = load_config(config(preset="nemotron-3.5-lightning"))
    t = loaded.config.targets["lightning"]
    assert t.model == "nemotron-3.5-lightning"
    assert t.extra_body == {"chat_template_kwargs": {"enable_thinking": False}}
    assert t.probe_context_window is True
    assert t.preset == "nemotron-3.5-lightning"
    assert t.context_window is None
    # No price default: a warning says so, naming the path.
    assert [w.path for w in loaded.warnings] == ["targets.lightning.price"]


@pytest.mark.parametrize(("value", "thinking"), [(True, True), ("on", True), (False, False), ("off", False)])
def test_reasoning_option(value: Any, thinking: bool) -> None:
    loaded = load_config(config(preset={"name": "nemotron-3.5-lightning", "reasoning": value}, price={}))
    assert loaded.config.targets["lightning"].extra_body["chat_template_kwargs"]["enable_thinking"] is thinking
    assert loaded.warnings == []


def test_user_keys_win_at_every_level() -> None:
    loaded = load_config(
        config(
            preset={"name": "nemotron-3.5-lightning", "reasoning": "on"},
            model="nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
            extra_body={"top_k": 20, "chat_template_kwargs": {"custom": 1}},
            probe_context_window=False,
            context_window=65536,
            price={"input_per_mtok": 0.04, "output_per_mtok": 0.12},
        )
    )
    t = loaded.config.targets["lightning"]
    assert t.model == "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
    assert t.extra_body == {"top_k": 20, "chat_template_kwargs": {"custom": 1, "enable_thinking": True}}
    assert t.probe_context_window is False
    assert t.context_window == 65536
    assert t.price.output_per_mtok == 0.12
    assert loaded.warnings == []


def test_hand_written_enable_thinking_wins_over_the_default_silently() -> None:
    kwargs = {"chat_template_kwargs": {"enable_thinking": True}}
    loaded = load_config(config(preset="nemotron-3.5-lightning", price={}, extra_body=kwargs))
    assert loaded.config.targets["lightning"].extra_body["chat_template_kwargs"]["enable_thinking"] is True
    assert loaded.warnings == []


def test_contradicting_an_explicit_option_warns() -> None:
    loaded = load_config(
        config(
            preset={"name": "nemotron-3.5-lightning", "reasoning": "on"},
            price={},
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
    )
    assert loaded.config.targets["lightning"].extra_body["chat_template_kwargs"]["enable_thinking"] is False
    (warning,) = loaded.warnings
    assert warning.path == "targets.lightning.extra_body.chat_template_kwargs.enable_thinking"
    assert "reasoning: on" in warning.message


def test_unknown_preset_is_one_error_at_its_path() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config(preset="nemotron-lightning"))
    (issue,) = err.value.issues  # no "model: required" noise for the keys the preset would fill
    assert issue.path == "targets.lightning.preset"
    assert "unknown preset 'nemotron-lightning'" in issue.message
    assert "did you mean 'nemotron-3.5-lightning'" in issue.message
    assert "known presets: nemotron-3.5-lightning" in issue.message


@pytest.mark.parametrize(
    ("preset", "path", "text"),
    [
        ({"name": "nemotron-3.5-lightning", "colour": "red"}, "targets.lightning.preset.colour", "unknown option"),
        ({"name": "nemotron-3.5-lightning", "reasoning": "maybe"}, "targets.lightning.preset.reasoning", "on or off"),
        ({"reasoning": "on"}, "targets.lightning.preset.name", "required key is missing"),
        (["nemotron-3.5-lightning"], "targets.lightning.preset", "must be a preset name or a mapping"),
    ],
)
def test_bad_preset_options(preset: Any, path: str, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config(preset=preset, price={}))
    assert [i.path for i in err.value.issues] == [path]
    assert text in err.value.issues[0].message


def test_yaml_on_off_and_line_numbers(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "llm_clients:\n"
        "  l: {base_url: http://127.0.0.1:8000/v1}\n"
        "targets:\n"
        "  t:\n"
        "    client: l\n"
        "    preset: {name: nemotron-3.5-lightning, reasoning: off}\n"
        "    price: {input_per_mtok: 0.04}\n"
        "routes:\n"
        "  r: {type: passthrough, target: t}\n",
        encoding="utf-8",
    )
    loaded = load_config(good)
    assert loaded.config.targets["t"].extra_body["chat_template_kwargs"]["enable_thinking"] is False
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text(encoding="utf-8").replace("nemotron-3.5-lightning", "lightning"), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert str(err.value).startswith(f"{bad}:6: targets.t.preset: unknown preset 'lightning'")


def test_served_window_fills_target_info_unless_configured() -> None:
    loaded = load_config(config(preset="nemotron-3.5-lightning", price={}))
    assert target_infos(loaded)["lightning"].context_window is None
    loaded.served_context_windows["lightning"] = 65536
    assert target_infos(loaded)["lightning"].context_window == 65536
    pinned = load_config(config(preset="nemotron-3.5-lightning", price={}, context_window=32768))
    pinned.served_context_windows["lightning"] = 65536
    assert target_infos(pinned)["lightning"].context_window == 32768


def test_deep_merge() -> None:
    assert deep_merge({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 3}, "e": 4}) == {
        "a": {"b": 3, "c": 2},
        "d": 1,
        "e": 4,
    }
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}


def test_registry() -> None:
    assert list(PRESETS) == ["nemotron-3.5-lightning"]


def test_example_config_validates(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    example = ROOT / "examples" / "lightning.yaml"
    assert main(["validate", str(example), "--strict"]) == 0
    assert "3 target(s)" in capsys.readouterr().out
    loaded = load_config(example, env={"OPENAI_API_KEY": "test"})
    assert loaded.config.targets["lightning"].preset == "nemotron-3.5-lightning"
    assert loaded.config.targets["lightning-thinking"].extra_body["chat_template_kwargs"]["enable_thinking"] is True
