"""``switchyard config schema``: the exported JSON Schema accepts every example and rejects what
the loader rejects for shape reasons."""

from __future__ import annotations

import json
import re
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
# `*-features.yaml` files hold a features block (train-probe --features) and `*-suite.yaml` files a
# replay suite (replay --suite, checked in tests/eval/test_suite_replay.py), not a config.
NOT_CONFIGS = ("-features.yaml", "-suite.yaml")
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yaml") if not p.name.endswith(NOT_CONFIGS))


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


def test_cli_names_an_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing-dir" / "schema.json"
    assert main(["config", "schema", "-o", str(target)]) == 1
    assert f"error: cannot write {target}" in capsys.readouterr().err


def test_every_route_type_is_described(exported: dict[str, Any]) -> None:
    assert exported["properties"]["routes"]["additionalProperties"] == {"$ref": "#/$defs/Route"}
    route = exported["$defs"]["Route"]
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
    # Composition (docs/cascade.md, docs/subagents.md, docs/advisor.md): the inline blocks are
    # checked like routes, however deep.
    "cascade without default": {
        "routes": {"r": {"type": "cascade", "stages": [{"type": "passthrough", "target": "a"}]}}
    },
    "cascade with no stages": {"routes": {"r": {"type": "cascade", "stages": [], "default": "a"}}},
    "inline stage with a typo": {
        "routes": {"r": {"type": "cascade", "stages": [{"type": "passthrough", "targt": "a"}], "default": "b"}}
    },
    "inline stage without type": {"routes": {"r": {"type": "cascade", "stages": [{"target": "a"}], "default": "b"}}},
    "route-level key in a stage": {
        "routes": {
            "r": {
                "type": "cascade",
                "stages": [{"type": "passthrough", "target": "a", "fallbacks": ["b"]}],
                "default": "b",
            }
        }
    },
    "stage threshold out of range inside a cascade": {
        "routes": {
            "r": {
                "type": "cascade",
                "stages": [{"type": "stage_router", "capable": "b", "efficient": "a", "confidence_threshold": 2}],
                "default": "b",
            }
        }
    },
    "unknown type in a subagents policy": {
        "routes": {"r": {"type": "passthrough", "target": "a", "subagents": {"type": "pasthrough", "target": "a"}}}
    },
    "subagents inside a subagents policy": {
        "routes": {
            "r": {
                "type": "passthrough",
                "target": "a",
                "subagents": {
                    "type": "passthrough",
                    "target": "a",
                    "subagents": {"type": "passthrough", "target": "b"},
                },
            }
        }
    },
    "bad key deep in a subagents cascade": {
        "routes": {
            "r": {
                "type": "passthrough",
                "target": "a",
                "subagents": {
                    "type": "cascade",
                    "stages": [{"type": "random", "targets": ["a"], "sed": 1}],
                    "default": "a",
                },
            }
        }
    },
    "advisor without advisor_target": {"routes": {"r": {"type": "advisor", "executor_target": "a"}}},
    "advisor with an unknown gate trigger": {
        "routes": {"r": {"type": "advisor", "executor_target": "a", "advisor_target": "b", "gate_trigger": "always"}}
    },
    # Target restrictions (docs/restrictions.md).
    "restrict rule with an unknown detector": {
        "routes": {"r": {"type": "passthrough", "target": "a", "restrict": [{"detector": "ssn", "require": ["x"]}]}}
    },
    "restrict rule without labels": {
        "routes": {"r": {"type": "passthrough", "target": "a", "restrict": [{"detector": "emails", "require": []}]}}
    },
    "restrict on an inline stage": {
        "routes": {
            "r": {
                "type": "cascade",
                "stages": [
                    {"type": "passthrough", "target": "a", "restrict": [{"detector": "emails", "require": ["x"]}]}
                ],
                "default": "b",
            }
        }
    },
    "verify with an unknown mode": {
        "routes": {"r": {"type": "stage_router", "capable": "b", "efficient": "a", "verify": {"mode": "loud"}}}
    },
    "verify with an unknown check": {
        "routes": {"r": {"type": "stage_router", "capable": "b", "efficient": "a", "verify": {"checks": ["vibes"]}}}
    },
    "profiles chooser with a typo": {
        "routes": {
            "r": {
                "type": "profiles",
                "choose": {"type": "passthrough", "targt": "a"},
                "profiles": {"a": "s"},
                "default": "s",
            },
            "s": {"type": "passthrough", "target": "a"},
        }
    },
    "target labels not a list": {"targets": {"a": {"client": "v", "model": "m", "labels": "onprem"}}, "routes": {}},
    "advisor max_reviews zero": {
        "routes": {"r": {"type": "advisor", "executor_target": "a", "advisor_target": "b", "max_reviews": 0}}
    },
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_schema_and_loader_both_reject(exported: dict[str, Any], case: str) -> None:
    data = {**BASE, **BROKEN[case]}
    assert list(jsonschema.Draft202012Validator(exported).iter_errors(data)), "the schema accepted it"
    with pytest.raises(ConfigError):
        load_config(data)


def test_compose_example_and_its_parts_are_checked(exported: dict[str, Any]) -> None:
    """examples/compose.yaml validates, and a mistake planted inside its nested blocks is found
    by the schema at the same place the loader reports it."""
    compose = yaml.safe_load((ROOT / "examples" / "compose.yaml").read_text())
    validator = jsonschema.Draft202012Validator(exported)
    validator.validate(compose)
    load_config(compose)
    planted = {
        ("agent", "stages", 1): ("base_threshold", "high"),
        ("agent", "subagents", "stages", 0): ("efficent", "efficient"),
        ("reviewed",): ("gate_trigger", "sometimes"),
    }
    for where, (key, value) in planted.items():
        broken = yaml.safe_load((ROOT / "examples" / "compose.yaml").read_text())
        node: Any = broken["routes"]
        for step in where:
            node = node[step]
        node[key] = value
        assert list(validator.iter_errors(broken)), (where, key)
        path = ".".join(str(s) if isinstance(s, str) else f"[{s}]" for s in where).replace(".[", "[")
        with pytest.raises(ConfigError, match=re.escape(f"routes.{path}.{key}")):
            load_config(broken)


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
