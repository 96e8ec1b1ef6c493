"""A ``decision_model`` route records ``details.p_success`` — the decision model's probability
that the route's cheapest target is good enough — so ``switchyard eval`` scores its calibration
(ECE) against the recorded outcomes, as it does a learned route's (issue 48 review)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _routing_helpers import context, request, user

from switchyard.config.load import load_config
from switchyard.eval.dataset import Dataset
from switchyard.eval.evaluate import run_eval
from switchyard.protocol.targets import Price, TargetInfo
from switchyard.routers.base import BuildContext
from switchyard.routers.decision.spec import DecisionModelSpec
from switchyard.testing import FakeUpstream, ScriptedCall, serve_fake


def _route(targets: dict[str, TargetInfo]) -> Any:
    block = {"type": "decision_model", "decision_target": "judge", "labels": {"easy": "weak", "hard": "strong"}}
    spec = DecisionModelSpec.model_validate({**block, "default_target": "weak", "min_probability": 0.9})
    return spec.build(BuildContext(route="r", targets=targets))


def _verdict(easy: float) -> str:
    options = [{"option": "easy", "probability": easy}, {"option": "hard", "probability": 1 - easy}]
    return json.dumps({"target": "easy" if easy >= 0.5 else "hard", "probabilities": options})


async def test_the_cheapest_targets_probability_is_its_p_success_even_below_the_cutoff() -> None:
    targets = {
        "weak": TargetInfo(name="weak", model="w", price=Price(input_per_mtok=0.1, output_per_mtok=0.4)),
        "strong": TargetInfo(name="strong", model="s", price=Price(input_per_mtok=3, output_per_mtok=15)),
        "judge": TargetInfo(name="judge", model="j"),
    }
    decided = await _route(targets).route(
        request(user("rename a variable")), context(), ScriptedCall({"judge": [_verdict(0.7)]})
    )
    assert decided.source == "fail_open"  # 0.7 < min_probability 0.9: the default serves, the verdict is kept
    assert decided.details["p_success"] == {"weak": 0.7}
    tied = {
        **targets,
        "strong": TargetInfo(name="strong", model="s", price=Price(input_per_mtok=0.4, output_per_mtok=0.1)),
    }
    decided = await _route(tied).route(request(user("x")), context(), ScriptedCall({"judge": [_verdict(0.7)]}))
    assert "p_success" not in decided.details  # no target is cheapest alone: nothing to claim


async def test_switchyard_eval_scores_a_decision_models_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TYPESAFE_KEY", "test-key")  # the fake decision model wants a key
    data = tmp_path / "items.jsonl"
    with data.open("w") as fh:
        for i in range(20):
            easy = i % 2 == 0  # the fake decision model reads the marker: [route:easy@0.8] or [route:hard@0.8]
            prompt = f"task {i} [route:{'easy' if easy else 'hard'}@0.8]"
            models = {"small": {"correct": easy}, "big": {"correct": True}}
            fh.write(json.dumps({"id": f"i{i}", "prompt": prompt, "models": models}) + "\n")
    server = serve_fake(FakeUpstream())
    try:
        config = {
            "llm_clients": {
                "local": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
                "ts": {
                    "format": "system_one",
                    "base_url": f"http://127.0.0.1:{server.port}/v1",
                    "api_key_env": "FAKE_TYPESAFE_KEY",
                },
            },
            "targets": {
                "weak": {"client": "local", "model": "small", "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}},
                "strong": {"client": "local", "model": "big", "price": {"input_per_mtok": 3, "output_per_mtok": 15}},
                "jev": {"client": "ts", "model": "jev-latest"},
            },
            "routes": {
                "decide": {
                    "type": "decision_model",
                    "decision_target": "jev",
                    "labels": {"easy": "weak", "hard": "strong"},
                    "default_target": "weak",
                }
            },
        }
        result = await run_eval(
            load_config(config), "decide", Dataset(data), mapping={"weak": "small", "strong": "big"}, progress=False
        )
    finally:
        server.stop()
    calibration = result.calibration
    assert calibration is not None and calibration.n == 20  # one P(success) per item: the cheap target's
    # P(weak good enough) is 0.8 on the easy half (all resolved) and 0.2 on the hard half (none)
    assert calibration.mean_p == pytest.approx(0.5) and calibration.rate == pytest.approx(0.5)
    assert calibration.ece == pytest.approx(0.2)
