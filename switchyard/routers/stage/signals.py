"""Signals from an agent's own tool activity, read off the IR conversation.

Layer: ``routers`` — imports ``protocol`` only.

Because the extractor reads :class:`~switchyard.protocol.messages.Message` objects and never a
wire body, a conversation gives the same signals whether it arrived as OpenAI Chat, Anthropic
Messages or OpenAI Responses. It walks the conversation once, newest message first, so the
windowed signals (the last few tool calls and results) are filled after a handful of messages;
only the turn depth and the compaction marker need the whole conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.routers.stage import tables as t
from switchyard.routers.stage.shell import classify_command
from switchyard.routers.stage.tables import ToolKind
from switchyard.routers.stage.text import failure_fingerprint, severity_of, tests_passed

_INSTRUCTION_ROLES = frozenset(("system", "developer"))
_MARKER_LEN = len(t.COMPACTION_MARKER)


@dataclass(slots=True, frozen=True)
class Profile:
    """Extraction choices that differ between the default behaviour and ``compat: nvidia``.

    Attributes:
        tool_errors: A result that starts with ``Error:`` (or is a JSON object with an
            ``error``) is a soft failure.
        failing_tests: A test summary with a non-zero failure count is a soft failure.
        search_tools: Claude Code's ``Grep``, ``Glob`` and ``LS`` tools are reads.
        chat_equivalent_depth: Count turn depth as Chat Completions would lay the conversation
            out (one unit per tool result), so a batched Anthropic tool-result message counts
            the same as the separate Chat ``tool`` messages it stands for.
    """

    tool_errors: bool = True
    failing_tests: bool = True
    search_tools: bool = True
    chat_equivalent_depth: bool = True


DEFAULT_PROFILE = Profile()
NVIDIA_PROFILE = Profile(tool_errors=False, failing_tests=False, search_tools=False, chat_equivalent_depth=False)


@dataclass(slots=True, frozen=True)
class Signals:
    """What the recent tool activity says about the turn.

    Attributes:
        severity: Worst error among the last ``window`` tool results: 0, 0.3 (soft), 0.7 (hard)
            or 1.0 (critical).
        errors: Names of the error patterns that fired in that window.
        repeated_failure: The same hard failure (same pattern, same diagnostic line up to
            paths and numbers) appears twice in that window: the agent is stuck on it.
        tests_passed: A test run passed after the latest failure in the window.
        compacted: The conversation carries a context-compaction summary.
        turn_depth: Messages so far, system and developer instructions excluded.
        recent_writes: Writes among the last ``window`` tool calls.
        recent_edits: Edits among them.
        recent_reads: Reads among them.
        recent_plans: Planning calls among them.
        tool_calls: Tool calls in the whole conversation.
        tool_results: Tool results in the whole conversation.
    """

    severity: float = 0.0
    errors: tuple[str, ...] = ()
    repeated_failure: bool = False
    tests_passed: bool = False
    compacted: bool = False
    turn_depth: int = 0
    recent_writes: int = 0
    recent_edits: int = 0
    recent_reads: int = 0
    recent_plans: int = 0
    tool_calls: int = 0
    tool_results: int = 0

    @property
    def recent_production(self) -> int:
        """Writes plus edits in the window."""
        return self.recent_writes + self.recent_edits

    def as_details(self) -> dict[str, object]:
        """The signals as a flat dict for the decision record."""
        return {
            "severity": self.severity,
            "errors": list(self.errors),
            "repeated_failure": self.repeated_failure,
            "tests_passed": self.tests_passed,
            "compacted": self.compacted,
            "turn_depth": self.turn_depth,
            "recent_writes": self.recent_writes,
            "recent_edits": self.recent_edits,
            "recent_reads": self.recent_reads,
            "recent_plans": self.recent_plans,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
        }


def extract(
    messages: Sequence[Message],
    *,
    window: int = 3,
    semantics: Mapping[str, ToolKind] | None = None,
    profile: Profile = DEFAULT_PROFILE,
) -> Signals:
    """Extracts the stage signals from a conversation.

    Args:
        messages: The conversation, oldest first.
        window: How many of the newest tool calls (for activity counts) and non-empty tool
            results (for severity and test runs) count as recent.
        semantics: Extra tool names (lower-case) and their kinds; they win over the built-in table.
        profile: Default behaviour or NVIDIA compatibility.
    """
    window = max(1, window)
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    depth = n_calls = n_results = 0
    compacted = False
    chat_depth = profile.chat_equivalent_depth
    for msg in reversed(messages):
        if msg.role in _INSTRUCTION_ROLES:
            continue
        in_msg = 0
        others = 0
        for part in reversed(msg.content):
            kind = type(part)
            if kind is ToolResultPart:
                in_msg += 1
                if len(results) < window:
                    assert isinstance(part, ToolResultPart)
                    if part.is_error or any(isinstance(c, TextPart) and c.text for c in part.content):
                        results.append(part)
            elif kind is ToolCallPart:
                n_calls += 1
                others += 1
                if len(calls) < window:
                    assert isinstance(part, ToolCallPart)
                    calls.append(part)
            else:
                others += 1
                if kind is TextPart and not compacted:
                    assert isinstance(part, TextPart)
                    compacted = _has_marker(part.text)
        n_results += in_msg
        if chat_depth:
            depth += in_msg + (1 if others or not in_msg else 0)
        else:
            depth += 1
    severity = 0.0
    errors: list[str] = []
    recent: list[tuple[str, float]] = []
    fingerprints: set[str] = set()
    repeated = False
    for result in reversed(results):
        lower = "\n".join(c.text for c in result.content if isinstance(c, TextPart)).lower()
        level, names = severity_of(lower, tool_errors=profile.tool_errors, failing_tests=profile.failing_tests)
        if result.is_error and level < t.HARD:
            level, names = t.HARD, (*names, "tool_error_flag")
        severity = max(severity, level)
        if level >= t.HARD:
            fingerprint = failure_fingerprint(lower, names)
            repeated = repeated or fingerprint in fingerprints
            fingerprints.add(fingerprint)
        errors.extend(n for n in names if n not in errors)
        recent.append((lower, level))
    counts = {ToolKind.WRITE: 0, ToolKind.EDIT: 0, ToolKind.READ: 0, ToolKind.PLAN: 0, ToolKind.OTHER: 0}
    for call in calls:
        counts[classify_call(call, semantics, search_tools=profile.search_tools)] += 1
    return Signals(
        severity=severity,
        errors=tuple(errors),
        repeated_failure=repeated,
        tests_passed=tests_passed(recent),
        compacted=compacted,
        turn_depth=depth,
        recent_writes=counts[ToolKind.WRITE],
        recent_edits=counts[ToolKind.EDIT],
        recent_reads=counts[ToolKind.READ],
        recent_plans=counts[ToolKind.PLAN],
        tool_calls=n_calls,
        tool_results=n_results,
    )


def classify_call(
    call: ToolCallPart, semantics: Mapping[str, ToolKind] | None = None, *, search_tools: bool = True
) -> ToolKind:
    """The kind of one tool call: by name, and for shell tools by their command line.

    Args:
        call: The tool call.
        semantics: Extra names (lower-case) and their kinds; they win over the built-in table.
        search_tools: Count Claude Code's Grep/Glob/LS tools as reads.
    """
    name = call.name.lower()
    kind = semantics.get(name) if semantics else None
    if kind is None:
        kind = t.TOOL_NAMES.get(name)
    if kind is None:
        kind = ToolKind.READ if search_tools and name in t.SEARCH_TOOLS else ToolKind.OTHER
    if kind is ToolKind.SHELL:
        command = command_of(call.arguments)
        return classify_command(command) if command else ToolKind.OTHER
    return kind


def command_of(arguments: str) -> str | None:
    """The lower-cased command line a shell tool call carries, if any.

    Harnesses put it under ``command``, ``cmd`` or ``input``, as a string or an argv list.
    """
    try:
        args = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    for key in t.COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return value.lower()
        if isinstance(value, list):
            joined = " ".join(v for v in value if isinstance(v, str))
            if joined:
                return joined.lower()
    return None


def _has_marker(text: str) -> bool:
    return len(text) >= _MARKER_LEN and t.COMPACTION_MARKER in text.lower()
