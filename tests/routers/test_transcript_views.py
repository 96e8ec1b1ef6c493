"""What judges are shown: classifier task views and the escalation transcript."""

from __future__ import annotations

from _routing_helpers import anthropic_tool_result, assistant_call, tool_result, user

from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.routers.transcript import (
    TRIM_MARKER,
    condense,
    is_real_user,
    middle_truncate,
    task_view,
    window_start,
)


def test_middle_truncate_keeps_head_and_tail() -> None:
    text = "H" * 600 + "T" * 400
    cut = middle_truncate(text, 100)
    assert len(cut) == 100
    assert cut.startswith("H" * 57) and cut.endswith("T" * 29)
    assert TRIM_MARKER in cut
    assert middle_truncate("short", 100) == "short"


def test_default_view_is_task_plus_latest_real_user_message_and_hides_system() -> None:
    msgs = [
        Message.of("system", "SECRET HARNESS PROMPT"),
        user("Fix the flaky test in ci.py"),
        assistant_call("c1"),
        tool_result("c1", "ci.py tests.py"),
        Message.of("assistant", "Done."),
        user("Now also add a changelog entry"),
        assistant_call("c2"),
        tool_result("c2", "TOOL OUTPUT"),
    ]
    view = task_view(msgs, window=None, message_chars=4000)
    assert "Fix the flaky test in ci.py" in view
    assert "## Latest user message\nNow also add a changelog entry" in view
    assert "SECRET HARNESS PROMPT" not in view
    assert "TOOL OUTPUT" not in view


def test_anthropic_tool_result_is_never_the_latest_user_message() -> None:
    # NVIDIA Switchyard #272: in Anthropic's format tool results are user messages.
    msgs = [
        user("Refactor the parser"),
        assistant_call("c1"),
        anthropic_tool_result("c1", "Traceback: parser.py line 3"),
    ]
    assert not is_real_user(msgs[-1])
    view = task_view(msgs, window=None, message_chars=4000)
    assert "Traceback" not in view
    assert "Latest user message" not in view  # the only real user message is the task itself


def test_tool_result_with_reminder_text_is_still_a_continuation() -> None:
    msg = Message(
        role="user",
        content=[ToolResultPart(call_id="c", content=[TextPart(text="ok")]), TextPart(text="<system-reminder>")],
    )
    assert not is_real_user(msg)


def test_window_never_splits_a_tool_call_from_its_result() -> None:
    msgs = [
        user("task"),
        assistant_call("a"),
        tool_result("a", "r-a"),
        Message(role="assistant", content=[*assistant_call("b").content, *assistant_call("c").content]),
        tool_result("b", "r-b"),
        tool_result("c", "r-c"),
    ]
    rest = msgs[1:]
    # A window of 2 would start at the result of "b"; it moves back to the call.
    assert window_start(rest, 2) == 2
    assert window_start(rest, 1) == 2
    assert window_start(rest, 0) == len(rest)
    assert window_start(rest, 50) == 0
    view = task_view(msgs, window=2, message_chars=4000)
    assert "tool_call bash" in view and "r-b" in view and "r-c" in view
    assert "r-a" not in view


def test_window_with_an_orphan_result_keeps_the_counted_start() -> None:
    rest = [tool_result("gone", "orphan"), Message.of("assistant", "x"), tool_result("gone2", "y")]
    assert window_start(rest, 1) == 2


def test_window_keeps_the_latest_user_message_when_it_scrolled_out() -> None:
    msgs = [user("Build the feature"), Message.of("assistant", "ok"), user("Please use Rust")]
    for i in range(6):
        msgs += [assistant_call(f"k{i}"), tool_result(f"k{i}", f"out{i}")]
    view = task_view(msgs, window=2, message_chars=4000)
    assert "## Latest user message\nPlease use Rust" in view
    assert "out5" in view and "out4" not in view
    assert task_view(msgs, window=0, message_chars=4000).count("##") == 2  # task + latest user


def test_view_messages_are_capped() -> None:
    view = task_view([user("x" * 10_000)], window=None, message_chars=500)
    assert len(view) < 600


def test_condensed_transcript_layout() -> None:
    msgs = [
        Message.of("system", "S" * 3000),
        user("U" * 5000),
        *[m for i in range(40) for m in (assistant_call(f"c{i}", args="{}"), tool_result(f"c{i}", f"out-{i} " * 200))],
    ]
    review = Message.of("assistant", "I will try the same command again.")
    text = condense(msgs, review=review, window=4, message_chars=300, max_chars=18_000)
    assert text.startswith("Conversation turn 41; showing the last 4 of 80 messages after the task framing.")
    assert "[system] " + "S" * 600 in text and "S" * 1001 not in text
    assert "U" * 1300 in text and "U" * 2001 not in text
    assert "out-39" in text and "out-37" not in text
    assert text.rstrip().endswith("[assistant] I will try the same command again.")
    for line in text.splitlines():
        if line.startswith("[tool]"):
            assert len(line) <= 300 + len("[tool] ")


def test_condensed_transcript_drops_oldest_lines_then_cuts_the_middle() -> None:
    msgs = [user("task"), *[Message.of("assistant", f"step {i} " + "z" * 400) for i in range(30)]]
    review = Message.of("assistant", "FINAL TURN")
    text = condense(msgs, review=review, window=30, message_chars=500, max_chars=4000)
    assert len(text) <= 4000
    assert "older message(s) dropped to fit" in text
    assert "step 29" in text and "step 0 " not in text
    assert "FINAL TURN" in text
    tiny = condense(
        [Message.of("system", "s" * 5000), user("t" * 5000)],
        review=review,
        window=5,
        message_chars=500,
        max_chars=2000,
    )
    assert len(tiny) == 2000
    assert tiny.startswith("Conversation turn") and "FINAL TURN" in tiny
