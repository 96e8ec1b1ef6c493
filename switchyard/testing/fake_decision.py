"""Fake decision models: a System One-style typed-choice API and an RLCD verdict brain.

Used by the fake upstream (``POST /v1/systemone``, and judge calls that ask for an RLCD verdict),
so ``decision_model`` routes run against ``switchyard fake-upstream`` and in tests. The request
checks follow TypeSafe's documented System One shape (docs/fakes.md cites the sources):

* the body is ``{"model", "state", "questions"}``; ``state`` is text, a JSON object or array, or
  null (numbers and booleans are refused); ``questions`` holds 1 to 64 questions keyed by 1 to
  64 ASCII letters, digits, ``_`` or ``-``;
* a ``choice`` question needs ``instructions`` (text) and ``criteria``: 2 to 64 options, label →
  description; a ``noul`` question needs ``instructions`` (its ``criteria`` is optional);
* a request without ``Authorization: Bearer …`` gets 401; an invalid one gets 422 with FastAPI's
  ``{"detail": [{"loc", "msg", "type"}]}``.

The answer is ``{"model", "answers": {id: {"type": "choice", "choice", "confidence",
"probabilities"}}, "usage": {"input_tokens", "output_tokens"}}``, ``jev-latest`` answering as
``jev-1.13.0``. Score questions are not modelled (a 422 says so).

Which option wins is deterministic: a ``[route:LABEL]`` (or ``[route:LABEL@0.35]``) marker in
the state gives that label 0.9 (or the stated probability) and shares the rest equally; without
one, options whose label or description share words with the state score higher.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from switchyard.testing.fake_common import Turn, estimate_tokens, last_user_text

MODEL_ALIASES = {"jev-latest": "jev-1.13.0"}
"""Aliases the fake resolves the way TypeSafe reports the release that answered."""

_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MARKER = re.compile(r"\[route:(?P<label>[A-Za-z0-9_-]+)(?:@(?P<p>[01](?:\.\d+)?|\.\d+))?\]")
_WORD = re.compile(r"[a-z0-9]+")
_OPTION_LINE = re.compile(r"^- `(?P<label>[^`]+)`: (?P<meaning>.*)$", re.MULTILINE)
_MAX_QUESTIONS = 64
_MAX_OPTIONS = 64


def distribution(state: str, options: Mapping[str, str]) -> dict[str, float]:
    """The fake's probability for each option given the ``state`` text (see the module doc)."""
    labels = list(options)
    marked = _MARKER.search(state)
    if marked and marked.group("label") in options:
        top = float(marked.group("p")) if marked.group("p") else 0.9
        rest = (1.0 - top) / (len(labels) - 1) if len(labels) > 1 else 0.0
        return {label: (top if label == marked.group("label") else rest) for label in labels}
    words = set(_WORD.findall(state.lower()))
    weights = {
        label: 1.0 + 2.0 * len(words & set(_WORD.findall(f"{label} {meaning}".lower())))
        for label, meaning in options.items()
    }
    total = sum(weights.values())
    return {label: w / total for label, w in weights.items()}


def _best(dist: Mapping[str, float]) -> str:
    return max(dist, key=lambda label: dist[label])  # ties: the first offered


def _problem(loc: list[Any], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": kind}


def request_problems(body: Any) -> list[dict[str, Any]]:
    """What the real API would refuse in ``body``, in FastAPI's ``detail`` shape (empty: valid)."""
    if not isinstance(body, dict):
        return [_problem([], "Input should be a valid dictionary", "dict_type")]
    problems: list[dict[str, Any]] = []
    if "state" not in body:
        problems.append(_problem(["state"], "Field required", "missing"))
    elif isinstance(body["state"], bool | int | float):
        problems.append(_problem(["state"], "state must be text, a JSON object or array, or null"))
    questions = body.get("questions")
    if not isinstance(questions, dict) or not questions:
        problems.append(_problem(["questions"], "questions must be a non-empty object"))
        return problems
    if len(questions) > _MAX_QUESTIONS:
        problems.append(_problem(["questions"], f"at most {_MAX_QUESTIONS} questions per request"))
    for qid, question in questions.items():
        problems += _question_problems(str(qid), question)
    return problems


def _question_problems(qid: str, question: Any) -> list[dict[str, Any]]:
    loc: list[Any] = ["questions", qid]
    if not _KEY.match(qid):
        return [_problem(loc, "question keys are 1 to 64 ASCII letters, digits, '_' or '-'")]
    if not isinstance(question, dict):
        return [_problem(loc, "Input should be a valid dictionary", "dict_type")]
    kind = question.get("type")
    problems: list[dict[str, Any]] = []
    if not isinstance(question.get("instructions"), str) or not question["instructions"].strip():
        problems.append(_problem([*loc, "instructions"], "instructions must be non-empty text"))
    if kind == "noul":
        return problems
    if kind == "score":
        return [*problems, _problem([*loc, "type"], "the fake decision model does not model score questions")]
    if kind != "choice":
        return [
            *problems,
            _problem([*loc, "type"], "Input tag should be 'choice', 'noul' or 'score'", "union_tag_invalid"),
        ]
    criteria = question.get("criteria")
    if not isinstance(criteria, dict) or not 2 <= len(criteria) <= _MAX_OPTIONS:
        problems.append(_problem([*loc, "criteria"], f"a choice needs 2 to {_MAX_OPTIONS} options"))
        return problems
    for label, meaning in criteria.items():
        if not _KEY.match(str(label)):
            problems.append(
                _problem([*loc, "criteria", label], "option keys are 1 to 64 ASCII letters, digits, '_' or '-'")
            )
        elif not isinstance(meaning, str):
            problems.append(_problem([*loc, "criteria", label], "Input should be a valid string", "string_type"))
    return problems


def system_one_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to a valid System One request."""
    state = body.get("state")
    text = state if isinstance(state, str) else json.dumps(state)
    answers: dict[str, Any] = {}
    for qid, question in body["questions"].items():
        if question["type"] == "noul":
            answers[qid] = {"type": "noul", "noul": 0.5}
            continue
        dist = distribution(text, question["criteria"])
        best = _best(dist)
        answers[qid] = {
            "type": "choice",
            "choice": best,
            "confidence": round(dist[best], 6),
            "probabilities": {label: round(p, 6) for label, p in dist.items()},
        }
    asked = text + json.dumps(body["questions"])
    model = str(body.get("model") or "jev-latest")
    return {
        "model": MODEL_ALIASES.get(model, model),
        "answers": answers,
        "usage": {"input_tokens": estimate_tokens(asked), "output_tokens": 4 * len(answers)},
    }


def rlcd_options(body: Mapping[str, Any]) -> dict[str, str]:
    """The labels an RLCD decision request offers, with their meanings: the option lines of its
    instructions, in the order of its schema's enum when it sends one."""
    messages = body.get("messages") or []
    system = next((m.get("content") for m in messages if m.get("role") in ("system", "developer")), "")
    lines = {m["label"]: m["meaning"] for m in _OPTION_LINE.finditer(system if isinstance(system, str) else "")}
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
    enum = (((schema or {}).get("properties") or {}).get("target") or {}).get("enum")
    if isinstance(enum, list) and enum:
        return {str(e): lines.get(str(e), "") for e in enum}
    return lines


def is_rlcd_request(body: Mapping[str, Any]) -> bool:
    """Whether a Chat request asks for an RLCD verdict (a ``decision_model`` route's request)."""
    return bool(body.get("response_format")) and len(rlcd_options(body)) >= 2 and "probabilities" in json.dumps(body)


def rlcd_turn(body: Mapping[str, Any], state: str) -> Turn:
    """An RLCD verdict for a Chat request: every offered label once, summing to 1."""
    dist = distribution(state, rlcd_options(body))
    verdict = {
        "target": _best(dist),
        "probabilities": [{"option": label, "probability": round(p, 6)} for label, p in dist.items()],
    }
    return Turn(text=json.dumps(verdict))


def rlcd_brain(body: dict[str, Any], model: Any) -> Turn:
    """A fake-upstream brain for an RLCD decision model (the state is the request's user text)."""
    return rlcd_turn(body, last_user_text(body))
