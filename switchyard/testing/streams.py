"""Independent checks of the SSE streams a router emits, per wire format.

Used by Switchyard's own tests and usable by anyone who wants to verify a proxy: each
``check_*`` function raises ``AssertionError`` naming the first rule a stream breaks. The
parser here is deliberately separate from ``switchyard.wire.sse`` and stricter than SDKs.
"""

from __future__ import annotations

import json
from typing import Any

from switchyard._dataclass import dataclass


@dataclass(slots=True, frozen=True)
class RawEvent:
    """One SSE event as sent: its ``event:`` name (or ``None``), its data and parsed JSON."""

    event: str | None
    data: str
    json: Any


def parse(raw: bytes) -> list[RawEvent]:
    """Splits SSE bytes into events, enforcing the framing every SDK can read.

    Rules: only ``event:``, ``data:`` and ``:`` comment lines; exactly one ``data:`` line per
    event and never an empty one; no two consecutive blank lines; the stream ends with a blank
    line.
    """
    text = raw.decode("utf-8")
    assert "\r" not in text, "use \\n line ends"
    assert "\n\n\n" not in text, "two consecutive blank lines"
    assert not text or text.endswith("\n\n"), "stream does not end with a blank line"
    events: list[RawEvent] = []
    for block in text.split("\n\n")[:-1]:
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            field, _, value = line.partition(": ")
            assert field in ("event", "data"), f"unexpected SSE field line {line!r}"
            if field == "event":
                name = value
            else:
                data.append(value)
        if not data:
            assert name is None, f"event {name!r} without data"
            continue  # a comment-only block (keep-alive)
        assert len(data) == 1 and data[0], "an event must carry exactly one non-empty data line"
        parsed = None if data[0] == "[DONE]" else json.loads(data[0])
        events.append(RawEvent(name, data[0], parsed))
    return events


def check_chat(events: list[RawEvent], *, include_usage: bool) -> None:
    """OpenAI Chat stream rules (unnamed ``data:`` events, ``[DONE]`` last)."""
    assert events and events[-1].data == "[DONE]", "a Chat stream ends with data: [DONE]"
    chunks = [e.json for e in events[:-1]]
    assert all(e.event is None for e in events), "Chat streams have no event names"
    if any("error" in c for c in chunks):
        assert "error" in chunks[-1], "nothing may follow an in-band error but [DONE]"
        return
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant", "first chunk sets the role"
    finishes = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason") is not None]
    assert len(finishes) == 1, f"exactly one chunk carries finish_reason, got {len(finishes)}"
    if include_usage:
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"], "usage chunk comes last before [DONE]"
        assert all(c.get("usage") is None for c in chunks[:-1]), "earlier chunks carry usage: null"
    else:
        assert all(c["choices"] for c in chunks), "no choices: [] chunk without stream_options.include_usage"
    seen: set[int] = set()
    for c in chunks:
        for choice in c["choices"]:
            for tc in choice["delta"].get("tool_calls") or []:
                if tc["index"] not in seen:
                    seen.add(tc["index"])
                    assert tc.get("id") and tc.get("type"), "first delta of a tool call has id and type"
                else:
                    assert "id" not in tc and "type" not in tc, "later deltas carry only arguments"
    assert sorted(seen) == list(range(len(seen))), "tool call indexes are contiguous from 0"


def check_anthropic(events: list[RawEvent]) -> None:
    """Anthropic stream grammar (named events, block pairing, one start, one stop)."""
    assert events, "empty stream"
    for e in events:
        assert e.event is not None and isinstance(e.json, dict), "every Anthropic event is named JSON"
        assert e.json.get("type") == e.event, f"event name {e.event!r} != data.type {e.json.get('type')!r}"
    kinds = [e.event for e in events if e.event != "ping"]
    if "error" in kinds:
        assert kinds[-1] == "error" and kinds.count("error") == 1, "an error event ends the stream"
        kinds = kinds[:-1]
        if not kinds:
            return
    else:
        assert kinds[-1] == "message_stop" and kinds.count("message_stop") == 1, "one message_stop, last"
    assert kinds[0] == "message_start" and kinds.count("message_start") == 1, "one message_start, first"
    open_index: int | None = None
    next_index = 0
    for e in events:
        if e.event == "content_block_start":
            assert open_index is None, "a block started while another is open"
            assert e.json["index"] == next_index, f"block index {e.json['index']} != expected {next_index}"
            open_index = next_index
        elif e.event == "content_block_delta":
            assert e.json["index"] == open_index, "delta for a block that is not open"
        elif e.event == "content_block_stop":
            assert e.json["index"] == open_index, "stop for a block that is not open"
            open_index = None
            next_index += 1
        elif e.event in ("message_delta", "message_stop"):
            assert open_index is None, f"{e.event} while a block is open"
    if "error" not in [e.event for e in events]:
        deltas = [e.json for e in events if e.event == "message_delta"]
        assert deltas and deltas[-1]["delta"].get("stop_reason"), "message_delta carries the stop_reason"
        assert "output_tokens" in deltas[-1]["usage"], "message_delta carries cumulative output_tokens"


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def check_responses(events: list[RawEvent]) -> dict[str, Any]:
    """Responses stream rules; returns the final response object."""
    assert events, "empty stream"
    assert all(e.data != "[DONE]" for e in events), "Responses streams never send [DONE]"
    for n, e in enumerate(events):
        assert e.event == e.json.get("type"), f"event name {e.event!r} != data.type"
        assert e.json.get("sequence_number") == n, f"sequence_number {e.json.get('sequence_number')} != {n}"
    types = [e.event for e in events]
    assert types[:2] == ["response.created", "response.in_progress"], "created, then in_progress"
    terminals = [t for t in types if t in TERMINAL]
    assert len(terminals) == 1 and types[-1] in TERMINAL, "exactly one terminal event, last"
    final: dict[str, Any] = events[-1].json["response"]
    ids = {events[0].json["response"]["id"], final["id"]}
    assert len(ids) == 1, "the response id stays the same"
    open_items: dict[int, dict[str, Any]] = {}
    done: dict[int, dict[str, Any]] = {}
    for e in events:
        data = e.json
        if e.event == "response.output_item.added":
            index = data["output_index"]
            assert index == len(done) + len(open_items) and not open_items, "items open one at a time, in order"
            open_items[index] = data["item"]
        elif e.event == "response.output_item.done":
            index = data["output_index"]
            assert index in open_items, "output_item.done without output_item.added"
            assert open_items.pop(index)["id"] == data["item"]["id"], "item id changed between added and done"
            done[index] = data["item"]
        elif "output_index" in data:
            assert data["output_index"] in open_items, f"{e.event} outside its item"
    assert not open_items, "an item was never finished"
    if final["status"] != "failed":
        assert [i["id"] for i in final["output"]] == [done[i]["id"] for i in sorted(done)], "output order"
    for item in done.values():
        if item["type"] == "function_call":
            args = "".join(
                e.json["delta"]
                for e in events
                if e.event == "response.function_call_arguments.delta" and e.json["item_id"] == item["id"]
            )
            assert args == item["arguments"], "argument deltas concatenate to the final arguments"
            assert item["call_id"] != item["id"], "call_id differs from the item id"
    return final
