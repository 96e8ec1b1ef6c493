"""The Makefile installs exactly the agent versions the matrix and the fixtures claim."""

from __future__ import annotations

import json
import re

import launchers


def _pins() -> dict[str, str]:
    text = (launchers.ROOT / "tests" / "agents" / "pins.mk").read_text()
    found: dict[str, str] = {}
    for name, version in re.findall(r"(@?[\w./-]+?)(?:@|==)(\d[\w.]*)", text):
        found[name.rsplit("/", 1)[-1]] = version
    return found


def test_pins_match_the_launchers() -> None:
    pins = _pins()
    expected = {"claude-code", "codex", "qwen-code", "hermes-agent", "openai-agents", "litellm", "smolagents"}
    assert expected <= set(pins)
    named = {
        **pins,
        "hermes": pins["hermes-agent"],
        "anthropic-sdk-py": pins["anthropic"],
        "anthropic-sdk-js": pins["sdk"],  # @anthropic-ai/sdk
    }
    for agent, version in launchers.VERSIONS.items():
        assert named[agent] == version, agent


def test_recorded_fixtures_name_a_pinned_version() -> None:
    # Recorded ones only: hand-written fixtures (synthetic-*.json) have no agent version.
    fixtures = [
        p
        for p in sorted((launchers.ROOT / "tests" / "fixtures" / "agents").glob("*.json"))
        if not p.name.startswith("synthetic-")
    ]
    assert fixtures
    for path in fixtures:
        doc = json.loads(path.read_text())
        assert doc["version"] == launchers.VERSIONS[doc["agent"]], path.name
        assert not {"authorization", "x-api-key", "api-key"} & set(doc["headers"]), path.name
        assert "/tmp/sy-" not in path.read_text(), f"{path.name} leaks a temp path"


def test_every_test_docs_agents_names_exists() -> None:
    """docs/agents.md backs each recipe with a CI test; the names it gives must exist."""
    import test_agent_matrix

    doc = (launchers.ROOT / "docs" / "agents.md").read_text()
    named = set(re.findall(r"`(test_[a-z_]+)", doc))
    assert {"test_claude_code", "test_codex", "test_qwen_code", "test_hermes"} <= named
    for name in named:
        assert callable(getattr(test_agent_matrix, name, None)), name
    for version in launchers.VERSIONS.values():
        assert version in doc, f"docs/agents.md does not name pinned version {version}"


def test_constraints_agree_with_the_pins() -> None:
    pins = _pins()
    for venv, names in (
        ("py", ("anthropic", "openai-agents", "langchain-openai", "langchain-anthropic", "litellm", "smolagents")),
        ("hermes", ("hermes-agent",)),
    ):
        text = (launchers.ROOT / "tests" / "agents" / f"constraints-{venv}.txt").read_text()
        for name in names:
            assert f"\n{name}=={pins[name]}\n" in text, (venv, name)
