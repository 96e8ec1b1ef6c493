"""Reliability keys in the config: defaults, wiring, and every bad value failing at load with its YAML path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchyard.config.build import build_engine
from switchyard.config.load import ConfigError, load_config

BASE = """\
llm_clients:
  local:
    base_url: http://127.0.0.1:9/v1
{client}
targets:
  a: {{client: local, model: m}}
routes:
  r:
    type: passthrough
    target: a
{route}
"""


def write(tmp_path: Path, client: str = "", route: str = "") -> Path:
    path = tmp_path / "router.yaml"
    path.write_text(BASE.format(client=client, route=route), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("client", "route", "expected"),
    [
        (
            "    max_retries: -1",
            "",
            "router.yaml:4: llm_clients.local.max_retries: Input should be greater than or equal to 0",
        ),
        ("    max_retries: 11", "", "llm_clients.local.max_retries: Input should be less than or equal to 10"),
        (
            "    retry: {jitter: 2}",
            "",
            "router.yaml:4: llm_clients.local.retry.jitter: Input should be less than or equal to 1",
        ),
        (
            "    retry: {initial_delay_s: -0.1}",
            "",
            "llm_clients.local.retry.initial_delay_s: Input should be greater than or equal to 0",
        ),
        ("    retry: {multiplier: 0.5}", "", "llm_clients.local.retry.multiplier"),
        (
            "    retry: {initial_delay_s: 3, max_delay_s: 1}",
            "",
            "llm_clients.local.retry: max_delay_s (1.0) must not be below initial_delay_s",
        ),
        (
            "    retry: {max_retry_after: 5}",
            "",
            "llm_clients.local.retry.max_retry_after: unknown key (did you mean 'max_retry_after_s'?)",
        ),
        ("    timeout: {read: 0}", "", "llm_clients.local.timeout.read: Input should be greater than 0"),
        ("    timeout: {total: -1}", "", "llm_clients.local.timeout.total"),
        ("    timeout: {silence: 3}", "", "llm_clients.local.timeout.silence: unknown key"),
        ("    circuit_breaker: {failures: -2}", "", "llm_clients.local.circuit_breaker.failures"),
        (
            "    circuit_breaker: {cooldown_s: 0}",
            "",
            "llm_clients.local.circuit_breaker.cooldown_s: Input should be greater than 0",
        ),
        ("    discover_context_window: maybe", "", "llm_clients.local.discover_context_window"),
        (
            "    litellm_params: {aws_region_name: x}",
            "",
            "llm_clients.local.litellm_params: only allowed with format 'litellm'",
        ),
        (
            "",
            "    fallback_on_auth_error: sometimes",
            "routes.r.fallback_on_auth_error: Input should be a valid boolean",
        ),
    ],
)
def test_bad_values_fail_with_their_path(tmp_path: Path, client: str, route: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, client, route))
    assert expected in str(err.value)


def test_base_url_is_required_except_for_litellm() -> None:
    cfg: dict[str, Any] = {"llm_clients": {"x": {"format": "openai_chat"}}}
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert "llm_clients.x.base_url: required key is missing" in str(err.value)
    load_config({"llm_clients": {"x": {"format": "litellm"}}})


def test_settings_reach_the_targets(tmp_path: Path) -> None:
    client = """\
    max_retries: 4
    retry: {initial_delay_s: 0.1, max_delay_s: 0.5, multiplier: 3, jitter: 0.2, max_retry_after_s: 7}
    circuit_breaker: {failures: 2, cooldown_s: 9}
    discover_context_window: false"""
    loaded = load_config(write(tmp_path, client, "    fallback_on_auth_error: true"))
    engine = build_engine(loaded)
    rel = engine.targets["a"].reliability
    assert rel.retry.max_retries == 4 and rel.retry.multiplier == 3 and rel.retry.max_retry_after_s == 7
    assert rel.retry.jitter == 0.2 and rel.retry.initial_delay_s == 0.1 and rel.retry.max_delay_s == 0.5
    assert rel.breaker.failures == 2 and rel.breaker.cooldown_s == 9
    assert rel.discover_context_window is False
    assert engine.routes["r"].fallback_on_auth_error is True


def test_defaults(tmp_path: Path) -> None:
    engine = build_engine(load_config(write(tmp_path)))
    rel = engine.targets["a"].reliability
    assert rel.retry.max_retries == 2 and rel.retry.max_retry_after_s == 10
    assert rel.breaker.failures == 5 and rel.breaker.cooldown_s == 30
    assert engine.routes["r"].fallback_on_auth_error is False
