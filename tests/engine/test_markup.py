"""Item 56: reasoning/tool-call markup in a Chat upstream's text flags the target (no HTTP)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from switchyard.engine.markup import MarkupScanner, find_marker, response_marker
from switchyard.protocol.messages import Message, ReasoningPart, TextPart
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.stream import MessageStart, MessageStop, StreamEvent, TextDelta, UsageDelta

Rig = Any

LEAKED_THINK = "The user greets me; reply briefly.\n</think>\n\nHello!"
LEAKED_CALL = "<tool_call>\n<function=lookup>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>"


def answer(text: str) -> ChatResponse:
    return ChatResponse(id="r", model="m", content=[TextPart(text=text)], usage=Usage(input_tokens=3, output_tokens=2))


def request(route: str = "solo", stream: bool = False) -> ChatRequest:
    return ChatRequest(model=route, messages=[Message.of("user", "hi")], stream=stream)


def stream_of(*texts: str) -> list[StreamEvent]:
    return [
        MessageStart(id="s", model="m"),
        *[TextDelta(text=t) for t in texts],
        MessageStop(stop_reason="end_turn"),
        UsageDelta(usage=Usage(input_tokens=3, output_tokens=2)),
    ]


def clients(**extra: Any) -> dict[str, Any]:
    base = {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    return {"up": {**base, "circuit_breaker": {"failures": 2, "cooldown_s": 60}, **extra}}


# -- the detector ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        (LEAKED_THINK, "</think>"),
        ("<think>\nhmm", "<think>"),
        (LEAKED_CALL, "<tool_call>"),
        ("<function=lookup>\n<parameter=q>x</parameter>\n</function>", "<function="),
        ("if a < b and b > c: return '<div>'", None),
        ("plain text", None),
        ("", None),
    ],
)
def test_find_marker(text: str, marker: str | None) -> None:
    assert find_marker(text) == marker


def test_scanner_finds_a_marker_split_across_deltas() -> None:
    scanner = MarkupScanner()
    assert [scanner.feed(t) for t in ("Thinking about it.\n</th", "ink>", "\n\nAnswer")] == [None, "</think>", None]
    assert scanner.found == "</think>"
    one_by_one = MarkupScanner()
    found = [one_by_one.feed(c) for c in "ok <tool_call>"]
    assert found[-1] == "<tool_call>" and found[:-1] == [None] * (len(found) - 1)


def test_scanner_stays_quiet_on_clean_text() -> None:
    scanner = MarkupScanner()
    assert all(scanner.feed(t) is None for t in ("x < y", " and ", "<b>bold</b>", " </thinking? no"))
    assert scanner.found is None


def test_response_marker_reads_text_not_reasoning() -> None:
    clean = ChatResponse(id="r", model="m", content=[ReasoningPart(text="</think>"), TextPart(text="fine")])
    assert response_marker(clean) is None
    assert response_marker(answer(LEAKED_CALL)) == "<tool_call>"


# -- what the engine does -------------------------------------------------------------------------


async def test_flag_mode_passes_the_answer_and_flags_the_target(
    rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    r = rig({"cheap": [answer(LEAKED_THINK)], "spare": [answer("spare")]}, llm_clients=clients())
    with caplog.at_level(logging.WARNING, logger="switchyard.health"):
        for _ in range(3):
            done = await r.engine.complete(request())
            assert done.response.text == LEAKED_THINK and done.target == "cheap"
    record = r.records[-1]
    assert record.details["markup_leak"] == {"target": "cheap", "marker": "</think>", "action": "flagged"}
    leaks = r.engine.health.leaks("cheap")
    assert leaks is not None and leaks["count"] == 3 and leaks["flagged"] and leaks["markers"] == {"</think>": 3}
    warnings = [m for m in caplog.messages if "markup" in m]
    assert len(warnings) == 1 and "reasoning parser" in warnings[0] and "'cheap'" in warnings[0]
    stats = r.engine.stats()
    assert stats["counters"]["markup_leaks"] == 3 and stats["targets"]["cheap"]["markup_leaks"]["count"] == 3
    assert r.engine.health.state("cheap") == "closed"  # flagging never touches routing
    report = r.engine.monitor.report(r.engine.targets)
    assert report["status"] == "degraded" and report["targets"]["cheap"]["problems"] == ["markup_leak"]
    assert report["targets"]["cheap"]["available"] is True


async def test_fallback_mode_tries_the_next_candidate(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [answer(LEAKED_CALL)], "spare": [answer("clean")]}, llm_clients=clients(markup_leak="fallback"))
    done = await r.engine.complete(request())
    assert done.response.text == "clean" and done.target == "spare"
    record = r.records[-1]
    assert [(a.target, a.ok, a.error_class) for a in record.attempts] == [
        ("cheap", False, "protocol"),
        ("spare", True, None),
    ]
    assert "tool-call parser" in (record.attempts[0].error or "")
    assert record.details["markup_leak"]["action"] == "fallback"
    await r.engine.complete(request())
    assert r.engine.health.state("cheap") == "open"  # two leaks: the breaker (failures: 2) opened
    await r.engine.complete(request())
    assert [(s.target, s.reason) for s in r.records[-1].skipped] == [("cheap", "circuit_open")]


async def test_off_mode_does_not_look(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [answer(LEAKED_THINK)]}, llm_clients=clients(markup_leak="off"))
    await r.engine.complete(request())
    assert r.engine.health.leaks("cheap") is None and "markup_leak" not in r.records[-1].details


async def test_other_formats_are_not_checked(rig: Callable[..., Rig]) -> None:
    anthropic = {"format": "anthropic_messages", "base_url": "http://127.0.0.1:9", "max_retries": 0}
    r = rig({"cheap": [answer(LEAKED_THINK)]}, llm_clients={"up": anthropic})
    await r.engine.complete(request())
    assert r.engine.health.leaks("cheap") is None


async def test_stream_is_passed_on_unchanged_and_flagged(rig: Callable[..., Rig]) -> None:
    r = rig({"cheap": [stream_of("Let me think.", "\n</th", "ink>\n\n", "Hello")]}, llm_clients=clients())
    events = await r.engine.stream(request(stream=True))
    text = "".join([e.text async for e in events if isinstance(e, TextDelta)])
    assert text == "Let me think.\n</think>\n\nHello"
    assert r.records[-1].details["markup_leak"] == {"target": "cheap", "marker": "</think>", "action": "flagged"}
    assert r.engine.stats()["counters"]["markup_leaks"] == 1


async def test_stream_fallback_before_the_first_byte(rig: Callable[..., Rig]) -> None:
    r = rig(
        {"cheap": [stream_of(LEAKED_CALL)], "spare": [stream_of("clean")]},
        llm_clients=clients(markup_leak="fallback"),
    )
    events = await r.engine.stream(request(stream=True))
    assert (await events.collect()).text == "clean"
    assert [a.target for a in r.records[-1].attempts] == ["cheap", "spare"]
    assert r.backend.closed_streams >= 1  # the leaking stream was closed, never relayed


async def test_stream_leak_after_the_first_byte_counts_against_the_breaker(rig: Callable[..., Rig]) -> None:
    r = rig(
        {"cheap": [stream_of("Thinking", " hard.\n</think>", "Hi")], "spare": [stream_of("clean")]},
        llm_clients=clients(markup_leak="fallback"),
    )
    for _ in range(2):
        events = await r.engine.stream(request(stream=True))
        assert "</think>" in (await events.collect()).text  # too late to replace: passed on
        assert r.records[-1].details["markup_leak"]["action"] == "flagged"
    assert r.engine.health.state("cheap") == "open"
    events = await r.engine.stream(request(stream=True))
    assert (await events.collect()).text == "clean"
