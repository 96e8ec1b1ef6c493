"""``protocol.messages.message_chars``: the one character count of a message, read by the engine's
prompt-size check and by the trajectory router's context feature (issue 48 review)."""

from __future__ import annotations

from switchyard.engine.windows import PromptSize
from switchyard.protocol.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    message_chars,
)
from switchyard.protocol.request import ChatRequest
from switchyard.routers.trajectory.features import advance

CALL = Message(
    role="assistant", content=[ReasoningPart(text="think"), ToolCallPart(id="c1", name="ls", arguments="{}")]
)
RESULT = Message(
    role="tool",
    content=[
        ToolResultPart(
            call_id="c1", content=[TextPart(text="a.py"), ImagePart(url="https://x/y.png"), TextPart(text="b")]
        )
    ],
)


def test_counts_text_reasoning_calls_and_result_text_not_images() -> None:
    assert message_chars(Message.of("user", "hello")) == 5
    assert message_chars(CALL) == len("think") + len("ls") + len("{}")
    assert message_chars(RESULT) == len("a.py") + len("b")


def test_the_engine_and_the_trajectory_router_count_alike() -> None:
    messages = [Message.of("user", "fix the bug"), CALL, RESULT]
    total = sum(message_chars(m) for m in messages)
    assert PromptSize(ChatRequest(messages=messages)).chars() == total  # no tools: messages only
    assert advance(None, messages, 64).chars == total
