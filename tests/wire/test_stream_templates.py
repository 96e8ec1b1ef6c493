"""The plain-text fast path of the Anthropic and Responses stream decoders says exactly what the
full decode says (``wire/stream_decode.py``; the Chat decoder's own checks are in
``test_openai_chat_stream_template.py``).

Each decoder is checked against itself with the template off, on random streams: escapes,
unicode, extra keys, other indexes and items, other delta kinds, whitespace, key orders, unnamed
types, sequence numbers of every shape, and events that are the template around something that
is not one string.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.stream import TextDelta
from switchyard.wire import stream_decode
from switchyard.wire.anthropic_messages.stream import AnthropicStreamDecoder
from switchyard.wire.openai_responses.stream import ResponsesStreamDecoder
from switchyard.wire.sse import SSEEvent
from switchyard.wire.stream_decode import NumberedTemplate, TextTemplate, learn

_TEXTS = ["", "a", "Here ", 'say "hi"', "back\\slash", "\\", '\\"', "é", "日本", "\n\t", "😀", "\u2028", "}", '"}']
_NOT_ONE_STRING = ['"a","b":1', '"a"} ', "1", '"a', "null", '"\\u00e9"', '"x\\q"', '"\x01"']


class _FullAnthropic(AnthropicStreamDecoder):
    def _learn(self, data: str, text: str) -> None:
        return None


class _FullResponses(ResponsesStreamDecoder):
    def _learn(self, data: str, text: str, item_id: str) -> None:
        return None


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 3)))


def _dump(rng: random.Random, payload: dict[str, Any], text: Any, mark: str) -> str:
    roll = rng.random()
    if roll < 0.05:
        return json.dumps(payload)  # with spaces
    if roll < 0.1:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))  # other escapes
    data = orjson.dumps(payload).decode()
    if roll < 0.15 and isinstance(text, str):
        # The template around something that is not one string.
        literal = orjson.dumps(text).decode()
        return data.replace(mark + literal, mark + rng.choice(_NOT_ONE_STRING), 1)
    return data


def _anthropic_event(rng: random.Random) -> SSEEvent:
    roll = rng.random()
    delta: dict[str, Any] = {"type": "text_delta", "text": _text(rng)}
    payload: dict[str, Any] = {"type": "content_block_delta", "index": 0, "delta": delta}
    if roll < 0.05:
        payload["index"] = 1
    elif roll < 0.1:
        payload["delta"] = {"type": "thinking_delta", "thinking": _text(rng)}
    elif roll < 0.15:
        payload["extra"] = {"text": "x"}
    elif roll < 0.2:
        payload = {"delta": delta, "index": 0, "type": "content_block_delta"}  # another key order
    elif roll < 0.25:
        del payload["type"]  # named by the event line only
        return SSEEvent(rng.choice(["content_block_delta", "ping"]), orjson.dumps(payload).decode())
    elif roll < 0.28:
        delta["text"] = rng.choice([1, None, ["a"]])
    elif roll < 0.31:
        payload["index"] = rng.choice(["0", None])
    elif roll < 0.34:
        payload = {"type": "content_block_stop", "index": 0}
    return SSEEvent("content_block_delta", _dump(rng, payload, delta.get("text"), '"text":'))


def _responses_event(rng: random.Random, seq: int) -> SSEEvent:
    roll = rng.random()
    payload: dict[str, Any] = {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": _text(rng),
        "logprobs": [],
        "sequence_number": seq,
    }
    if rng.random() < 0.5:  # OpenAI's order: the number before the text
        payload = {"type": payload["type"], "sequence_number": seq, **payload}
    if roll < 0.05:
        payload["item_id"] = "msg_2"
    elif roll < 0.1:
        payload["type"] = "response.refusal.delta"
    elif roll < 0.15:
        payload["obfuscation"] = "xyz"
    elif roll < 0.2:
        del payload["type"]
        return SSEEvent(rng.choice(["response.output_text.delta", "response.in_progress"]), json.dumps(payload))
    elif roll < 0.23:
        payload["delta"] = rng.choice([1, None, ["a"]])
    elif roll < 0.26:
        payload["sequence_number"] = rng.choice([-1, 1.5, "3", None, 2**62])
    elif roll < 0.29:
        del payload["sequence_number"]
    data = _dump(rng, payload, payload["delta"], '"delta":')
    if rng.random() < 0.05:
        data = data.replace(f'"sequence_number":{seq}', f'"sequence_number":0{seq}')  # not JSON
    return SSEEvent(payload.get("type", "x"), data)


def _run(decoder: Any, events: list[SSEEvent]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        try:
            out.append(decoder.feed(event))
        except UpstreamProtocolError as exc:
            out.append(("error", exc.message))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_anthropic_template_decodes_as_the_full_decoder(seed: int) -> None:
    rng = random.Random(seed)
    start = SSEEvent("message_start", '{"type":"message_start","message":{"id":"m","model":"c"}}')
    block = SSEEvent("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text"}}')
    events = [start, block, *(_anthropic_event(rng) for _ in range(200))]
    assert _run(AnthropicStreamDecoder(), events) == _run(_FullAnthropic(), events)


@pytest.mark.parametrize("seed", range(40))
def test_the_responses_template_decodes_as_the_full_decoder(seed: int) -> None:
    rng = random.Random(seed)
    created = SSEEvent("response.created", '{"type":"response.created","response":{"id":"r","model":"m"}}')
    events = [created, *(_responses_event(rng, seq) for seq in range(1, 201))]
    done = {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "whole"}]}
    events.append(SSEEvent(None, orjson.dumps({"type": "response.output_item.done", "item": done}).decode()))
    events.append(SSEEvent(None, '{"type":"response.completed","response":{"status":"completed"}}'))
    assert _run(ResponsesStreamDecoder(), events) == _run(_FullResponses(), events)


@pytest.mark.parametrize(
    ("module", "decoder", "first", "second", "text"),
    [
        (
            "anthropic_messages",
            AnthropicStreamDecoder,
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}',
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x\\"y\\u00e9"}}',
            'x"yé',
        ),
        (
            "openai_responses",
            ResponsesStreamDecoder,
            '{"type":"response.output_text.delta","sequence_number":3,"item_id":"m","delta":"a","logprobs":[]}',
            '{"type":"response.output_text.delta","sequence_number":14,"item_id":"m","delta":"x\\"y","logprobs":[]}',
            'x"y',
        ),
    ],
)
def test_text_deltas_take_the_template(
    module: str, decoder: Any, first: str, second: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []

    def counted(data: str) -> dict[str, Any]:
        parsed.append(data)
        return stream_decode.event_json(data)

    monkeypatch.setattr(f"switchyard.wire.{module}.stream.event_json", counted)
    decoding = decoder()
    decoding.feed(SSEEvent(None, first))
    assert decoding.feed(SSEEvent(None, second)) == [TextDelta(text=text)]
    assert parsed == [first]  # the second was matched, not parsed whole


def test_a_numbered_template_matches_any_whole_number_in_its_place() -> None:
    data = '{"type":"t","item_id":"m","delta":"a","logprobs":[],"sequence_number":4}'
    template = learn(data, '"delta":', "a", number='"sequence_number":')
    assert isinstance(template, NumberedTemplate)
    assert template.text(data.replace(":4}", ":15}").replace('"a"', '"b"')) == "b"
    assert template.text(data.replace(":4}", ":0}")) == "a"
    for other in (":04}", ":}", ":-1}", ":1.5}", ":\u0661}"):
        assert template.text(data.replace(":4}", other)) is None, other
    assert template.text(data.replace('"a"', '"a","x":"y"')) is None
    first = '{"type":"t","sequence_number":4,"item_id":"m","delta":"a"}'
    template = learn(first, '"delta":', "a", number='"sequence_number":')
    assert template is not None and template.text(first.replace(":4,", ":123,").replace('"a"', '"zz"')) == "zz"
    assert template.text(first.replace(":4,", ":00,")) is None


def test_a_template_is_learned_only_where_the_mark_opens_a_key() -> None:
    plain = '{"type":"t","delta":{"type":"text_delta","text":"a"}}'
    assert type(learn(plain, '"text":', "a")) is TextTemplate
    assert learn(plain, '"text":', "b") is None  # the string is not the text
    assert learn('{"x\\"text":"a","text":"a"}', '"text":', "a") is None  # twice
    assert learn('{"x\\"text":"a"}', '"text":', "a") is None  # inside another key
    assert learn('{"text":"a","n":1}', '"text":', "a", then="}") is None
    assert learn('{"text":"a","n":04}', '"text":', "a", number='"n":') is None
    fixed = learn('{"text":"a"}', '"text":', "a", number='"n":')  # no number: a fixed template
    assert type(fixed) is TextTemplate and fixed.raw_prefix == b'{"text":'


def test_the_responses_fast_path_keeps_what_was_streamed() -> None:
    # The item's closing event repeats its text only when none was streamed: texts that took
    # the template count as streamed.
    decoder = ResponsesStreamDecoder()
    head = '{"type":"response.output_text.delta","item_id":"msg_1","delta":'
    assert decoder.feed(SSEEvent(None, head + '"","sequence_number":1}')) == []  # learned from
    assert decoder.feed(SSEEvent(None, head + '"b","sequence_number":2}')) == [TextDelta(text="b")]
    done = {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "b"}]}
    assert (
        decoder.feed(SSEEvent(None, orjson.dumps({"type": "response.output_item.done", "item": done}).decode())) == []
    )
