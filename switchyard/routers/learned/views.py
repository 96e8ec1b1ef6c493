"""Which part of a request a learned router reads (the ``input`` key).

Layer: ``routers``.

* ``first_user`` — the first user message: the task. Every turn of an agent session reads the
  same text, so a session is decided once.
* ``last_user`` — the newest user message with text.
* ``conversation`` (default) — the newest ``turns`` messages, each as ``role: text`` (tool calls
  as ``call name(arguments)``, tool results as their text), after a short digest of the system
  prompt (its first characters and its length). What changes from turn to turn is at the end,
  and the extractor keeps the tail when it has to truncate, so two turns of one session get
  different features even when they share a long prefix. A request with a single user message
  and no system prompt reads exactly that message, so single-prompt datasets (MMLU, GSM8K, ...)
  give the same text under every view.

Training (``switchyard train-probe --input``) applies the same function to each dataset row, so
what the probe was trained on is what it reads when serving.
"""

from __future__ import annotations

from typing import Literal

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest

TextView = Literal["first_user", "last_user", "conversation"]

DIGEST_CHARS = 160
"""Characters of the system prompt kept in the conversation view's digest."""
PART_CHARS = 2000
"""Characters kept of one message part (its end: newest output matters most)."""
ARG_CHARS = 200
"""Characters kept of one tool call's arguments."""


def view_text(request: ChatRequest, view: TextView, turns: int = 6) -> str:
    """The text a learned router reads from ``request`` under ``view``.

    Args:
        request: The request.
        view: ``first_user``, ``last_user`` or ``conversation``.
        turns: Messages kept by the ``conversation`` view (newest last).
    """
    if view == "first_user":
        return request.first_user_text()
    if view == "last_user":
        return request.last_user_text()
    return conversation_text(request.messages, turns)


def conversation_text(messages: list[Message], turns: int) -> str:
    """The ``conversation`` view (see the module docs)."""
    body = [m for m in messages if m.role not in ("system", "developer")]
    sys_text = " ".join(m.text for m in messages if m.role in ("system", "developer") and m.text).strip()
    if not sys_text and len(body) == 1 and body[0].role == "user" and not body[0].tool_results:
        return body[0].text
    lines: list[str] = []
    if sys_text:
        flat = " ".join(sys_text.split())
        more = "…" if len(flat) > DIGEST_CHARS else ""
        lines.append(f"system ({len(sys_text)} chars): {flat[:DIGEST_CHARS]}{more}")
    for msg in body[-turns:] if turns > 0 else []:
        lines.append(f"{msg.role}: {_message_text(msg)}")
    return "\n".join(lines)


def _message_text(msg: Message) -> str:
    pieces: list[str] = []
    for part in msg.content:
        if isinstance(part, TextPart):
            pieces.append(_tail(part.text, PART_CHARS))
        elif isinstance(part, ToolCallPart):
            pieces.append(f"call {part.name}({_tail(part.arguments, ARG_CHARS)})")
        elif isinstance(part, ToolResultPart):
            flag = "error " if part.is_error else ""
            pieces.append(f"[{flag}result] {_tail(part.text, PART_CHARS)}")
    return " ".join(pieces)


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]
