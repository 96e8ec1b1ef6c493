"""The OpenAPI description of the proxy's own HTTP surface, served at ``GET /openapi.json``.

Layer: ``server``.

It describes what the proxy accepts and answers — not every field of the three provider APIs
(those belong to their own specifications): the fields the proxy itself checks are typed
exactly (``stream`` a boolean, token limits ≥ 1, ``messages`` non-empty), the rest are open
objects, and every error status the proxy can produce is listed with its envelope. A test
validates the document and compares its paths with the routes the app serves; a schemathesis
run (``tests/server/test_schemathesis.py``) checks live answers against it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from switchyard._version import __version__
from switchyard.engine.reply import Reply
from switchyard.wire.json import dumps
from switchyard.wire.strict import MAX_TOKENS_CEILING

OPENAPI_PATH = "/openapi.json"
"""Where the app serves this document. ``server/app.py`` names the same path itself rather than
import it: the app loads this module only when the document is asked for, and importing the app
from here closed an import circle (tests/test_import_light.py checks that the two agree)."""

_OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message"],
            "properties": {"message": {"type": "string"}, "type": {"type": ["string", "null"]}},
        }
    },
}
_ANTHROPIC_ERROR = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
# One server-sent event (``event:`` name and ``data:`` payload), as SSE-aware tools read it.
_SSE = {
    "text/event-stream": {
        "schema": {
            "type": "object",
            "required": ["data"],
            "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
        }
    }
}
_OBJECT = {"type": "object"}
_ERROR_STATUSES = {
    "400": "Invalid request (a field named in the message)",
    "401": "Missing or unknown API key (server.api_keys)",
    "403": "Host, browser origin or route not allowed for this key",
    "404": "Unknown route (model) or endpoint",
    "408": "Request body not received in time",
    "413": "Request body too large",
    "415": "Body is not JSON",
    "429": "Rate limited upstream, or the key's daily budget is spent",
    "500": "Router failure",
    "502": "Upstream error or malformed upstream answer",
    "503": "No target available, or the proxy is shutting down",
    "504": "Upstream or request deadline passed",
}
_TEXT_OR_PARTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}
_SAMPLING = {
    "stream": {"type": "boolean"},
    "temperature": {"type": "number", "minimum": 0},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
}
_TOKENS = {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS_CEILING}


def _message(roles: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"enum": roles}, "content": _TEXT_OR_PARTS},
    }


def _errors(error_schema: dict[str, Any]) -> dict[str, Any]:
    body = {"application/json": {"schema": error_schema}}
    return {status: {"description": text, "content": body} for status, text in _ERROR_STATUSES.items()}


def _post(summary: str, request: dict[str, Any], answer: dict[str, Any], error: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
            "responses": {
                "200": {
                    "description": "The answer (JSON), or an SSE stream when stream is true",
                    "content": {"application/json": {"schema": answer}, **_SSE},
                },
                **_errors(error),
            },
        }
    }


def _get(summary: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": answer}}},
                **{s: v for s, v in _errors(_OPENAI_ERROR).items() if s in ("401", "403", "429")},
            },
        }
    }


def _chat_request() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string"},
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    **_message(["system", "developer", "user", "assistant", "tool"]),
                    # A tool message names the call it answers (the proxy refuses one without).
                    "if": {"properties": {"role": {"const": "tool"}}},
                    "then": {"required": ["tool_call_id"], "properties": {"tool_call_id": {"type": "string"}}},
                },
            },
            "max_tokens": _TOKENS,
            "max_completion_tokens": _TOKENS,
            **_SAMPLING,
        },
    }


def _messages_request(*, count: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "model": {"type": "string"},
        "messages": {"type": "array", "minItems": 1, "items": _message(["user", "assistant"])},
        "system": _TEXT_OR_PARTS,
    }
    required = ["model", "messages"]
    if not count:
        properties.update({"max_tokens": _TOKENS, **_SAMPLING})
        required.append("max_tokens")
    return {"type": "object", "required": required, "properties": properties}


def _responses_request() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string"},
            "input": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 1, "items": _message(["system", "developer", "user", "assistant"])},
                ]
            },
            "instructions": {"type": "string"},
            "max_output_tokens": _TOKENS,
            **_SAMPLING,
        },
    }


_TARGET: dict[str, Any] = {
    "type": "object",
    "required": ["target", "model"],
    "properties": {
        "target": {"type": ["string", "null"]},
        "model": {"type": ["string", "null"]},
        "client": {"type": ["string", "null"]},
        "format": {"type": ["string", "null"]},
    },
}


def _decision() -> dict[str, Any]:
    """``POST /v1/decision``: any of the three request bodies in, the decision out."""
    answer = {
        "type": "object",
        "required": ["object", "route", "target", "model", "source", "fallbacks", "session"],
        "properties": {
            "object": {"const": "switchyard.decision"},
            "request_id": {"type": "string"},
            "route": {"type": "string"},
            "router": {"type": "string"},
            "request_format": {"enum": ["openai_chat", "anthropic_messages", "openai_responses"]},
            **_TARGET["properties"],
            "source": {"type": "string"},
            "score": {"type": ["number", "null"]},
            "confidence": {"type": ["number", "null"]},
            "reason": {"type": "string"},
            "fallbacks": {"type": "array", "items": _TARGET},
            "answered": {"type": "boolean"},
            "request": {"type": ["object", "null"]},
            "session": {
                "type": "object",
                "required": ["id", "state_changes"],
                "properties": {
                    "id": {"type": ["string", "null"]},
                    "state_changes": {
                        "type": "array",
                        "items": {"type": "object", "required": ["key", "before", "after"]},
                    },
                },
            },
            "router_cost": _OBJECT,
            "overhead_ms": {"type": "number"},
        },
    }
    request = {"anyOf": [_chat_request(), _messages_request(count=False), _responses_request()]}
    operation = _post(
        "The route's decision for a request in any of the three formats, without the answer call",
        request,
        answer,
        {"anyOf": [_OPENAI_ERROR, _ANTHROPIC_ERROR]},
    )
    post = operation["post"]
    post["responses"]["200"] = {
        "description": "The decision: target and model to call, why, fallbacks, the session's state changes",
        "content": {"application/json": {"schema": answer}},
    }
    post["parameters"] = [
        {
            "name": "format",
            "in": "query",
            "required": False,
            "description": "The body's format; without it: anthropic-version header → Anthropic Messages, "
            "a body with input and no messages → OpenAI Responses, else OpenAI Chat",
            "schema": {
                "enum": ["openai_chat", "anthropic_messages", "openai_responses", "chat", "messages", "responses"]
            },
        }
    ]
    return operation


def _feedback() -> dict[str, Any]:
    """``POST /v1/feedback``: how a session or a request ended (engine/feedback.py)."""
    label = {"type": "string", "minLength": 1, "maxLength": 64}
    identifier = {"type": "string", "minLength": 1, "maxLength": 256}
    request = {
        "type": "object",
        "additionalProperties": False,
        "description": "One of session_id and request_id, and exactly one of resolved, score and reward",
        "properties": {
            "session_id": identifier,
            "request_id": identifier,
            "resolved": {"type": "boolean"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reward": {"type": "number"},
            "labels": {"type": "array", "maxItems": 16, "items": label},
        },
    }
    answer = {
        "type": "object",
        "required": ["object", "id", "matched", "replaced"],
        "properties": {
            "object": {"const": "switchyard.feedback"},
            "id": {"type": "string"},
            "matched": {"type": "boolean"},
            "replaced": {"type": "boolean"},
            "session_id": {"type": ["string", "null"]},
            "request_id": {"type": ["string", "null"]},
            "route": {"type": ["string", "null"]},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
    }
    operation = _post("Report how a session or a request ended (its tenant's own only)", request, answer, _OPENAI_ERROR)
    responses = operation["post"]["responses"]
    responses["200"] = {
        "description": "Kept and logged; a decision of this caller's tenant with that id is known (matched: true)",
        "content": {"application/json": {"schema": answer}},
    }
    responses["202"] = {
        "description": "Kept and logged; no such decision is known (unknown, expired, or another tenant's)",
        "content": {"application/json": {"schema": answer}},
    }
    responses["404"] = {
        "description": "Feedback is off in the router's config (code feedback_off; feedback.enabled)",
        "content": {"application/json": {"schema": _OPENAI_ERROR}},
    }
    return operation


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    chat_answer = {"type": "object", "required": ["choices"], "properties": {"choices": {"type": "array"}}}
    messages_answer = {"type": "object", "required": ["content"], "properties": {"content": {"type": "array"}}}
    responses_answer = {"type": "object", "required": ["output"], "properties": {"output": {"type": "array"}}}
    count_answer = {"type": "object", "required": ["input_tokens"], "properties": {"input_tokens": {"type": "integer"}}}
    models = {"type": "object", "required": ["data"], "properties": {"data": {"type": "array"}}}
    health = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchyard proxy",
            "version": __version__,
            "description": "Routing proxy speaking OpenAI Chat Completions, Anthropic Messages and "
            "OpenAI Responses. `model` names a route (GET /v1/models).",
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            }
        },
        "security": [{}, {"bearer": []}, {"x-api-key": []}],
        "paths": {
            "/v1/chat/completions": _post("OpenAI Chat Completions", _chat_request(), chat_answer, _OPENAI_ERROR),
            "/v1/messages": _post(
                "Anthropic Messages", _messages_request(count=False), messages_answer, _ANTHROPIC_ERROR
            ),
            "/v1/messages/count_tokens": _post(
                "Anthropic token count", _messages_request(count=True), count_answer, _ANTHROPIC_ERROR
            ),
            "/v1/responses": _post("OpenAI Responses", _responses_request(), responses_answer, _OPENAI_ERROR),
            "/v1/decision": _decision(),
            "/v1/feedback": _feedback(),
            "/v1/models": _get(
                "The routes, as models (Anthropic's paginated List Models page when the request sends "
                "anthropic-version)",
                models,
            ),
            "/v1/stats": _get("Reliability counters", {"type": "object", "required": ["reliability"]}),
            "/health": _get("Liveness and backend health (always 200 while running)", health),
            OPENAPI_PATH: _get("This document", _OBJECT),
        },
    }


@cache
def _body() -> bytes:
    return dumps(document())


def openapi_reply() -> Reply:
    """``GET /openapi.json``."""
    return Reply(200, {"content-type": "application/json"}, body=_body())
