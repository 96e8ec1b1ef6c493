"""The fake decision models refuse what System One refuses and answer in its documented shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchyard.testing.fake_common import FakeModel
from switchyard.testing.fake_decision import distribution, request_problems, rlcd_turn, system_one_answer
from switchyard.testing.simulated import simulated_brain

CHOICE = {"type": "choice", "instructions": "Who fits?", "criteria": {"easy": "typo fixes", "hard": "race conditions"}}


def body(**overrides: Any) -> dict[str, Any]:
    return {"model": "jev-latest", "state": "fix a typo", "questions": {"route": CHOICE}, **overrides}


@pytest.mark.parametrize(
    ("request_body", "loc"),
    [
        ([], ["body"]),
        ({"model": "jev-latest", "questions": {"route": CHOICE}}, ["body", "state"]),
        (body(state=3), ["body", "state"]),
        (body(state=True), ["body", "state"]),
        (body(questions={}), ["body", "questions"]),
        (body(questions={"route id": CHOICE}), ["body", "questions", "route id"]),
        (
            body(questions={"route": {**CHOICE, "criteria": {"only": "one"}}}),
            ["body", "questions", "route", "criteria"],
        ),
        (body(questions={"route": {**CHOICE, "instructions": ""}}), ["body", "questions", "route", "instructions"]),
        (body(questions={"route": {**CHOICE, "type": "pick"}}), ["body", "questions", "route", "type"]),
        (
            body(questions={"route": {**CHOICE, "criteria": {"a b": "x", "c": "y"}}}),
            ["body", "questions", "route", "criteria", "a b"],
        ),
    ],
)
def test_invalid_requests_are_refused_at_their_location(request_body: Any, loc: list[Any]) -> None:
    problems = request_problems(request_body)
    assert [p["loc"] for p in problems][:1] == [loc]


@pytest.mark.parametrize("state", ["text", {"ticket": "x"}, ["a", "b"], None])
def test_valid_states(state: Any) -> None:
    assert request_problems(body(state=state)) == []


def test_answer_shape() -> None:
    answer = system_one_answer(
        body(
            state="fix the race conditions",
            questions={"route": CHOICE, "ok": {"type": "noul", "instructions": "Fine?"}},
        )
    )
    assert answer["model"] == "jev-1.13.0"
    route = answer["answers"]["route"]
    assert route["type"] == "choice" and route["choice"] == "hard"
    assert sum(route["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    assert route["confidence"] == route["probabilities"]["hard"]
    assert answer["answers"]["ok"] == {"type": "noul", "noul": 0.5}
    assert set(answer["usage"]) == {"input_tokens", "output_tokens"}


def test_marker_scripts_the_winner() -> None:
    assert distribution("do it [route:easy@0.35]", {"easy": "", "mid": "", "hard": ""}) == {
        "easy": pytest.approx(0.35),
        "mid": pytest.approx(0.325),
        "hard": pytest.approx(0.325),
    }


def test_simulated_upstream_answers_rlcd_requests() -> None:
    request = {
        "model": "decision-small",
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": "Pick.\n\n- `easy`: typo fixes\n- `hard`: race conditions\n\nprobabilities"},
            {"role": "user", "content": "debug the race conditions in the scheduler"},
        ],
    }
    turn = simulated_brain(request, FakeModel("decision-small"))
    verdict = json.loads(turn.text)
    assert verdict["target"] == "hard"
    assert [e["option"] for e in verdict["probabilities"]] == ["easy", "hard"]
    assert json.loads(rlcd_turn(request, "[route:easy] x").text)["target"] == "easy"
