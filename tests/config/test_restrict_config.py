"""``labels``, ``restrict:`` and ``require_labels`` in the config: errors name their YAML path."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.config.load import ConfigError, load_config
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.routers.restrict import RestrictPolicy, RestrictRule

BASE: dict[str, Any] = {
    "llm_clients": {"v": {"format": "openai_chat", "base_url": "http://127.0.0.1:8000/v1"}},
    "targets": {"a": {"client": "v", "model": "m", "labels": ["onprem"]}, "b": {"client": "v", "model": "n"}},
}


def _route(**extra: Any) -> dict[str, Any]:
    return {**BASE, "routes": {"r": {"type": "passthrough", "target": "b", "fallbacks": ["a"], **extra}}}


def _issues(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(data)
    return str(caught.value)


def test_a_rule_needs_exactly_one_check() -> None:
    both = _issues(_route(restrict=[{"detector": "emails", "pattern": "x", "require": ["onprem"]}]))
    assert "routes.r.restrict[0]" in both and "exactly one of 'detector' and 'pattern'" in both
    neither = _issues(_route(restrict=[{"require": ["onprem"]}]))
    assert "routes.r.restrict[0]" in neither


def test_a_bad_pattern_is_named() -> None:
    text = _issues(_route(restrict=[{"pattern": "(unclosed", "require": ["onprem"]}]))
    assert "routes.r.restrict[0].pattern" in text and "not a valid regular expression" in text


def test_labels_with_commas_or_blank_are_refused() -> None:
    data = {**BASE, "targets": {**BASE["targets"], "a": {"client": "v", "model": "m", "labels": ["on,prem"]}}}
    assert "targets.a.labels" in _issues(data)
    key = {"name": "k", "hash": "sha256:" + "0" * 64, "require_labels": [" "]}
    assert "server.api_keys[0].require_labels" in _issues({**_route(), "server": {"api_keys": [key]}})


def test_a_label_no_target_carries_is_a_warning() -> None:
    loaded = load_config(_route(restrict=[{"detector": "secrets", "require": ["eu"]}]))
    [warning] = [w for w in loaded.warnings if "label" in w.message]
    assert warning.path == "routes.r.restrict[0].require" and "eu" in warning.message
    assert not [w for w in load_config(_route(restrict=[{"detector": "secrets", "require": ["onprem"]}])).warnings]


def _hits(detector: str, text: str) -> int:
    policy = RestrictPolicy([RestrictRule(detector=detector, require=["x"])])  # type: ignore[arg-type]
    found = policy.matches(ChatRequest(messages=[Message.of("user", text)]))
    return found[0][1] if found else 0


@pytest.mark.parametrize(
    "text",
    [
        "key sk-ant-api03-" + "a1B2" * 10,
        "OPENAI_API_KEY=sk-proj-" + "Zx9_" * 10,
        "aws AKIAIOSFODNN7EXAMPLE here",
        "token ghp_" + "a" * 36,
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        'password = "correct-horse-battery-staple"',
        "nvapi-" + "q" * 40,
    ],
)
def test_the_secrets_detector_finds_credentials(text: str) -> None:
    assert _hits("secrets", text) == 1
    assert _hits("api_keys", text) == 1


@pytest.mark.parametrize(
    "text",
    ["ask the sk-learn docs", "the password is short", "AKIA is a prefix", "task-1234 and risk-management"],
)
def test_the_secrets_detector_leaves_prose_alone(text: str) -> None:
    assert _hits("secrets", text) == 0


def test_the_email_detector() -> None:
    assert _hits("emails", "mail jane.doe+ops@mail.example.co.uk and bob@example.com") == 2
    assert _hits("emails", "ping @here about user@localhost") == 0
