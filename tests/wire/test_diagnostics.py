"""Every lossy conversion is reported: logged once per kind, counted every time."""

from __future__ import annotations

import logging

import pytest

from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.wire import codec, diagnostics


def test_report_logs_once_per_kind_and_counts_all(caplog: pytest.LogCaptureFixture) -> None:
    diagnostics.reset()
    with caplog.at_level(logging.WARNING, logger="switchyard.wire"):
        for _ in range(3):
            diagnostics.report("test.kind", "something was lost")
        diagnostics.report("test.other", "something else")
    assert diagnostics.counts() == {"test.kind": 3, "test.other": 1}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "test.kind" in lines[0] and "only counted" in lines[0]


def test_a_translation_loss_is_reported() -> None:
    diagnostics.reset()
    request = ChatRequest(
        messages=[
            Message(role="tool", content=[ToolResultPart(call_id="c", content=[TextPart(text="x")], is_error=True)])
        ],
        seed=4,
        stop=["END"],
    )
    codec("openai_responses").encode_request(request, model="m", stream=False)
    assert {"openai_responses.seed_dropped", "openai_responses.stop_dropped"} <= set(diagnostics.counts())
