"""What a judge is shown of a conversation: rendered, windowed, truncated plain text.

Layer: ``routers`` — imports ``protocol`` only.

Judges get the conversation as text in one user message rather than as the original message
list: any judge upstream accepts it (no tool definitions needed for tool-call history, no
Anthropic alternation rules), and its size is under our control.

Two views:

* :func:`task_view` — for the capability and custom classifiers (a forecast *before* the work):
  the opening task and the latest message a human wrote, or a window of recent messages.
* :func:`condense` — for the escalation judge (a review *after* a turn): anchors, the newest
  ``window`` messages each cut to ``message_chars``, the turn under review, a total cap.

A "real" user message is one a person wrote: in Anthropic's format tool results travel in user
messages, and treating those as the latest user request made judges forecast from a tool's
output (NVIDIA Switchyard #272). Tool results never count as user text here.
"""

from __future__ import annotations

from collections.abc import Sequence

from switchyard.protocol.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

TRIM_MARKER = " ...[trimmed] "
SYSTEM_ANCHOR_CHARS = 1000
TASK_ANCHOR_CHARS = 2000
REVIEW_CHARS = 2000


def middle_truncate(text: str, limit: int) -> str:
    """Cuts ``text`` to ``limit`` characters keeping the head (2/3) and the tail (1/3).

    The tail matters: error messages and final answers sit at the end of tool output.
    """
    if len(text) <= limit:
        return text
    room = max(0, limit - len(TRIM_MARKER))
    head = (room * 2) // 3
    tail = room - head
    return text[:head] + TRIM_MARKER + (text[-tail:] if tail else "")


def is_real_user(message: Message) -> bool:
    """Whether ``message`` is a user message written by a person (text, no tool results)."""
    return (
        message.role == "user"
        and not any(isinstance(p, ToolResultPart) for p in message.content)
        and any(isinstance(p, TextPart) and p.text.strip() for p in message.content)
    )


def render(message: Message, limit: int | None = None) -> str:
    """One message as ``[role] text`` lines; tool calls as ``tool_call name(args)``."""
    pieces: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text.strip():
                pieces.append(part.text.strip())
        elif isinstance(part, ImagePart):
            pieces.append("[image]")
        elif isinstance(part, ToolCallPart):
            pieces.append(f"tool_call {part.name}({part.arguments})")
        elif isinstance(part, ToolResultPart):
            flag = " (error)" if part.is_error else ""
            images = sum(1 for p in part.content if isinstance(p, ImagePart))
            body = part.text + (f" [{images} image(s)]" if images else "")
            pieces.append(f"tool_result{flag}: {body.strip()}")
        elif isinstance(part, ReasoningPart):
            continue  # judges assess actions and words, not private reasoning
    text = "\n".join(pieces) or "(empty)"
    if limit is not None:
        text = middle_truncate(text, limit)
    role = "tool" if message.role == "tool" else message.role
    return f"[{role}] {text}"


def window_start(messages: Sequence[Message], window: int) -> int:
    """Index where a window over the newest ``window`` messages starts.

    The start moves earlier when needed so that no tool result is shown without the tool call
    it answers; a result whose call cannot be found (a truncated history) leaves the counted
    start as it is.
    """
    if window <= 0:
        return len(messages)
    start = max(0, len(messages) - window)
    missing = _unanswered(messages[start:])
    index = start
    while missing and index > 0:
        index -= 1
        msg = messages[index]
        missing -= {c.id for c in msg.tool_calls}
        missing |= {r.call_id for r in msg.tool_results}
    return start if missing else index


def _unanswered(messages: Sequence[Message]) -> set[str]:
    """Ids of tool results in ``messages`` whose call is not among them."""
    calls = {c.id for m in messages for c in m.tool_calls}
    return {r.call_id for m in messages for r in m.tool_results} - calls


def _conversation(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role not in ("system", "developer")]


def task_view(messages: Sequence[Message], *, window: int | None, message_chars: int) -> str:
    """The classifier's view: opening task, latest real user message, optional recent window.

    Client system/developer messages are left out: they describe the harness, not the task,
    and can be very long.

    Args:
        messages: The conversation.
        window: ``None`` for task + latest user message; ``N`` to add the newest ``N`` messages
            after the task (``0``: the task only).
        message_chars: Cap on each shown message.
    """
    convo = _conversation(messages)
    first = next((i for i, m in enumerate(convo) if is_real_user(m)), None)
    if first is None:
        first = next((i for i, m in enumerate(convo) if m.role == "user"), None)
    if first is None:
        return "## Opening task\n(no user message)\n"
    out = ["## Opening task", middle_truncate(render(convo[first])[len("[user] ") :], message_chars)]
    rest = convo[first + 1 :]
    latest = next((i for i in range(len(rest) - 1, -1, -1) if is_real_user(rest[i])), None)
    if window is None:
        if latest is not None:
            out += ["", "## Latest user message", middle_truncate(rest[latest].text.strip(), message_chars)]
        return "\n".join(out) + "\n"
    start = window_start(rest, window)
    if latest is not None and latest < start:
        # The person's current request scrolled out of the window (a long tool loop): keep it.
        out += ["", "## Latest user message", middle_truncate(rest[latest].text.strip(), message_chars)]
    if start < len(rest):
        out += ["", f"## Recent conversation (last {len(rest) - start} of {len(rest)} messages)"]
        out += [render(m, message_chars) for m in rest[start:]]
    return "\n".join(out) + "\n"


def condense(
    messages: Sequence[Message],
    *,
    review: Message | None,
    window: int,
    message_chars: int,
    max_chars: int,
) -> str:
    """The escalation judge's view of a conversation.

    Layout: a header line; anchors kept whatever happens (each system/developer message cut to
    1,000 characters, the opening user message to 2,000); the newest ``window`` messages after
    the opening task, each cut to ``message_chars``; then the turn under review (cut to 2,000).
    When the whole exceeds ``max_chars``, the oldest window lines go first; if that is not
    enough the text is cut in the middle, so the anchors and the reviewed turn survive.

    Args:
        messages: The conversation as the caller sent it.
        review: The assistant turn being judged (``None`` to judge the conversation as is).
        window: Messages of recent history to show.
        message_chars: Cap on each window message.
        max_chars: Cap on the whole text.
    """
    anchors: list[str] = []
    first_user: int | None = None
    for i, msg in enumerate(messages):
        if msg.role in ("system", "developer"):
            anchors.append(render(msg, SYSTEM_ANCHOR_CHARS))
        elif first_user is None and msg.role == "user":
            first_user = i
            anchors.append(render(msg, TASK_ANCHOR_CHARS))
    after = (
        [] if first_user is None else [m for m in messages[first_user + 1 :] if m.role not in ("system", "developer")]
    )
    start = window_start(after, window)
    lines = [render(m, message_chars) for m in after[start:]]
    turns = sum(1 for m in messages if m.role == "assistant") + (1 if review is not None else 0)
    header = (
        f"Conversation turn {turns}; showing the last {len(lines)} of {len(after)} messages after the task framing."
    )
    tail: list[str] = []
    if review is not None:
        tail = ["", "## Turn under review (the efficient model's latest answer)", render(review, REVIEW_CHARS)]

    def assemble(shown: list[str], dropped: int) -> str:
        body = [header, "", "## Task framing", *anchors, "", "## Recent messages"]
        if dropped:
            body.append(f"[{dropped} older message(s) dropped to fit]")
        body += shown or ["(none)"]
        return "\n".join(body + tail) + "\n"

    # Drop the oldest window lines until the text fits (sizes summed, not re-joined each time).
    fixed = len(assemble([], 0)) - len("(none)\n") + len("[9999 older message(s) dropped to fit]\n")
    total = fixed + sum(len(line) + 1 for line in lines)
    dropped = 0
    while total > max_chars and dropped < len(lines):
        total -= len(lines[dropped]) + 1
        dropped += 1
    text = assemble(lines[dropped:], dropped)
    if len(text) > max_chars:
        text = middle_truncate(text, max_chars)
    return text
