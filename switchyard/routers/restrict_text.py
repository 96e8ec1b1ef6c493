"""What a route's ``restrict:`` rules read: every text of a request that a target would receive.

Layer: ``routers`` — imports ``protocol`` only; pure (no I/O).

A target receives one of two bodies: the request encoded from the IR (another wire format, or a
body the engine had to rewrite), or — when it speaks the caller's format — the caller's own body
replayed verbatim, with every field the IR has no slot for (Anthropic ``document`` and
``search_result`` blocks, OpenAI ``prediction``, server and hosted tools …). The rules read both:

* :func:`request_texts` walks the IR request. :data:`READ` names, for every IR type a request
  holds, the fields whose text is read; :data:`NOT_READ` names the others and why (a test checks
  that the two cover every field, so a field added to the IR without a decision fails it);
* :func:`body_texts` walks the caller's JSON body: every object key and string value.

Nothing is read that cannot carry text a model reads: image and file bytes (base64 payloads and
``data:`` URIs), the opaque reasoning a provider issued and only ever receives back (signatures,
encrypted and redacted thinking), fixed vocabularies (roles, part types, flags) and numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest, ReasoningConfig
from switchyard.protocol.tools import ToolChoice, ToolDefinition

READ: dict[type[BaseModel], frozenset[str]] = {
    ChatRequest: frozenset(
        {
            "messages",
            "tools",
            "tool_choice",
            "stop",
            "response_format",
            "reasoning",
            "user",
            "metadata",
            "extra",
            "choice",
        }
    ),
    Message: frozenset({"content", "name"}),
    TextPart: frozenset({"text", "cache_control"}),
    ImagePart: frozenset({"url", "media_type", "detail", "cache_control"}),
    ToolCallPart: frozenset({"id", "name", "arguments"}),
    ToolResultPart: frozenset({"call_id", "content", "cache_control"}),
    ReasoningPart: frozenset({"text", "item_id"}),
    ToolDefinition: frozenset({"name", "description", "parameters", "format", "cache_control", "native"}),
    ToolChoice: frozenset({"name"}),
    ReasoningConfig: frozenset({"effort", "summary"}),
    ChoiceQuestion: frozenset({"instructions", "options"}),
}
"""The fields of each IR type whose text (strings, and the keys and strings of JSON objects) a
rule reads."""

_FIXED = "a fixed vocabulary (a Literal the IR validates)"
_FLAG = "a number or a flag"

NOT_READ: dict[type[BaseModel], dict[str, str]] = {
    ChatRequest: {
        "model": "the route's name, replaced by the target's own model id",
        "origin": "the proxy's note of the caller's format, never sent",
        **dict.fromkeys(
            ("parallel_tool_calls", "max_tokens", "temperature", "top_p", "seed", "stream", "include_usage"), _FLAG
        ),
    },
    Message: {"role": _FIXED},
    TextPart: {"type": _FIXED},
    ImagePart: {"type": _FIXED, "data": "image bytes (base64), not text"},
    ToolCallPart: {"type": _FIXED, "kind": _FIXED},
    ToolResultPart: {"type": _FIXED, "kind": _FIXED, "is_error": _FLAG},
    ReasoningPart: {
        "type": _FIXED,
        "signature": "opaque: issued by a provider and only ever sent back to it",
        "redacted": "opaque: issued by a provider and only ever sent back to it",
        "encrypted": "opaque: issued by a provider and only ever sent back to it",
        "provider": "the proxy's note of which format issued the reasoning, never sent",
    },
    ToolDefinition: {"kind": _FIXED, "strict": _FLAG},
    ToolChoice: {"mode": _FIXED},
    ReasoningConfig: {"enabled": _FLAG, "budget_tokens": _FLAG},
    ChoiceQuestion: {},
}
"""The fields of each IR type a rule does not read, with the reason."""

_NOT_TEXT: dict[str, str] = {
    "base64": "data",  # a base64 source: an image, a PDF document
    "redacted_thinking": "data",  # Anthropic's encrypted thinking
    "thinking": "signature",  # Anthropic's signature of a thinking block
    "reasoning": "encrypted_content",  # a Responses reasoning item's encrypted reasoning
    "input_audio": "input_audio",  # OpenAI audio input: its object holds base64 ``data``
}
"""By the ``type`` of a body object, its key whose value is not text: bytes, or opaque reasoning
a provider issued. Only there: a tool schema's property called ``signature`` or ``data`` is read."""

_COLON = ":"
"""Read between a key and its string value, so ``{"password": "…"}`` reads as an assignment
(``password`` ``:`` ``…``), the shape the ``secrets`` detector looks for."""


def _binary_uri(text: str) -> bool:
    """Whether ``text`` is a base64 ``data:`` URI (an image or file inline)."""
    return text.startswith("data:") and ";base64," in text[:256]


def json_texts(value: Any, add: Callable[[str], None]) -> None:
    """Hands ``add`` every key and string of a JSON value, in document order.

    Iterative (a deeply nested body cannot exhaust the stack). Skipped: base64 payloads and
    opaque reasoning, by the ``type`` of the object that holds them (:data:`_NOT_TEXT`), and
    ``data:…;base64,`` URIs.
    """
    stack: list[Any] = [value]
    pop = stack.pop
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            if not _binary_uri(item):
                add(item)
        elif kind is dict:
            tag = item.get("type")
            skip = _NOT_TEXT.get(tag) if type(tag) is str else None  # a caller's "type" may be any JSON
            pending: list[Any] = []
            for key, sub in item.items():
                if type(key) is str:
                    add(key)
                if key == skip:
                    if skip == "input_audio" and type(sub) is dict:  # its format is text, its data not
                        pending.append({k: v for k, v in sub.items() if k != "data"})
                    continue
                if type(sub) is str:
                    if not _binary_uri(sub):
                        add(_COLON)
                        add(sub)
                elif sub is not None and type(sub) is not bool and type(sub) is not int and type(sub) is not float:
                    pending.append(sub)
            stack.extend(reversed(pending))
        elif kind is list or kind is tuple:
            stack.extend(reversed(item))


def body_texts(body: dict[str, Any]) -> list[str]:
    """Every text of a caller's JSON body (see :func:`json_texts`), the ``model`` key's value
    excepted (the route's name: the target gets its own model id)."""
    out: list[str] = []
    json_texts({k: v for k, v in body.items() if k != "model"}, out.append)
    return out


def _opt(value: str | None, add: Callable[[str], None]) -> None:
    if value:
        add(value)


def _json(value: Any, add: Callable[[str], None]) -> None:
    if value:
        json_texts(value, add)


def _parts(parts: Iterable[Any], add: Callable[[str], None]) -> None:
    for part in parts:
        kind = type(part)
        if kind is TextPart:
            add(part.text)
            _json(part.cache_control, add)
        elif kind is ToolCallPart:
            add(part.id)
            add(part.name)
            add(part.arguments)
        elif kind is ToolResultPart:
            add(part.call_id)
            _parts(part.content, add)
            _json(part.cache_control, add)
        elif kind is ReasoningPart:
            _opt(part.text, add)
            _opt(part.item_id, add)
        elif kind is ImagePart:
            if part.url and not _binary_uri(part.url):
                add(part.url)
            _opt(part.media_type, add)
            _opt(part.detail, add)
            _json(part.cache_control, add)


def request_texts(request: ChatRequest) -> list[str]:
    """Every text of the IR ``request`` that an encoder may send upstream (the fields of
    :data:`READ`), in request order: messages, tools, then the request's other fields."""
    out: list[str] = []
    add = out.append
    for message in request.messages:
        _opt(message.name, add)
        _parts(message.content, add)
    for tool in request.tools:
        add(tool.name)
        _opt(tool.description, add)
        _json(tool.parameters, add)
        _json(tool.format, add)
        _json(tool.cache_control, add)
        _json(tool.native, add)
    if request.tool_choice is not None:
        _opt(request.tool_choice.name, add)
    for stop in request.stop or ():
        add(stop)
    _json(request.response_format, add)
    if request.reasoning is not None:
        _opt(request.reasoning.effort, add)
        _opt(request.reasoning.summary, add)
    _opt(request.user, add)
    _json(request.metadata, add)
    _json(request.extra, add)
    if request.choice is not None:  # a decision model's question (built by a router, sent to it)
        add(request.choice.instructions)
        _json(request.choice.options, add)
    return out


def texts(request: ChatRequest, body: dict[str, Any] | None = None) -> list[str]:
    """What a rule reads of one request: the caller's ``body`` (when the request came as one),
    then each text of the IR request that the body does not hold (an IR text the decoder took
    from the body is read once; one the IR holds in another shape, such as an Anthropic tool
    call's input kept as JSON text, is read in both)."""
    if body is None:
        return request_texts(request)
    out = body_texts(body)
    # By value, not identity: a decoder that reuses an earlier request's decoded parts
    # (wire/reuse.py) holds equal strings that are other objects. A text equal to one the body
    # holds has nothing the body's copy does not, so reading it again would only count it twice.
    seen = set(out)
    out.extend(text for text in request_texts(request) if text not in seen)
    return out
