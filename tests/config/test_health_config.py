"""``health_check`` and ``markup_leak`` in the config: defaults, wiring, and bad values with their YAML path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchyard.config.build import build_engine
from switchyard.config.load import ConfigError, load_config

BASE = """\
llm_clients:
  local:
    format: {fmt}
    base_url: http://127.0.0.1:9/v1
{client}
targets:
  a: {{client: local, model: m}}
routes:
  r: {{type: passthrough, target: a}}
"""


def write(tmp_path: Path, client: str = "", fmt: str = "openai_chat") -> Path:
    path = tmp_path / "router.yaml"
    path.write_text(BASE.format(client=client, fmt=fmt), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("client", "fmt", "expected"),
    [
        (
            "    health_check: {path: health}",
            "openai_chat",
            "router.yaml:5: llm_clients.local.health_check.path: must start with '/'",
        ),
        (
            "    health_check: {interval_s: 0.2}",
            "openai_chat",
            "llm_clients.local.health_check.interval_s: Input should be greater than or equal to 1",
        ),
        (
            "    health_check: {interval_s: 2, timeout_s: 2}",
            "openai_chat",
            "llm_clients.local.health_check.timeout_s: must be below interval_s (2), got 2",
        ),
        ("    health_check: {timeout_s: 0}", "openai_chat", "llm_clients.local.health_check.timeout_s"),
        (
            "    health_check: {every: 10}",
            "openai_chat",
            "llm_clients.local.health_check.every: unknown key",
        ),
        (
            "    markup_leak: sometimes",
            "openai_chat",
            "router.yaml:5: llm_clients.local.markup_leak: Input should be 'off', 'flag' or 'fallback'",
        ),
        (
            "    markup_leak: fallback",
            "anthropic_messages",
            "llm_clients.local.markup_leak: only Chat-format upstreams (format 'openai_chat'",
        ),
        (
            "    health_check: {interval_s: 10}",
            "litellm",
            "llm_clients.local.health_check: 'litellm' clients have no health endpoint to probe",
        ),
    ],
)
def test_bad_values_fail_with_their_path(tmp_path: Path, client: str, fmt: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, client, fmt))
    assert expected in str(err.value)


def test_defaults(tmp_path: Path) -> None:
    rel = build_engine(load_config(write(tmp_path))).targets["a"].reliability
    assert rel.markup_leak == "flag"  # Chat upstreams are checked by default
    assert rel.health_check.enabled and rel.health_check.path is None and rel.health_check.interval_s is None
    assert rel.health_check.timeout_s == 1.0
    env = {"K": "x"}
    other = load_config(write(tmp_path, "    api_key_env: K", "anthropic_messages"), env=env)
    assert build_engine(other, env=env).targets["a"].reliability.markup_leak == "off"


def test_settings_reach_the_targets(tmp_path: Path) -> None:
    client = "    markup_leak: fallback\n    health_check: {path: /ready, interval_s: 15, timeout_s: 2}"
    engine = build_engine(load_config(write(tmp_path, client)))
    rel = engine.targets["a"].reliability
    assert rel.markup_leak == "fallback"
    assert (rel.health_check.path, rel.health_check.interval_s, rel.health_check.timeout_s) == ("/ready", 15, 2)
    assert engine.monitor.background


def test_bare_yaml_off_means_off(tmp_path: Path) -> None:
    rel = build_engine(load_config(write(tmp_path, "    markup_leak: off"))).targets["a"].reliability
    assert rel.markup_leak == "off"


def test_disabled_probes(tmp_path: Path) -> None:
    cfg: dict[str, Any] = {
        "llm_clients": {"x": {"format": "litellm", "health_check": {"enabled": False}}},
        "targets": {"t": {"client": "x", "model": "openai/gpt-4o"}},
    }
    load_config(cfg)  # allowed: nothing to probe
