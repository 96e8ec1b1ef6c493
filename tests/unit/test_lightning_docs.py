"""docs/lightning.md stays true to the code: every rule, profile and preset option is documented."""

from __future__ import annotations

from pathlib import Path

from switchyard.config.presets import PRESETS
from switchyard.serving import GPUS, PROFILES, RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "lightning.md"


def test_docs_cover_every_rule_profile_gpu_and_option() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for rule in RULES:
        assert f"| `{rule.id}` | {rule.severity} |" in doc, rule.id
    for key in (*PROFILES, *GPUS):
        assert f"`{key}`" in doc, key
    for preset in PRESETS.values():
        assert f"`{preset.name}`" in doc
        for option in preset.options:
            assert f"{option.name}: on" in doc
