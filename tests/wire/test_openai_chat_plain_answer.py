"""A plain Chat answer relayed without the IR (switchyard/wire/openai_chat/plain_answer.py):
only for bodies the decoder accepts, and then the same reply and the same facts as the decode."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.wire.openai_chat.plain_answer import plain_answer
from switchyard.wire.openai_chat.response import decode_response, encode_response

_TEXTS = ["", "Done.", "x" * 2000, "call <tool_call> leaked", "résumé ✓"]


def _pick(rng: random.Random, plain: list[Any], odd: list[Any], p_odd: float = 0.12) -> Any:
    return rng.choice(odd) if rng.random() < p_odd else rng.choice(plain)


def _call(rng: random.Random) -> Any:
    call: dict[str, Any] = {
        "id": _pick(rng, ["call_1", "", "c" * 40], [None, 7]),
        "type": _pick(rng, ["function"], ["custom", "other", None]),
        "function": _pick(
            rng,
            [
                {"name": "ls", "arguments": '{"path": "."}'},
                {"name": "run", "arguments": ""},
                {"name": "run", "arguments": None},
                {"name": "x"},
            ],
            [{"name": 3, "arguments": "{}"}, {"name": "ls", "arguments": {"a": 1}}, None, "ls"],
        ),
    }
    if call["type"] is None:
        del call["type"]
    if call["type"] == "custom" if "type" in call else False:
        call["custom"] = {"name": "apply_patch", "input": "*** Begin Patch"}
    if rng.random() < 0.1:
        del call["id"]
    return _pick(rng, [call], [3, "call"], 0.05)


def _message(rng: random.Random) -> Any:
    msg: dict[str, Any] = {"role": "assistant"}
    msg["content"] = _pick(rng, [*_TEXTS, None], [[{"type": "text", "text": "a"}], 5, {"text": "a"}])
    if rng.random() < 0.4:
        msg["tool_calls"] = _pick(
            rng, [[_call(rng) for _ in range(rng.randrange(1, 3))], [], None], [{"id": "x"}, "calls"]
        )
    if rng.random() < 0.15:
        msg[rng.choice(["reasoning", "reasoning_content"])] = rng.choice(["thinking…", "", None, 0])
    if rng.random() < 0.15:
        msg["refusal"] = rng.choice([None, "", "I can't help with that.", False])
    if rng.random() < 0.05:
        return rng.choice([None, [], "hi", {}])
    return msg


def _usage(rng: random.Random) -> Any:
    usage: dict[str, Any] = {
        "prompt_tokens": _pick(rng, [0, 231, 10**9], ["12", None, 1.5, "x", [1]]),
        "completion_tokens": _pick(rng, [0, 46], [None, "3"]),
        "total_tokens": 277,
    }
    if rng.random() < 0.3:
        usage["prompt_tokens_details"] = _pick(rng, [{"cached_tokens": 100}, {}, None], [[1], "x"])
    if rng.random() < 0.2:
        usage["completion_tokens_details"] = _pick(rng, [{"reasoning_tokens": 9}, None], [{"reasoning_tokens": "n"}])
    return _pick(rng, [usage, None], [5, "u"], 0.05)


def _body(rng: random.Random) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": _message(rng),
        "finish_reason": _pick(rng, ["stop", "length", "tool_calls", "content_filter", None], [3, "weird"]),
        "logprobs": None,
    }
    if rng.random() < 0.1:
        choice["stop_reason"] = rng.choice(["</answer>", None, 7])
    body: dict[str, Any] = {
        "id": _pick(rng, ["chatcmpl-1", "", None], [12]),
        "object": "chat.completion",
        "created": _pick(rng, [1735689600], [None, "1735689600", 1.5, True, 0]),
        "model": _pick(rng, ["nemotron", "", None], [4]),
        "choices": _pick(rng, [[choice], [choice, dict(choice, index=1)]], [[], None, [3], choice]),
        "usage": _usage(rng),
        "system_fingerprint": "fp_1",
    }
    for key in ("id", "created", "model", "usage"):
        if body[key] is None and rng.random() < 0.5:
            del body[key]
    return body


def _decoded(body: dict[str, Any]) -> Any:
    try:
        return decode_response(copy.deepcopy(body))
    except UpstreamProtocolError as exc:
        return exc


@pytest.mark.parametrize("seed", range(8))
def test_a_plain_answer_replies_and_reports_as_the_decoded_one(seed: int) -> None:
    rng = random.Random(seed)
    relayed = 0
    for _ in range(500):
        body = _body(rng)
        kept = copy.deepcopy(body)
        plain = plain_answer(body)
        assert body == kept  # the upstream's body is read, not changed
        decoded = _decoded(body)
        if plain is None:
            continue
        relayed += 1
        assert not isinstance(decoded, Exception), f"relayed a body the decoder refuses: {body}"
        assert plain.encode(model="agent") == encode_response(decoded, model="agent")
        assert (plain.id, plain.model, plain.usage, plain.text) == (
            decoded.id,
            decoded.model,
            decoded.usage,
            decoded.text,
        )
        assert not decoded.reasoning
    assert relayed > 100  # the generator makes plain answers often enough to be tested


def test_the_common_answers_are_plain() -> None:
    text = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1735689600,
        "model": "nemotron",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi", "refusal": None}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    calls = copy.deepcopy(text)
    calls["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }
    calls["choices"][0]["finish_reason"] = "tool_calls"
    for body in (text, calls):
        plain = plain_answer(body)
        assert plain is not None
        assert plain.encode(model="agent") == encode_response(decode_response(body), model="agent")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reasoning_content", "thinking"),
        ("reasoning", "thinking"),
        ("refusal", "no"),
        ("content", [{"type": "text", "text": "a"}]),
        ("tool_calls", [{"id": "c", "type": "custom", "custom": {"name": "p", "input": "x"}}]),
    ],
)
def test_answers_the_relay_cannot_reproduce_take_the_decode(field: str, value: Any) -> None:
    body = {
        "id": "chatcmpl-1",
        "created": 1,
        "choices": [{"message": {"role": "assistant", "content": "Hi", field: value}, "finish_reason": "stop"}],
    }
    assert plain_answer(body) is None
