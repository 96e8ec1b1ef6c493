"""The shared judge machinery: request building, parsing, validation, deadlines, error mapping."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchyard.protocol.errors import (
    ContextWindowExceededError,
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.messages import ReasoningPart, TextPart
from switchyard.protocol.response import ChatResponse
from switchyard.routers.classifier import boundary_problem
from switchyard.routers.jsonschema import check_pointer, check_schema, resolve_pointer, validate
from switchyard.routers.judge import JsonJudge, JudgeFailure, JudgeSettings, extract_json, packaged_schema
from switchyard.testing import ScriptedCall

GOOD = {"crux": "fix the parser", "primary_rule": "SUP-1", "capability_boundary": "supported", "p_solve": 0.8}


def judge(**settings: Any) -> JsonJudge:
    return JsonJudge(
        JudgeSettings("judge", **settings),
        prompt="Forecast.",
        schema=packaged_schema("capability.json"),
        schema_name="capability_forecast",
        check=boundary_problem,
    )


def answer(text: str = "", reasoning: str = "") -> ChatResponse:
    content: list[Any] = []
    if reasoning:
        content.append(ReasoningPart(text=reasoning))
    if text:
        content.append(TextPart(text=text))
    return ChatResponse(id="r", content=content)


def test_json_schema_mode_sends_strict_structured_output_and_no_schema_in_prompt() -> None:
    j = judge()
    req = j.build_request("the view")
    assert req.response_format is not None
    assert req.response_format["type"] == "json_schema"
    assert req.response_format["json_schema"]["strict"] is True
    assert req.response_format["json_schema"]["schema"]["required"] == [
        "crux",
        "primary_rule",
        "capability_boundary",
        "p_solve",
    ]
    assert [m.role for m in req.messages] == ["system", "user"]
    assert req.messages[0].text == "Forecast."
    assert req.messages[1].text == "the view"
    assert req.tools == [] and req.stream is False and req.max_tokens == 4096


def test_json_object_mode_puts_the_schema_in_the_prompt() -> None:
    j = judge(response_format_type="json_object", max_output_tokens=256)
    req = j.build_request("v")
    assert req.response_format == {"type": "json_object"}
    system = req.messages[0].text
    assert system.startswith("Forecast.")
    embedded = system.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(embedded) == packaged_schema("capability.json")
    assert req.max_tokens == 256


def test_valid_verdict_parses() -> None:
    assert judge().parse(answer(json.dumps(GOOD))) == GOOD


def test_one_markdown_fence_is_tolerated() -> None:
    assert judge().parse(answer(f"```json\n{json.dumps(GOOD)}\n```")) == GOOD
    assert judge().parse(answer(f"```\n{json.dumps(GOOD)}```")) == GOOD


@pytest.mark.parametrize(
    "text",
    [
        "definitely not json",
        f"Here you go: {json.dumps(GOOD)}",  # prose around JSON is not accepted in content
        f"```json\n{json.dumps(GOOD)}\n```\n```json\n{json.dumps(GOOD)}\n```",  # two fences
        '{"crux": "unterminated',
    ],
)
def test_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(JudgeFailure) as err:
        judge().parse(answer(text))
    assert err.value.reason == "parse_error"


def test_non_object_json_is_invalid() -> None:
    with pytest.raises(JudgeFailure) as err:
        judge().parse(answer("[1, 2]"))
    assert err.value.reason == "invalid_verdict"


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"p_solve": 1.5}, "above the maximum"),
        ({"p_solve": "0.5"}, "expected number"),
        ({"primary_rule": "SUP-9"}, "is not one of"),
        ({"crux": ""}, "shorter than"),
        ({"extra": 1}, "unexpected property"),
        ({"p_solve": True}, "expected number"),
    ],
)
def test_schema_violations_are_invalid(patch: dict[str, Any], fragment: str) -> None:
    with pytest.raises(JudgeFailure) as err:
        judge().parse(answer(json.dumps({**GOOD, **patch})))
    assert err.value.reason == "invalid_verdict"
    assert fragment in err.value.detail


def test_missing_field_is_invalid() -> None:
    bad = {k: v for k, v in GOOD.items() if k != "p_solve"}
    with pytest.raises(JudgeFailure) as err:
        judge().parse(answer(json.dumps(bad)))
    assert "missing required property 'p_solve'" in err.value.detail


@pytest.mark.parametrize(
    ("rule", "boundary"),
    [("SUP-2", "uncertain"), ("LIM-1", "supported"), ("none", "supported"), ("UNC-1", "unmatched")],
)
def test_rule_and_boundary_must_agree(rule: str, boundary: str) -> None:
    with pytest.raises(JudgeFailure) as err:
        judge().parse(answer(json.dumps({**GOOD, "primary_rule": rule, "capability_boundary": boundary})))
    assert err.value.reason == "inconsistent"


def test_empty_content_fails_unless_reading_reasoning() -> None:
    reply = answer("", reasoning=f"Let me think about {{the task}}. Final: {json.dumps(GOOD)} done.")
    with pytest.raises(JudgeFailure) as err:
        judge().parse(reply)
    assert err.value.reason == "empty"
    assert "verdict_from_reasoning" in err.value.detail
    assert judge(verdict_from_reasoning=True).parse(reply) == GOOD


def test_reasoning_fallback_takes_the_last_object_and_content_still_wins() -> None:
    first = {**GOOD, "p_solve": 0.1, "primary_rule": "LIM-1", "capability_boundary": "unsupported"}
    reply = answer("", reasoning=f"Draft {json.dumps(first)} — revised: {json.dumps(GOOD)}")
    assert judge(verdict_from_reasoning=True).parse(reply) == GOOD
    both = answer(json.dumps(first), reasoning=json.dumps(GOOD))
    assert judge(verdict_from_reasoning=True).parse(both) == first


def test_reasoning_without_any_json_is_a_parse_error() -> None:
    with pytest.raises(JudgeFailure) as err:
        judge(verdict_from_reasoning=True).parse(answer("", reasoning="I am not sure what to say."))
    assert err.value.reason == "parse_error"


async def test_ask_returns_the_verdict_and_sends_one_request() -> None:
    call = ScriptedCall({"judge": [json.dumps(GOOD)]})
    assert await judge().ask(call, "view") == GOOD
    assert call.targets_called() == ["judge"]


async def test_deadline_turns_a_slow_judge_into_a_timeout() -> None:
    call = ScriptedCall({"judge": [json.dumps(GOOD)]}, delays={"judge": 5.0})
    with pytest.raises(JudgeFailure) as err:
        await judge(timeout_s=0.05).ask(call, "view")
    assert err.value.reason == "timeout"


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (UpstreamStatusError("x", upstream_status=503, body=b"secret prompt echo"), "upstream_5xx"),
        (UpstreamStatusError("x", upstream_status=401), "upstream_4xx"),
        (ContextWindowExceededError("x", upstream_status=400), "context_overflow"),
        (UpstreamConnectionError("x"), "transport"),
        (UpstreamTimeoutError("x"), "timeout"),
        (UpstreamProtocolError("x"), "invalid_response"),
    ],
)
async def test_upstream_errors_become_failures(exc: Exception, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(JudgeFailure) as err:
        await judge().ask(ScriptedCall({"judge": [exc]}), "view")
    assert err.value.reason == reason
    assert "secret prompt echo" not in caplog.text


def test_extract_json_strict_and_lenient() -> None:
    assert extract_json('  {"a": 1}  ') == {"a": 1}
    assert extract_json('note {"a": 1}') is None
    assert extract_json('note {"a": {"b": 2}} and {"c": 3} end', lenient=True) == {"c": 3}
    assert extract_json('outer {"a": {"b": 2}} end', lenient=True) == {"a": {"b": 2}}


def test_schema_checker_rejects_what_it_cannot_enforce() -> None:
    check_schema(packaged_schema("capability.json"))
    with pytest.raises(ValueError, match="unsupported keyword"):
        check_schema({"type": "object", "properties": {"a": {"type": "string", "oneOf": []}}})
    with pytest.raises(ValueError, match="unknown type"):
        check_schema({"type": "dict"})
    with pytest.raises(ValueError, match="local"):
        check_schema({"$ref": "http://example.com/schema"})


def test_schema_validation_covers_refs_anyof_arrays_and_types() -> None:
    schema = {
        "type": "object",
        "$defs": {"tier": {"type": "string", "enum": ["weak", "strong"]}},
        "properties": {
            "route": {"$ref": "#/$defs/tier"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "confidence": {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}]},
            "n": {"type": "integer"},
        },
        "required": ["route"],
    }
    check_schema(schema)
    assert validate({"route": "weak", "tags": ["a"], "confidence": None, "n": 3}, schema) == []
    problems = validate({"route": "medium", "tags": ["a", "b", 3], "confidence": 2, "n": 1.5}, schema)
    assert any(p.startswith("/route") for p in problems)
    assert any("at most 2" in p for p in problems)
    assert any(p.startswith("/tags/2") for p in problems)
    assert any("anyOf" in p for p in problems)
    assert any(p.startswith("/n") for p in problems)


def test_json_pointer() -> None:
    doc = {"a": {"b/c": ["x", {"~k": "v"}]}}
    assert resolve_pointer(doc, "/a/b~1c/1/~0k") == "v"
    assert resolve_pointer(doc, "/a/missing") is None
    assert resolve_pointer(doc, "/a/b~1c/7") is None
    assert resolve_pointer(doc, "") == doc
    with pytest.raises(ValueError):
        check_pointer("a/b")
    with pytest.raises(ValueError):
        check_pointer("/a~2")
