"""The Chat stream codec's fast paths say exactly what the full decode and encode say.

The decoder keeps a plain text chunk as a template and parses only the content string of the
chunks that match it; the encoder writes text chunks from fixed parts. Both are checked against
the same codec with the fast path off, on random streams: escapes, unicode, extra keys, other
ids, whitespace, finish reasons, usage, tool calls and chunks that only look like the template.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.response import Usage
from switchyard.protocol.stream import (
    MessageStart,
    MessageStop,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)
from switchyard.wire.openai_chat.stream import ChatStreamDecoder, ChatStreamEncoder
from switchyard.wire.sse import SSEEvent

_TEXTS = ["", "a", "Here ", 'say "hi"', "back\\slash", "\\", '\\"', "é", "日本", "\n\t", "😀", "\u2028", "}", '"}']


class _FullDecoder(ChatStreamDecoder):
    """The decoder without its template: every chunk parsed whole."""

    def _learn(self, data: str, chunk: dict[str, Any]) -> None:
        return None


class _Text(TextDelta):
    """A text event the encoder's fast path does not take (its type is not ``TextDelta``)."""


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 3)))


def _chunk(rng: random.Random, base: dict[str, Any]) -> str:
    kind = rng.random()
    chunk = dict(base)
    choice: dict[str, Any] = {"index": 0, "delta": {"content": _text(rng)}, "finish_reason": None, "logprobs": None}
    if kind < 0.05:
        chunk["id"] = "other"
    elif kind < 0.1:
        chunk["usage"] = {"prompt_tokens": 3, "completion_tokens": 2}
    elif kind < 0.15:
        chunk["extra"] = {"delta": {"content": "x"}}
    elif kind < 0.2:
        choice["finish_reason"] = rng.choice(["stop", "length"])
    elif kind < 0.25:
        choice["delta"] = {"content": _text(rng), "reasoning": "think"}
    elif kind < 0.3:
        choice["delta"] = {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}]}
    elif kind < 0.33:
        choice["delta"] = {"content": rng.choice([1, None, ["a"], {"a": 1}])}
    elif kind < 0.36:
        choice["index"] = 1
    elif kind < 0.39:
        choice = {"delta": choice["delta"], "index": 0, "finish_reason": None}  # another key order
    elif kind < 0.42:
        chunk["usage"] = None
    chunk["choices"] = [choice]
    if rng.random() < 0.05:
        return json.dumps(chunk)  # with spaces
    if rng.random() < 0.05:
        return json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))  # other escapes
    data = orjson.dumps(chunk).decode()
    if rng.random() < 0.04:
        # The template around something that is not one string.
        head, _, _ = data.partition('"delta":{"content":')
        return (
            head
            + '"delta":{"content":'
            + rng.choice(['"a","b":1', '"a"} ', "1", '"a', "null", '"\\u00e9"'])
            + ('},"finish_reason":null,"logprobs":null}]}')
        )
    return data


def _run(decoder: ChatStreamDecoder, datas: list[str]) -> list[Any]:
    out: list[Any] = []
    for data in datas:
        try:
            out.append(decoder.feed(SSEEvent(None, data)))
        except UpstreamProtocolError as exc:
            out.append(("error", exc.message))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_template_decodes_as_the_full_decoder(seed: int) -> None:
    rng = random.Random(seed)
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m"}
    if rng.random() < 0.3:
        base["system_fingerprint"] = "fp"
    datas = [_chunk(rng, base) for _ in range(200)]
    assert _run(ChatStreamDecoder(), datas) == _run(_FullDecoder(), datas)


def test_plain_chunks_take_the_template() -> None:
    base = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":'
    decoder = ChatStreamDecoder()
    decoder.feed(SSEEvent(None, base + '{"content":"a"},"finish_reason":null}]}'))
    assert decoder._prefix == base + '{"content":'
    events = decoder.feed(SSEEvent(None, base + '{"content":"x\\"y\\u00e9"},"finish_reason":null}]}'))
    assert events == [TextDelta(text='x"yé')]
    # The same head with a finish reason is no template match: decoded whole.
    decoder.feed(SSEEvent(None, base + '{"content":"b"},"finish_reason":"stop"}]}'))
    assert decoder.feed(SSEEvent(None, "[DONE]")) == [MessageStop(stop_reason="end_turn")]


@pytest.mark.parametrize("include_usage", [True, False])
@pytest.mark.parametrize("seed", range(20))
def test_text_chunks_encode_as_the_full_encoder(seed: int, include_usage: bool) -> None:
    rng = random.Random(seed)
    events: list[StreamEvent] = []
    if rng.random() < 0.7:
        events.append(MessageStart(id=rng.choice(["", "chatcmpl-9"]), model="m", created=rng.choice([0, 5])))
    for _ in range(60):
        roll = rng.random()
        if roll < 0.7:
            events.append(TextDelta(text=_text(rng)))
        elif roll < 0.8:
            events.append(ReasoningDelta(text=_text(rng)))
        elif roll < 0.9:
            events.append(ToolCallDelta(index=rng.randint(0, 1), id="c", name="f", arguments="{}"))
        else:
            events.append(UsageDelta(usage=Usage(input_tokens=3, output_tokens=2)))
    events.append(MessageStop(stop_reason="end_turn"))
    events.append(TextDelta(text="after the end"))
    slow = [_Text(text=e.text) if type(e) is TextDelta else e for e in events]
    fast_encoder = ChatStreamEncoder(model="bench", include_usage=include_usage)
    slow_encoder = ChatStreamEncoder(model="bench", include_usage=include_usage)
    slow_encoder._created = fast_encoder._created  # the same second on both
    fast = [fast_encoder.encode(e) for e in events] + [fast_encoder.finish()]
    assert fast == [slow_encoder.encode(e) for e in slow] + [slow_encoder.finish()]
