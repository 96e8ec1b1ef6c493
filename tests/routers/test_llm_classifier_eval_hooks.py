"""The llm_classifier's hooks for offline evaluation: tiers and a calibratable threshold."""

from __future__ import annotations

import random

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
