"""A Chat Completions answer relayed to a Chat caller without the IR round trip.

Layer: ``wire`` — imports ``protocol`` only (and this format's own codec helpers).

A same-format passthrough (switchyard/engine/plain_chat.py) already sends the caller's body on
unchanged; its answer would still be decoded into a :class:`~switchyard.protocol.response.ChatResponse`
and encoded back, which builds three pydantic objects and two dicts per request (about a tenth
of the proxy's CPU per JSON request on ../shared/bench, docs/benchmarks.md). For the answers
whose shape is one the decoder certainly accepts — one choice, an assistant message of plain
text and function tool calls with string fields, no reasoning, no refusal — :func:`plain_answer`
builds the reply directly, equal to ``encode_response(decode_response(body))`` (the tests hold
the two to that on random bodies). Every other answer, including every one the decoder
refuses, returns ``None`` and takes the full decode, so its reply and its errors do not change.
"""

from __future__ import annotations

from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.response import Usage
from switchyard.wire.openai_chat.response import (
    STOP_TO_FINISH,
    assistant_message,
    completion,
    decode_usage,
    encode_usage,
    stop_reason,
)

__all__ = ["PlainAnswer", "plain_answer"]


@dataclass(slots=True)
class PlainAnswer:
    """What the engine reads of a relayed answer, and the reply's body.

    Attributes:
        id: The answer's id, as the IR would carry it (``""`` when the upstream sent none).
        model: The model the upstream names (``""`` when none).
        usage: Token usage.
        text: The visible text (for the markup-leak check).
        message: The reply's ``message`` object.
        finish_reason: The reply's ``finish_reason``.
        created: The upstream's ``created`` (``0``: none; the reply then names the time of encoding).
    """

    id: str
    model: str
    usage: Usage
    text: str
    message: dict[str, Any]
    finish_reason: str
    created: int

    def encode(self, *, model: str) -> dict[str, Any]:
        """The ``chat.completion`` reply naming ``model`` (as ``encode_response`` writes it)."""
        return completion(self.id, self.created, model, self.message, self.finish_reason, encode_usage(self.usage))


def plain_answer(body: dict[str, Any]) -> PlainAnswer | None:
    """The relayed form of a ``chat.completion`` body, or ``None`` when it needs the full decode."""
    choices = body.get("choices")
    if type(choices) is not list or not choices:
        return None
    choice = choices[0]
    if type(choice) is not dict:
        return None
    msg = choice.get("message")
    if type(msg) is not dict or msg.get("reasoning") or msg.get("reasoning_content") or msg.get("refusal") is not None:
        return None
    content = msg.get("content")
    if content is None:
        text = ""
    elif type(content) is str:
        text = content
    else:
        return None
    calls = _calls(msg.get("tool_calls"))
    if calls is None:
        return None
    created = body.get("created")
    if created is None:
        created = 0
    elif type(created) is not int:
        return None
    ident, model = body.get("id"), body.get("model")
    if not (ident is None or type(ident) is str) or not (model is None or type(model) is str):
        return None
    try:
        usage = decode_usage(body.get("usage"))
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None  # the full decode names the problem
    stop = stop_reason(choice.get("finish_reason"), choice.get("stop_reason"))
    return PlainAnswer(
        id=ident or "",
        model=model or "",
        usage=usage,
        text=text,
        message=assistant_message(text, calls),
        finish_reason=STOP_TO_FINISH[stop],
        created=created,
    )


def _calls(raw: Any) -> list[dict[str, Any]] | None:
    """The reply's function tool calls; ``None`` when one is not plain (a custom tool call,
    a field of another type)."""
    if raw is None:
        return []
    if type(raw) is not list:
        return None
    out: list[dict[str, Any]] = []
    for call in raw:
        if type(call) is not dict or call.get("type", "function") != "function":
            return None
        fn = call.get("function")
        ident = call.get("id", "")
        if type(fn) is not dict or type(ident) is not str:
            return None
        name, arguments = fn.get("name", ""), fn.get("arguments")
        if type(name) is not str or not (arguments is None or type(arguments) is str):
            return None
        out.append({"id": ident, "type": "function", "function": {"name": name, "arguments": arguments or "{}"}})
    return out
