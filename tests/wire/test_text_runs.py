"""Text runs (wire/text_run.py): ``SSEParser.feed_raw`` + ``ChatStreamDecoder.gather`` + the Chat
or Anthropic encoder give the same events and the same caller bytes as the parser, decoder and
encoder event by event, however the stream is made and however its bytes arrive."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson

from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.stream import StreamEvent, TextDelta
from switchyard.wire.anthropic_messages.stream import AnthropicStreamEncoder
from switchyard.wire.openai_chat.stream import ChatStreamDecoder, ChatStreamEncoder
from switchyard.wire.sse import SSEParser
from switchyard.wire.text_run import TextRun

STREAMS = sorted((Path(__file__).parent / "fixtures" / "openai_chat" / "streams").glob("*.json"))

_TEXTS = [
    "Hi",
    " there",
    "",
    "é",
    "naïve 日本",
    'say "x"',
    "a\\b",
    "line\nbreak",
    "tab\t",
    "\u2028",
    "</think>",
    "<tool_call>",
]


def _head(rng: random.Random) -> dict[str, Any]:
    head: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1735689600}
    head["model"] = "m"
    if rng.random() < 0.5:
        head["system_fingerprint"] = "fp_1"
    return head


def _chunk(rng: random.Random, head: dict[str, Any]) -> bytes:
    """One event: mostly plain text chunks, sometimes anything else a Chat upstream sends."""
    roll = rng.random()
    choice: dict[str, Any] = {"index": 0, "delta": {"content": rng.choice(_TEXTS)}, "finish_reason": None}
    body: dict[str, Any] = {**head, "choices": [choice]}
    if rng.random() < 0.5:
        body["usage"] = None
    if roll < 0.6:
        pass  # the plain text chunk
    elif roll < 0.65:
        choice["delta"] = {"role": "assistant", "content": ""}
    elif roll < 0.7:
        choice["delta"] = {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "ls", "arguments": "{}"}}]}
    elif roll < 0.73:
        choice["delta"] = {"reasoning_content": "hmm"}
    elif roll < 0.76:
        choice["finish_reason"] = rng.choice(["stop", "length", "tool_calls"])
        choice["delta"] = {}
    elif roll < 0.79:
        body = {**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    elif roll < 0.81:
        return b"data: [DONE]\n\n"
    elif roll < 0.83:
        return b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    elif roll < 0.85:
        return b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": 5}}]}\n\n'  # no str: skipped
    elif roll < 0.87:
        return b"data: {not json\n\n"
    elif roll < 0.89:
        return b": keep-alive\n\n"
    elif roll < 0.91:
        choice["logprobs"] = {"content": []}  # not the template: decoded in full
    elif roll < 0.93:
        literal = orjson.dumps(choice["delta"]["content"])
        escaped = literal.replace("é".encode(), b"\\u00e9").replace(b"a", b"\\u0061")  # escapes orjson never writes
        return b"data: " + orjson.dumps(body).replace(literal, escaped) + b"\n\n"
    elif roll < 0.95:
        return b"data: " + orjson.dumps(body).replace(b"\xc3\xa9", b"\xc3") + b"\n\n"  # broken UTF-8
    elif roll < 0.97:
        return b"event: odd\ndata: " + orjson.dumps(body) + b"\n\n"  # a named event: not the plain shape
    else:
        body["choices"][0]["delta"]["content"] = rng.choice(["a", "b"]) + '"},"x":{"content":"'  # one string still
    dump = json.dumps if rng.random() < 0.2 else None  # spaces after separators: another template
    data = dump(body).encode() if dump is not None else orjson.dumps(body)
    return b"data: " + data + b"\n\n"


def _reads(rng: random.Random, stream: bytes) -> list[bytes]:
    if rng.random() < 0.3:
        return [stream]  # all at once, as a fast upstream's bytes arrive
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 8)))) if len(stream) > 1 else []
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


def _decode(reads: list[bytes], *, runs: bool, rows: bool = True) -> tuple[list[StreamEvent | TextRun], str | None]:
    """What HttpBackend._events does, with runs (``open_stream_runs``: ``read``, or ``gather``
    when not ``rows``) or event by event."""
    parser, decoder, out = SSEParser(), ChatStreamDecoder(), []
    try:
        for read in reads:
            if runs:
                got = decoder.read(parser, read) if rows else decoder.gather(parser.feed_raw(read))
                batch, failed = got
                out.extend(batch)
                if failed is not None:
                    raise failed
            else:
                for sse in parser.feed(read):
                    out.extend(decoder.feed(sse))
                    if decoder.done:
                        break
            if decoder.done:
                return out, None
        for sse in parser.finish():
            out.extend(decoder.feed(sse))
        out.extend(decoder.finish())
    except UpstreamProtocolError as exc:
        return out, exc.message
    return out, None


def _expanded(items: list[StreamEvent | TextRun]) -> list[StreamEvent]:
    out: list[StreamEvent] = []
    for item in items:
        if isinstance(item, TextRun):
            assert item.texts and all(item.texts)  # never an empty text
            out.extend(TextDelta(text=t) for t in item.texts)
        else:
            out.append(item)
    return out


def _encoded(items: list[Any], include_usage: bool) -> bytes:
    encoder = ChatStreamEncoder(model="caller-model", include_usage=include_usage)
    # The clock otherwise, for a stream whose chunks carry no ``created``: two encoders made on
    # either side of a second's turn wrote different bytes and the comparison failed.
    encoder._created = 1700000000
    return b"".join(encoder.encode(item) for item in items) + encoder.finish()


def _encoded_anthropic(items: list[Any]) -> bytes:
    encoder = AnthropicStreamEncoder(model="caller-model")
    encoder._id = "msg_fixed"  # a random id otherwise
    return b"".join(encoder.encode(item) for item in items) + encoder.finish()


def _check(stream: bytes, reads: list[bytes], include_usage: bool) -> list[StreamEvent | TextRun]:
    plain, plain_error = _decode(reads, runs=False)
    for rows in (False, True):
        runs, runs_error = _decode(reads, runs=True, rows=rows)
        assert _expanded(runs) == plain, (rows, stream)
        assert runs_error == plain_error, (rows, stream)
        assert _encoded(runs, include_usage) == _encoded(plain, include_usage), (rows, stream)
        assert _encoded_anthropic(runs) == _encoded_anthropic(plain), (rows, stream)
    return runs


def test_random_streams_give_the_same_events_and_bytes_in_runs() -> None:
    rng = random.Random(20261203)
    gathered_texts = 0
    for _ in range(3000):
        head = _head(rng)
        events = [_chunk(rng, head) for _ in range(rng.randint(0, 25))]
        if rng.random() < 0.1:
            events = [event.replace(b"\n", b"\r\n") for event in events]
        stream = b"".join(events)
        # An event per read (an upstream that trickles), or the bytes cut anywhere.
        reads = events if rng.random() < 0.25 else _reads(rng, stream)
        runs = _check(stream, reads, include_usage=rng.random() < 0.5)
        gathered_texts += sum(len(r.texts) for r in runs if isinstance(r, TextRun))
    assert gathered_texts > 3000  # the lane really gathers


def test_recorded_streams_give_the_same_events_and_bytes_in_runs() -> None:
    rng = random.Random(7)
    for path in STREAMS:
        stream = json.loads(path.read_text(encoding="utf-8"))["sse"].encode()
        for _ in range(50):
            _check(stream, _reads(rng, stream), include_usage=True)


def test_a_fast_upstreams_text_comes_as_one_run() -> None:
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    text = [
        head + b'"delta":{"content":' + orjson.dumps(t) + b'},"finish_reason":null}]}\n\n' for t in ("a", "b", "c", "d")
    ]
    stop = head + b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    runs, error = _decode([b"".join(text) + stop], runs=True)
    assert error is None
    # The first text chunk is decoded in full (the template is learned from it); the rest gather.
    assert [type(e).__name__ for e in runs] == ["MessageStart", "TextDelta", "TextRun", "MessageStop"]
    assert runs[2] == TextRun(["b", "c", "d"])


def test_what_came_before_a_malformed_chunk_still_comes_first() -> None:
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    good = [head + b'"delta":{"content":' + orjson.dumps(t) + b'},"finish_reason":null}]}\n\n' for t in ("a", "b")]
    runs, error = _decode([b"".join(good) + b"data: {oops\n\n" + good[0]], runs=True)
    assert error is not None and "malformed JSON" in error
    assert _expanded(runs)[1:] == [TextDelta(text="a"), TextDelta(text="b")]


def test_feed_raw_keeps_the_parsers_state_and_events() -> None:
    rng = random.Random(11)
    pieces = [
        b"data: ",
        b"data:",
        b"event: ",
        b"id: 1",
        b": c",
        b"\n",
        b"\n\n",
        b"\r\n",
        b"\r",
        b"x",
        b"\xc3\xa9",
        b"\xc3",
    ]
    for _ in range(20_000):
        stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        reads = _reads(rng, stream) if stream else [b""]
        plain, raw = SSEParser(), SSEParser()
        got_plain: list[Any] = []
        got_raw: list[Any] = []
        for read in reads:
            got_plain += [(e.event, e.data) for e in plain.feed(read)]
            for e in raw.feed_raw(read):
                got_raw.append(
                    (None, e.decode("utf-8", errors="replace")) if isinstance(e, bytes) else (e.event, e.data)
                )
            assert (plain._buf, plain._data, plain._event, plain._pending_cr) == (
                raw._buf,
                raw._data,
                raw._event,
                raw._pending_cr,
            )
        got_plain += [(e.event, e.data) for e in plain.finish()]
        got_raw += [(e.event, e.data) for e in raw.finish()]
        assert got_raw == got_plain, reads


def test_plain_text_chunks_are_matched_undecoded(monkeypatch: Any) -> None:
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    tail = b'},"finish_reason":null}]}\n\n'
    stream = b"".join(head + b'"delta":{"content":' + orjson.dumps(t) + tail for t in ("a", "é", "c", "d"))
    stream += head + b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    decoded: list[str] = []
    template_text = ChatStreamDecoder._template_text

    def counted(self: ChatStreamDecoder, data: str) -> str | None:
        decoded.append(data)
        return template_text(self, data)

    monkeypatch.setattr(ChatStreamDecoder, "_template_text", counted)
    runs, error = _decode([stream], runs=True)
    assert error is None and runs[2] == TextRun(["é", "c", "d"])
    # Of the text chunks only the first, the one the template is learned from, was decoded.
    assert len({d for d in decoded if '"content":' in d}) == 1


def test_a_row_starts_only_where_the_parser_holds_nothing() -> None:
    """A read that starts with the template's event continues what the read before left open
    (a name, a first data line): that event is not a plain text chunk, and ``read`` must not
    take it for one."""
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    text = [head + b'"delta":{"content":' + orjson.dumps(t) + b'},"finish_reason":null}]}\n\n' for t in ("a", "b", "c")]
    stop = head + b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    for left_open in (b"event: odd\n", b'data: {"id":"c",\n', b"data: x\r"):
        reads = [text[0] + text[1] + left_open, text[2] + text[1] + stop]
        plain, plain_error = _decode(reads, runs=False)
        runs, runs_error = _decode(reads, runs=True)
        assert (_expanded(runs), runs_error) == (plain, plain_error), left_open


def test_a_row_is_read_from_the_chunk_without_the_parser() -> None:
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    texts = ["a", 'q"uo\\te', "", "é", "z"]
    rows = [head + b'"delta":{"content":' + orjson.dumps(t) + b'},"finish_reason":null}]}\n\n' for t in texts]
    stop = head + b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    fed: list[bytes] = []

    class Seen(SSEParser):
        def feed_raw(self, chunk: bytes) -> list[Any]:
            fed.append(chunk)
            return super().feed_raw(chunk)

    out, error = ChatStreamDecoder().read(Seen(), b"".join(rows) + stop)
    assert error is None
    assert [type(e).__name__ for e in out] == ["MessageStart", "TextDelta", "TextRun", "MessageStop"]
    assert out[2] == TextRun(['q"uo\\te', "é", "z"])
    # The parser saw the event the template was learned from and the end; never the row.
    assert fed == [rows[0], stop[: stop.index(b"\n\n") + 2], stop[stop.index(b"\n\n") + 2 :]]
