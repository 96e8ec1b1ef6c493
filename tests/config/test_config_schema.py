"""``switchyard config schema``: the exported JSON Schema accepts every example and rejects what
the loader rejects for shape reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from switchyard.cli import main
from switchyard.config.json_schema import config_json_schema
from switchyard.config.load import ConfigError, load_config
from switchyard.routers.registry import router_types

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yaml") if p.name != "minilm-features.yaml")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The schema exactly as the CLI writes it."""
    out = tmp_path_factory.mktemp("schema") / "switchyard.schema.json"
    assert main(["config", "schema", "-o", str(out)]) == 0
    schema: dict[str, Any] = json.loads(out.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_cli_prints_the_generated_schema(exported: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == exported == config_json_schema()


def test_every_route_type_is_described(exported: dict[str, Any]) -> None:
    route = exported["properties"]["routes"]["additionalProperties"]
    assert route["properties"]["type"]["enum"] == router_types()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_validates(exported: dict[str, Any], path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(exported).iter_errors(data)
    ]
    assert errors == []


BASE: dict[str, Any] = {
    "llm_clients": {"v": {"format": "openai_chat", "base_url": "http://127.0.0.1:8000/v1"}},
    "targets": {"a": {"client": "v", "model": "m"}, "b": {"client": "v", "model": "n"}},
}

BROKEN = {
    "unknown top-level key": {"routs": {}},
    "unknown route key": {"routes": {"r": {"type": "passthrough", "target": "a", "targt": "b"}}},
    "route without type": {"routes": {"r": {"target": "a"}}},
    "unknown route type": {"routes": {"r": {"type": "pasthrough", "target": "a"}}},
    "custom mode without selector": {
        "routes": {
            "r": {
                "type": "llm_classifier",
                "mode": "custom",
                "classifier_target": "a",
                "targets": {"x": "a", "y": "b"},
                "default_target": "a",
                "response_schema": {"type": "object"},
            }
        }
    },
    "escalation key in capability mode": {
        "routes": {
            "r": {
                "type": "llm_classifier",
                "classifier_target": "a",
                "strong_target": "b",
                "weak_target": "a",
                "base_threshold": 0.5,
                "confirmations": 2,
            }
        }
    },
    "stage threshold out of range": {
        "routes": {"r": {"type": "stage_router", "capable": "b", "efficient": "a", "confidence_threshold": 2}}
    },
    "target without model or preset": {"targets": {"a": {"client": "v"}}, "routes": {}},
    "unknown preset": {"targets": {"a": {"client": "v", "preset": "nemotron-9"}}, "routes": {}},
    "bad client format": {"llm_clients": {"v": {"format": "grpc", "base_url": "http://x"}}, "routes": {}},
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_schema_and_loader_both_reject(exported: dict[str, Any], case: str) -> None:
    data = {**BASE, **BROKEN[case]}
    assert list(jsonschema.Draft202012Validator(exported).iter_errors(data)), "the schema accepted it"
    with pytest.raises(ConfigError):
        load_config(data)


def test_preset_and_yaml_off_are_accepted(exported: dict[str, Any]) -> None:
    data = yaml.safe_load(
        """
llm_clients:
  v: {format: openai_chat, base_url: "http://127.0.0.1:8000/v1", markup_leak: off}
targets:
  t: {client: v, preset: {name: nemotron-3.5-lightning, reasoning: on}, price: {input_per_mtok: 0.1}}
routes:
  r: {type: passthrough, target: t}
"""
    )
    assert data["llm_clients"]["v"]["markup_leak"] is False  # what PyYAML makes of `off`
    jsonschema.Draft202012Validator(exported).validate(data)
    load_config(data)


def test_docs_show_the_modeline() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text() + (ROOT / "examples" / "README.md").read_text()
    assert "# yaml-language-server: $schema=" in text
    assert "switchyard config schema" in text
