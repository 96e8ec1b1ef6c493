"""``switchyard fake-upstream`` (its simulated models) and ``switchyard config import`` (the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchyard.cli import build_parser, main
from switchyard.protocol.messages import Message
from switchyard.protocol.response import ChatResponse
from switchyard.routers.advisor import parse_verdict, review_transcript
from switchyard.testing import serve_fake
from switchyard.testing.simulated import KEEP_RECEIVED, SimulatedUpstream, judge_turn, kind_of, simulated_brain

FIXTURES = Path(__file__).resolve().parents[1] / "config" / "nemo_toml"


def test_model_names_pick_the_profile() -> None:
    assert kind_of("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4") == "efficient"
    assert kind_of("gpt-5-mini") == "efficient"
    assert kind_of("claude-opus-4-8") == "frontier"
    up = SimulatedUpstream(latency_scale=2)
    assert up.model("judge-sim").first_byte_s == pytest.approx(0.04)
    assert up.model("frontier-large").first_byte_s == pytest.approx(0.3)


def _judge(schema: dict[str, Any], user: str, system: str = "") -> Any:
    body = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}},
    }
    return json.loads(judge_turn(body).text)


def test_judge_verdicts() -> None:
    capability = {"type": "object", "properties": {"p_solve": {"type": "number"}}}
    assert _judge(capability, "add a docstring")["p_solve"] == 0.85
    assert _judge(capability, "debug this traceback")["p_solve"] == 0.3
    escalation = {"type": "object", "properties": {"escalate": {"type": "boolean"}, "reason": {"type": "string"}}}
    assert _judge(escalation, "## Turn under review\n[tool] FAILED test_x")["escalate"] is True
    assert _judge(escalation, "## Turn under review\n[assistant] done, 3 passed")["escalate"] is False
    custom = {
        "type": "object",
        "properties": {"route": {"enum": ["weak", "strong"]}, "confidence": {"type": "number", "maximum": 1}},
    }
    assert _judge(custom, "reset my password") == {"route": "weak", "confidence": 0.8}
    assert _judge(custom, "diagnose the outage")["route"] == "strong"


def _review(turn_text: str) -> str:
    """The simulated advisor's reply to the transcript ``type: advisor`` really sends."""
    messages = [
        Message.model_validate({"role": "user", "content": [{"type": "text", "text": "fix the week-date parser"}]}),
        Message.model_validate({"role": "user", "content": [{"type": "text", "text": "earlier run: FAILED x"}]}),
    ]
    turn = ChatResponse.model_validate({"id": "t", "content": [{"type": "text", "text": turn_text}]})
    body = {
        "model": "claude-opus-4-8",
        "messages": [
            {"role": "system", "content": "review"},
            {"role": "user", "content": review_transcript(messages, turn, 4000)},
        ],
    }
    return simulated_brain(body, SimulatedUpstream().model("claude-opus-4-8")).text


def test_advisor_reviews() -> None:
    # A failure in the conversation before the turn does not count: only the turn under review.
    assert _review("Fixed it; all 12 tests pass.") == "APPROVE"
    redo = _review("tools said: FAILED tests/test_dates.py::test_week_date")
    assert redo.startswith("REDO: ")
    verdict = parse_verdict(ChatResponse.model_validate({"id": "a", "content": [{"type": "text", "text": redo}]}))
    assert verdict is not None and verdict.kind == "redo" and "run the tests again" in verdict.plan


def test_any_model_answers_all_three_apis_and_memory_stays_bounded() -> None:
    app = SimulatedUpstream(latency_scale=0)
    srv = serve_fake(app)
    try:
        chat = httpx.post(
            f"{srv.base_url}/chat/completions",
            json={"model": "some-new-model", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert chat.json()["choices"][0]["message"]["content"] == "[some-new-model] hi"
        messages = httpx.post(
            f"{srv.base_url}/messages",
            json={"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert messages.json()["content"][0]["text"] == "[claude-x] hi"
        responses = httpx.post(f"{srv.base_url}/responses", json={"model": "gpt-x", "input": "hi"})
        assert "[gpt-x] hi" in responses.text
        assert (
            httpx.post(f"{srv.base_url}/chat/completions", json={"model": "fail-503", "messages": []}).status_code
            == 503
        )
        listed = {m["id"] for m in httpx.get(f"{srv.base_url}/models").json()["data"]}
        assert {"nemotron-3.5-lightning", "some-new-model"} <= listed
        with httpx.Client() as client:
            for _ in range(KEEP_RECEIVED + 20):
                client.post(f"{srv.root_url}/tokenize", json={"model": "m", "messages": []})
        assert len(app.received) == KEEP_RECEIVED
    finally:
        srv.stop()


def test_fake_upstream_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fake-upstream", "--help"])
    text = capsys.readouterr().out
    for needle in (
        "/v1/messages/count_tokens",
        "/v1/responses",
        "use a tool",
        "response_format",
        "fail-429",
        "stall-mid",
    ):
        assert needle in text
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:9000" in text


def test_fake_upstream_reports_a_busy_port(capsys: pytest.CaptureFixture[str]) -> None:
    srv = serve_fake(SimulatedUpstream())
    try:
        assert main(["fake-upstream", "--port", str(srv.port)]) == 1
    finally:
        srv.stop()
    assert f"cannot listen on 127.0.0.1:{srv.port}" in capsys.readouterr().err


def test_config_import_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_IMPORT_TEST_KEY", "k")
    assert main(["config", "import", str(FIXTURES / "llm_classifier.toml")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# Converted from llm_classifier.toml") and "mode: escalation" in out
    assert err == ""
    target = tmp_path / "router.yaml"
    assert main(["config", "import", str(FIXTURES / "basic.toml"), "-o", str(target), "--strict"]) == 3
    err = capsys.readouterr().err
    assert "not carried over: routes.smoke: noop routes" in err
    assert main(["validate", str(target)]) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[targets]\n[routes.r]\nid = "r"\ntype = "passthrough"\ntarget = "ghost"\n')
    assert main(["config", "import", str(bad)]) == 1
    assert "ghost" in capsys.readouterr().err
    assert main(["config", "import", str(tmp_path / "missing.toml")]) == 1
    assert "cannot read" in capsys.readouterr().err
