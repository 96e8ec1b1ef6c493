"""Reasoning and tool-call markup leaking into the visible text of a Chat upstream's answer.

Layer: ``engine`` — pure string checks, no I/O.

vLLM (and SGLang, llama.cpp …) turn the model's raw ``<think>…</think>`` and Nemotron/Qwen
``<tool_call><function=NAME><parameter=…>`` XML into the ``reasoning`` field and structured
``tool_calls`` only when the server runs the matching parsers (``--reasoning-parser``,
``--tool-call-parser``). Without them, or with the wrong ones, the markup arrives in ``content``
and an agent would show the user the model's thoughts, or never run the tool it called.

The check is deliberately cheap: a text with no ``<`` (most of them) costs one ``memchr``-like
scan; otherwise a few substring searches. Streams are checked delta by delta as they pass, with
the last few characters of the previous delta kept so a marker split across two deltas is
still found; scanning stops at the first find. What a find does is the engine's business
(see :mod:`switchyard.engine.core` and ``docs/reliability.md``): by default the answer is
passed on and the target is flagged degraded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from switchyard.engine.health import Health
from switchyard.engine.records import DecisionRecord
from switchyard.protocol.errors import UpstreamProtocolError
from switchyard.protocol.messages import TextPart
from switchyard.protocol.response import ChatResponse
from switchyard.protocol.stream import StreamEvent, TextDelta
from switchyard.protocol.targets import TargetInfo
from switchyard.wire.openai_chat.plain_answer import PlainAnswer
from switchyard.wire.text_run import TextRun

if TYPE_CHECKING:
    from switchyard.engine.target import Target

logger = logging.getLogger("switchyard.health")

MARKERS = ("</think>", "<think>", "<tool_call>", "<function=")
"""Strings that never belong in the visible text of a parsed answer."""

_KEEP = max(len(m) for m in MARKERS) - 1
"""Characters of a delta kept to find a marker that straddles two deltas."""

PARSER_HINT = {
    "</think>": "reasoning parser (vLLM: --reasoning-parser nemotron_v3)",
    "<think>": "reasoning parser (vLLM: --reasoning-parser nemotron_v3)",
    "<tool_call>": "tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser qwen3_coder)",
    "<function=": "tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser qwen3_coder)",
}
"""Which upstream parser is missing or wrong, per marker (for the log line)."""

CHECKED_FORMATS = frozenset({"openai_chat"})
"""Upstream formats whose answers are checked: the other APIs never return raw model markup."""


class MarkupLeakError(UpstreamProtocolError):
    """A Chat upstream's answer carried raw markup and its client says ``markup_leak: fallback``.

    A protocol-class failure: not retried on the same target, the next candidate is tried, and
    it counts towards the target's circuit breaker.
    """

    code = "upstream_markup_leak"


def find_marker(text: str) -> str | None:
    """The first marker of :data:`MARKERS` that ``text`` contains, or ``None``."""
    if "<" not in text:
        return None  # most answers: one fast scan
    if "think>" in text:  # one scan for both reasoning markers
        if "</think>" in text:
            return "</think>"
        if "<think>" in text:
            return "<think>"
    if "<tool_call>" in text:
        return "<tool_call>"
    if "<function=" in text:
        return "<function="
    return None


def response_marker(response: ChatResponse) -> str | None:
    """The marker in the visible text of a complete answer, or ``None``."""
    for part in response.content:
        if isinstance(part, TextPart):
            found = find_marker(part.text)
            if found is not None:
                return found
    return None


def first_marker(events: Sequence[StreamEvent | TextRun]) -> str | None:
    """Leaked markup in the text of the stream events read before anything reached the caller."""
    text = "".join(
        e.text if type(e) is TextDelta else "".join(e.texts)  # type: ignore[union-attr]
        for e in events
        if type(e) is TextDelta or type(e) is TextRun
    )
    return find_marker(text) if text else None


def check_answer(health: Health, target: Target, record: DecisionRecord, answer: ChatResponse | PlainAnswer) -> None:
    """Looks for template markup in a whole answer when the target's ``markup_leak`` asks for
    it; a leak is flagged (:func:`flag_leak`) while the answer can still be replaced.

    Raises:
        MarkupLeakError: As :func:`flag_leak`.
    """
    if target.reliability.markup_leak != "off":
        marker = find_marker(answer.text) if isinstance(answer, PlainAnswer) else response_marker(answer)
        if marker is not None:
            flag_leak(health, target, marker, record, replaceable=True)


def flag_leak(health: Health, target: Target, marker: str, record: DecisionRecord, *, replaceable: bool) -> None:
    """What a leak does: counted and flagged in ``health`` (logged once per target and marker)
    and noted in ``record.details["markup_leak"]``. With ``markup_leak: fallback`` it is also a
    failure: raised as :class:`MarkupLeakError` while the answer can still be replaced
    (``replaceable``), else counted by the target's circuit breaker so the next requests move on.

    Raises:
        MarkupLeakError: ``fallback`` mode and the answer has not reached the caller.
    """
    name = target.info.name
    fallback = target.reliability.markup_leak == "fallback"
    if health.markup_leak(name, marker):
        logger.warning("%s; target flagged degraded (see GET /health)", message(target.info, marker))
    record.details["markup_leak"] = {
        "target": name,
        "marker": marker,
        "action": "fallback" if fallback and replaceable else "flagged",
    }
    if not fallback:
        return
    if not replaceable:
        health.failed(name, target.reliability.breaker)
        return
    raise MarkupLeakError(message(target.info, marker), target=name)


def message(target: TargetInfo, marker: str) -> str:
    """The one-time log line (and error message) for a leak."""
    return (
        f"target {target.name!r} ({target.model}) returned {marker!r} markup in the answer text: "
        f"the upstream's {PARSER_HINT[marker]} is missing or misconfigured"
    )


class MarkupScanner:
    """Finds a marker in a stream of text deltas.

    Attributes:
        found: The marker found, once one was.
    """

    __slots__ = ("_tail", "found")

    def __init__(self) -> None:
        self._tail = ""
        self.found: str | None = None

    @property
    def carries(self) -> bool:
        """Whether the end of the last delta may begin a marker (the next delta is read with it)."""
        return bool(self._tail)

    def feed(self, text: str) -> str | None:
        """Checks the next delta; returns the marker when this delta completed one."""
        if self._tail:
            text = self._tail + text
            self._tail = ""
        elif "<" not in text:
            return None  # the common case: nothing to look at, nothing to carry over
        found = find_marker(text)
        if found is not None:
            self.found = found
            return found
        # Carry over a possible start of a marker: from the last "<" near the end.
        cut = text.rfind("<", max(0, len(text) - _KEEP))
        if cut >= 0:
            self._tail = text[cut:]
        return None


__all__ = [
    "CHECKED_FORMATS",
    "MARKERS",
    "MarkupLeakError",
    "MarkupScanner",
    "find_marker",
    "first_marker",
    "flag_leak",
    "message",
    "response_marker",
]
