"""The llm_classifier's hooks for offline evaluation: tiers and a calibratable threshold."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from switchyard.cli import main
from switchyard.routers.classifier import Thresholds
from switchyard.routers.llm_classifier import CapabilitySpec, EscalationSpec

BASE = {"type": "llm_classifier", "classifier_target": "judge", "strong_target": "big", "weak_target": "small"}


def test_capability_declares_tiers_and_flat_threshold() -> None:
    spec = CapabilitySpec.model_validate({**BASE, "base_threshold": 0.6})
    assert spec.tiers() == {"capable": "big", "efficient": "small"}
    assert spec.threshold_key() == "base_threshold"


def test_stepped_thresholds_are_not_calibratable() -> None:
    spec = CapabilitySpec.model_validate({**BASE, "base_threshold": 0.5, "threshold_step": 0.1})
    assert spec.threshold_key() is None


def test_threshold_for_score_sends_capable_exactly_when_score_reaches_t() -> None:
    spec = CapabilitySpec.model_validate({**BASE, "base_threshold": 0.5})
    rng = random.Random(3)
    for _ in range(200):
        t = rng.random()
        policy = Thresholds(spec.threshold_for_score(t))
        p_solve = rng.random()
        score = 1.0 - p_solve
        if abs(score - t) < 1e-6:
            continue
        capable = p_solve < policy.threshold("supported")
        assert capable == (score >= t), (t, p_solve)


def test_escalation_declares_tiers() -> None:
    spec = EscalationSpec.model_validate({**BASE, "mode": "escalation"})
    assert spec.tiers() == {"capable": "big", "efficient": "small"}


def test_calibrate_writes_base_threshold_from_a_decision_log(tmp_path: Path) -> None:
    """`switchyard calibrate` on a classifier route sets base_threshold = 1 - score threshold."""
    config = tmp_path / "router.yaml"
    config.write_text(
        "llm_clients:\n  local: {format: openai_chat, base_url: 'http://127.0.0.1:9/v1'}\n"
        "targets:\n  big: {client: local, model: b}\n  small: {client: local, model: s}\n"
        "  judge: {client: local, model: j}\n"
        "routes:\n  agent:\n    type: llm_classifier\n    classifier_target: judge\n"
        "    strong_target: big\n    weak_target: small\n    base_threshold: 0.5  # judge's bar\n"
    )
    log = tmp_path / "decisions.jsonl"
    scores = [i / 100 for i in range(100)]
    log.write_text(
        "".join(json.dumps({"route": "agent", "score": s, "selected": "small", "status": 200}) + "\n" for s in scores)
    )
    out = tmp_path / "calibrated.yaml"
    argv = ["calibrate", "-c", str(config), "--route", "agent", "--decision-log", str(log)]
    assert main([*argv, "--capable-share", "0.3", "--write", str(out)]) == 0
    written = yaml.safe_load(out.read_text())["routes"]["agent"]["base_threshold"]
    # 30 of 100 scores at or above t means t in (0.69, 0.70]; the judge's bar is 1 - t.
    assert 0.30 <= written < 0.31
    assert "# judge's bar" in out.read_text()
    policy = Thresholds(written)
    capable = sum(1 for s in scores if (1 - s) < policy.threshold("supported"))
    assert capable == 30
