"""Verification-gated answers: the ``verify:`` block of a route and its mechanical checks.

Layer: ``routers`` — imports ``protocol`` and :mod:`switchyard.routers.jsonschema`; pure.

The efficient model answers first; before its answer is released, cheap checks look at it:

* ``tool_arguments`` — every tool call names a tool the request offered, and its arguments are
  a JSON object valid against that tool's parameter schema;
* ``response_schema`` — when the request asked for structured output (``response_format``
  ``json_schema`` or ``json_object``), the answer's text is JSON of that shape;
* ``regex`` — the answer's text matches (or, with ``expect: no_match``, does not match) a
  pattern;
* ``hook`` — a Python callable, by import path (``package.module:function``);
* ``http`` — an HTTP endpoint that receives the request and the answer as JSON.

The first three are here (no I/O); the engine (:mod:`switchyard.engine.verify`) runs them,
and the hook and HTTP checks that ``config`` builds, and acts on the mode.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, field_validator, model_validator

from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.jsonschema import validate
from switchyard.routers.patterns import checked_pattern

VerifyMode = Literal["shadow", "evaluate", "active"]
CheckType = Literal["tool_arguments", "response_schema", "regex", "hook", "http"]

_MAX_PROBLEMS = 3  # a failure names its first few problems: enough to act on, short in records


class VerifyCheck(BaseModel):
    """One check of a route's ``verify.checks`` list (a bare string is ``{type: <string>}``).

    Attributes:
        type: ``tool_arguments``, ``response_schema``, ``regex``, ``hook`` or ``http``.
        name: How records name the check (default: its type).
        pattern: ``regex``: the expression searched in the answer's text.
        expect: ``regex``: ``match`` (the answer must contain it) or ``no_match``.
        callable: ``hook``: ``package.module:function``, called with ``(request, response)``
            (IR objects); it returns ``True``/``None`` (pass), ``False`` or a string (fail,
            the string is the reason), and may be a coroutine function.
        url: ``http``: endpoint that gets ``POST {"request": …, "response": …}`` (IR JSON) and
            answers ``{"pass": bool, "reason": str}``.
        timeout_s: ``hook``/``http``: longest wait for the verdict.
        on_error: ``hook``/``http``: what a check that raised, timed out or answered nonsense
            counts as: ``fail`` (default: an unverified answer is not released) or ``pass``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    type: CheckType
    name: str | None = None
    pattern: str | None = None
    expect: Literal["match", "no_match"] = "match"
    callable: str | None = None
    url: str | None = None
    timeout_s: PositiveFloat = 5.0
    on_error: Literal["fail", "pass"] = "fail"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else checked_pattern(value)

    @model_validator(mode="after")
    def _keys_of_type(self) -> VerifyCheck:
        needs = {"regex": "pattern", "hook": "callable", "http": "url"}
        for kind, key in needs.items():
            given = getattr(self, key) is not None
            if self.type == kind and not given:
                raise ValueError(f"type {kind!r} needs '{key}'")
            if self.type != kind and given:
                raise ValueError(f"'{key}' belongs to type {kind!r}, not {self.type!r}")
        if self.callable is not None and ":" not in self.callable:
            raise ValueError(f"callable must be 'package.module:function', got {self.callable!r}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an absolute http(s) URL, got {self.url!r}")
        return self

    @property
    def label(self) -> str:
        """The check's name in records."""
        return self.name or self.type


class VerifySpec(BaseModel):
    """A route's ``verify:`` block.

    Attributes:
        mode: ``shadow`` (check and record), ``evaluate`` (check, record, and on a failure also
            ask the capable model, recorded for comparison, while the efficient answer is
            served) or ``active`` (on a failure the capable model answers instead).
        efficient: The target whose answers are checked (default: the route's efficient tier).
        capable: The target that answers when a check fails (default: the route's capable tier).
        checks: What to check, in order; the first failure decides.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    mode: VerifyMode = "active"
    efficient: str | None = None
    capable: str | None = None
    checks: list[VerifyCheck] = Field(
        default_factory=lambda: [VerifyCheck(type="tool_arguments"), VerifyCheck(type="response_schema")],
        min_length=1,
    )

    # The schema says what the YAML may hold: a check, or a check's type as shorthand.
    @field_validator("checks", mode="before", json_schema_input_type=list[VerifyCheck | CheckType])
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"type": item} if isinstance(item, str) else item for item in value]
        return value


# -- the mechanical checks ------------------------------------------------------------------


def check_tool_arguments(request: ChatRequest, response: ChatResponse) -> str | None:
    """Why the answer's tool calls are malformed, or ``None`` when they are fine."""
    tools = {tool.name: tool for tool in request.tools}
    problems: list[str] = []
    for call in response.tool_calls:
        tool = tools.get(call.name)
        if tool is None:
            problems.append(f"{call.name}: no such tool in the request")
            continue
        if call.kind == "custom" or tool.kind == "custom":
            continue  # free-form input: no schema to hold it to
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            problems.append(f"{call.name}: arguments are not JSON ({exc.msg} at {exc.pos})")
            continue
        if not isinstance(args, dict):
            problems.append(f"{call.name}: arguments are not a JSON object")
            continue
        if tool.parameters:
            problems += [f"{call.name}: {p}" for p in _validate(args, tool.parameters)]
    return "; ".join(problems[:_MAX_PROBLEMS]) or None


def check_response_schema(request: ChatRequest, response: ChatResponse) -> str | None:
    """Why the answer's text does not fit the requested structured output, or ``None``."""
    fmt = request.response_format or {}
    kind = fmt.get("type")
    if kind not in ("json_schema", "json_object") or response.tool_calls:
        return None  # nothing structured was asked for (or the model called a tool instead)
    try:
        value = json.loads(response.text)
    except json.JSONDecodeError as exc:
        return f"answer is not JSON ({exc.msg} at {exc.pos})"
    if kind == "json_object":
        return None if isinstance(value, dict) else "answer is not a JSON object"
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        return None
    return "; ".join(_validate(value, schema)[:_MAX_PROBLEMS]) or None


def check_regex(pattern: re.Pattern[str], expect: str, response: ChatResponse) -> str | None:
    """Why the answer's text fails the regex check (answers without text are not checked)."""
    text = response.text
    if not text:
        return None
    found = pattern.search(text) is not None
    if expect == "match" and not found:
        return f"text does not match {pattern.pattern!r}"
    if expect == "no_match" and found:
        return f"text matches {pattern.pattern!r}"
    return None


def _validate(value: Any, schema: dict[str, Any]) -> list[str]:
    try:
        return validate(value, schema)
    except (re.error, RecursionError, TypeError, ValueError):
        # A schema this checker cannot read gives no verdict: the answer is not held against it.
        return []
