"""SSE framing: the parser must give the same events however the bytes arrive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.wire.sse import DONE, KEEPALIVE, SSEEvent, SSEParser, frame

STREAMS = sorted((Path(__file__).parent / "fixtures" / "openai_chat" / "streams").glob("*.json"))


def recorded(path: Path) -> bytes:
    return json.loads(path.read_text(encoding="utf-8"))["sse"].encode()


def parse(chunks: list[bytes]) -> list[SSEEvent]:
    parser = SSEParser()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.finish())
    return out


def with_line_ends(raw: bytes, end: bytes) -> bytes:
    return raw.replace(b"\n", end)


@pytest.mark.parametrize("path", STREAMS, ids=[p.stem for p in STREAMS])
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_every_split_point_gives_the_same_events(path: Path, end: bytes) -> None:
    raw = with_line_ends(recorded(path), end)
    whole = parse([raw])
    assert whole == parse([recorded(path)]), "line ends must not matter"
    assert whole and all(e.data for e in whole)
    for i in range(len(raw) + 1):
        assert parse([raw[:i], raw[i:]]) == whole, f"split at byte {i}"


@pytest.mark.parametrize("path", STREAMS, ids=[p.stem for p in STREAMS])
def test_byte_by_byte_and_three_way_splits(path: Path) -> None:
    raw = with_line_ends(recorded(path), b"\r\n")
    whole = parse([raw])
    assert parse([raw[i : i + 1] for i in range(len(raw))]) == whole
    step = max(1, len(raw) // 40)
    for i in range(0, len(raw), step):
        for j in range(i, len(raw), step):
            assert parse([raw[:i], raw[i:j], raw[j:]]) == whole


def test_multibyte_utf8_split_inside_a_character() -> None:
    text = "é世🚀"
    raw = frame(json.dumps({"t": text}, ensure_ascii=False).encode())
    cut = raw.index("🚀".encode()) + 2  # in the middle of the 4-byte emoji
    assert parse([raw[:cut], raw[cut:]]) == [SSEEvent(None, json.dumps({"t": text}, ensure_ascii=False))]


def test_empty_chunks_change_nothing() -> None:
    # An empty read between the CR and the LF of a CRLF must not split the event in two.
    assert parse([b"data: a\r", b"", b"\ndata: b\r\n", b"", b"\r\n"]) == [SSEEvent(None, "a\nb")]


@pytest.mark.parametrize(
    "raw",
    [
        b"data:\n\n",
        b"data: \n\n",
        b"event: ping\n\n",
        b"id: 7\n\n",
        b"retry: 100\n\n",
        b": comment\n\n",
        b"\n\n\n",
        b"event: ping\ndata:\n\n",
    ],
)
def test_no_event_without_data(raw: bytes) -> None:
    assert parse([raw]) == []


def test_fields_and_multiline_data() -> None:
    raw = b"event: delta\nid: 3\ndata: line one\ndata:line two\nunknown: x\n\ndata\n\n"
    # A field name alone (``data``) is a data line with an empty value; alone it is no event.
    assert parse([raw]) == [SSEEvent("delta", "line one\nline two")]


def test_final_event_without_blank_line_is_flushed() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: tail") == []
    assert parser.finish() == [SSEEvent(None, "tail")]


def test_invalid_utf8_does_not_raise() -> None:
    (event,) = parse([b"data: \xff\xfe ok\n\n"])
    assert event.data.endswith(" ok")


def test_writer_frames() -> None:
    assert frame(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert frame(b"{}", "message_start") == b"event: message_start\ndata: {}\n\n"
    assert parse([KEEPALIVE, frame(b"x"), DONE]) == [SSEEvent(None, "x"), SSEEvent(None, "[DONE]")]


_payload = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), min_size=1, max_size=30
).filter(lambda s: s.strip() == s and s != "")


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(st.tuples(st.none() | st.sampled_from(["a", "delta"]), _payload), min_size=1, max_size=6),
    end=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_any_framed_stream_any_chunking(payloads: list[tuple[str | None, str]], end: bytes, cuts: list[int]) -> None:
    raw = b"".join(frame(p.encode(), e) for e, p in payloads).replace(b"\n", end)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert parse(chunks) == [SSEEvent(e, p) for e, p in payloads]
