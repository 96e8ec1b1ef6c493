"""Signals from an agent's own tool activity, read off the IR conversation.

Layer: ``routers`` — imports ``protocol`` only.

Because the extractor reads :class:`~switchyard.protocol.messages.Message` objects and never a
wire body, a conversation gives the same signals whether it arrived as OpenAI Chat, Anthropic
Messages or OpenAI Responses. It walks the conversation once, newest message first, so the
windowed signals (the last few tool calls and results) are filled after a handful of messages;
only the turn depth and the compaction marker need the whole conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from switchyard._dataclass import dataclass
from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.routers.stage import tables as t
from switchyard.routers.stage.shell import classify_arguments
from switchyard.routers.stage.tables import ToolKind
from switchyard.routers.stage.text import ResultInfo, analyse_result, failure_fingerprint

_MARKER_LEN = len(t.COMPACTION_MARKER)


@dataclass(slots=True, frozen=True)
class Profile:
    """Extraction choices that differ between the default behaviour and ``compat: nvidia``.

    Attributes:
        tool_errors: A result that starts with ``Error:`` (or is a JSON object with an
            ``error``) is a soft failure.
        failing_tests: A test summary with a non-zero failure count is a soft failure.
        search_tools: Claude Code's ``Grep``, ``Glob`` and ``LS`` tools are reads.
        compaction_in_user_text_only: Look for the compaction marker in user messages only
            (where agents put the summary), not in what the assistant wrote.
        chat_equivalent_depth: Count turn depth as Chat Completions would lay the conversation
            out (one unit per tool result), so a batched Anthropic tool-result message counts
            the same as the separate Chat ``tool`` messages it stands for.
    """

    tool_errors: bool = True
    failing_tests: bool = True
    search_tools: bool = True
    compaction_in_user_text_only: bool = True
    chat_equivalent_depth: bool = True


DEFAULT_PROFILE = Profile()
NVIDIA_PROFILE = Profile(
    tool_errors=False,
    failing_tests=False,
    search_tools=False,
    compaction_in_user_text_only=False,
    chat_equivalent_depth=False,
)


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
        return details_of(self)


class Readings(NamedTuple):
    """The values of :class:`Signals`, same names, same order, as the per-turn path builds them:
    a tuple costs a fraction of the frozen dataclass, which is only made when a caller (the
    classifier, :meth:`StageRouter.signals`) wants one (``Signals(*readings)``)."""

    severity: float
    errors: tuple[str, ...]
    repeated_failure: bool
    tests_passed: bool
    compacted: bool
    turn_depth: int
    recent_writes: int
    recent_edits: int
    recent_reads: int
    recent_plans: int
    tool_calls: int
    tool_results: int

    @property
    def recent_production(self) -> int:
        """Writes plus edits in the window."""
        return self.recent_writes + self.recent_edits


def details_of(sig: Signals | Readings) -> dict[str, object]:
    """Signals (or their readings) as a flat dict for the decision record."""
    return {
        "severity": sig.severity,
        "errors": list(sig.errors),
        "repeated_failure": sig.repeated_failure,
        "tests_passed": sig.tests_passed,
        "compacted": sig.compacted,
        "turn_depth": sig.turn_depth,
        "recent_writes": sig.recent_writes,
        "recent_edits": sig.recent_edits,
        "recent_reads": sig.recent_reads,
        "recent_plans": sig.recent_plans,
        "tool_calls": sig.tool_calls,
        "tool_results": sig.tool_results,
    }


class Aggregates(NamedTuple):
    """Whole-conversation counts over the first ``covered`` messages (they only ever grow, so a
    session's next request can start from them).

    Attributes:
        covered: Messages covered.
        depth: Turn depth so far.
        compacted: A compaction marker was seen.
        tool_calls: Tool calls so far.
        tool_results: Tool results so far.
    """

    covered: int = 0
    depth: int = 0
    compacted: bool = False
    tool_calls: int = 0
    tool_results: int = 0


_NOTHING_YET = Aggregates()


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
    return extract_from(messages, None, window=window, semantics=semantics, profile=profile)[0]


def extract_from(
    messages: Sequence[Message],
    prefix: Aggregates | None,
    *,
    window: int = 3,
    semantics: Mapping[str, ToolKind] | None = None,
    profile: Profile = DEFAULT_PROFILE,
) -> tuple[Signals, Aggregates]:
    """Like :func:`extract`, continuing the whole-conversation counts from ``prefix`` (the
    aggregates of ``messages[:prefix.covered]``, known to be unchanged); also returns the new ones.
    """
    readings, agg = read_from(messages, prefix, window=window, semantics=semantics, profile=profile)
    return Signals(*readings), agg


def read_from(
    messages: Sequence[Message],
    prefix: Aggregates | None,
    *,
    window: int = 3,
    semantics: Mapping[str, ToolKind] | None = None,
    profile: Profile = DEFAULT_PROFILE,
) -> tuple[Readings, Aggregates]:
    """:func:`extract_from` with the signals as :class:`Readings` (the router's per-turn path)."""
    calls, results = _tail(messages, max(1, window))
    agg = _aggregate(messages, profile, prefix or _NOTHING_YET)
    severity, errors, repeated, passed = _read_results(results, profile)
    writes = edits = reads = plans = 0
    search_tools = profile.search_tools
    for call in calls:
        kind = classify_call(call, semantics, search_tools=search_tools)
        if kind is ToolKind.READ:
            reads += 1
        elif kind is ToolKind.EDIT:
            edits += 1
        elif kind is ToolKind.WRITE:
            writes += 1
        elif kind is ToolKind.PLAN:
            plans += 1
    _, depth, compacted, n_calls, n_results = agg
    readings = Readings(
        severity, errors, repeated, passed, compacted, depth, writes, edits, reads, plans, n_calls, n_results
    )
    return readings, agg


def _tail(messages: Sequence[Message], window: int) -> tuple[list[ToolCallPart], list[ToolResultPart]]:
    """The newest ``window`` tool calls and non-empty (or failed) tool results, newest first."""
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    need_calls = need_results = window
    for msg in reversed(messages):
        role = msg.role
        if role == "system" or role == "developer":
            continue
        content = msg.content
        if role == "user" and need_results and len(content) == 1:
            observation = observation_of(content[0])
            if observation is not None:
                results.append(observation)
                need_results -= 1
                continue
        for part in content if len(content) == 1 else reversed(content):
            if type(part) is ToolResultPart:
                if need_results and (part.is_error or _has_text(part)):
                    results.append(part)
                    need_results -= 1
            elif need_calls and type(part) is ToolCallPart:
                calls.append(part)
                need_calls -= 1
        if not (need_calls or need_results):
            break
    return calls, results


def _aggregate(messages: Sequence[Message], profile: Profile, start: Aggregates) -> Aggregates:
    """Turn depth, compaction and totals over the whole conversation, from ``start`` on."""
    _, depth, compacted, n_calls, n_results = start
    chat_depth = profile.chat_equivalent_depth
    assistant_text = not profile.compaction_in_user_text_only
    for i in range(start.covered, len(messages)):
        msg = messages[i]
        role = msg.role
        if role == "system" or role == "developer":
            continue
        content = msg.content
        if len(content) < 2:
            # Most messages hold one part (or none): one unit of depth in either counting.
            depth += 1
            if content:
                part = content[0]
                cls = type(part)
                if cls is ToolResultPart:
                    n_results += 1
                elif cls is ToolCallPart:
                    n_calls += 1
                elif (
                    type(part) is TextPart
                    and not compacted
                    and (assistant_text or role == "user")
                    and _has_marker(part.text)
                ):
                    compacted = True
            continue
        scan = not compacted and (assistant_text or role == "user")
        in_msg = others = 0
        for part in content:
            cls = type(part)
            if cls is ToolResultPart:
                in_msg += 1
            else:
                others += 1
                if cls is ToolCallPart:
                    n_calls += 1
                elif scan and type(part) is TextPart and _has_marker(part.text):
                    compacted = True
                    scan = False
        n_results += in_msg
        depth += (in_msg + (1 if others or not in_msg else 0)) if chat_depth else 1
    return Aggregates(len(messages), depth, compacted, n_calls, n_results)


def _read_results(results: list[ToolResultPart], profile: Profile) -> tuple[float, tuple[str, ...], bool, bool]:
    """``(severity, error names, repeated failure, tests passed)`` of the recent results."""
    severity = 0.0
    errors: list[str] = []
    hard: list[tuple[ResultInfo, str, tuple[str, ...] | None]] = []
    latest_pass = latest_failure = -1
    tool_errors, failing_tests = profile.tool_errors, profile.failing_tests
    k = 0
    for result in reversed(results):
        content = result.content
        only = content[0] if len(content) == 1 else None
        if isinstance(only, TextPart):
            text = only.text
        else:
            text = "\n".join(c.text for c in content if isinstance(c, TextPart))
        info = analyse_result(text, tool_errors, failing_tests)
        level, names = info.level, info.names
        if level >= t.HARD:
            hard.append((info, text, None))
        elif result.is_error:
            level, names = t.HARD, (*names, "tool_error_flag")
            hard.append((info, text, names))
        if level > severity:
            severity = level
        for name in names:
            if name not in errors:
                errors.append(name)
        if level > 0:
            latest_failure = k
        elif info.clean_pass:
            # Only a result without a failure can be a pass newer than the latest failure.
            latest_pass = k
        k += 1
    # The same hard failure twice in the window; fingerprints are only needed for two or more.
    repeated = len(hard) > 1 and len({_fingerprint_of(*entry) for entry in hard}) < len(hard)
    # A test run passed after the latest failure in the window.
    return severity, tuple(errors), repeated, latest_pass > latest_failure


def _fingerprint_of(info: ResultInfo, text: str, flagged: tuple[str, ...] | None) -> str:
    """The failure fingerprint of a hard result (``flagged``: the names of one the tool flagged)."""
    if flagged is not None:
        return failure_fingerprint(text.lower(), flagged)
    fingerprint = info.fingerprint
    assert fingerprint is not None  # a hard level always has one
    return fingerprint


def classify_call(
    call: ToolCallPart, semantics: Mapping[str, ToolKind] | None = None, *, search_tools: bool = True
) -> ToolKind:
    """The kind of one tool call: by name, and for shell tools by their command line.

    Args:
        call: The tool call.
        semantics: Extra names (lower-case) and their kinds; they win over the built-in table.
        search_tools: Classify the agents' own tool names NVIDIA's table leaves out (Claude
            Code's Grep/Glob/LS, Qwen Code's grep_search and run_shell_command).
    """
    name = call.name.lower()
    kind = semantics.get(name) if semantics else None
    if kind is None:
        kind = t.TOOL_NAMES.get(name)
    if kind is None:
        kind = t.SEARCH_TOOLS.get(name, ToolKind.OTHER) if search_tools else ToolKind.OTHER
    if kind is ToolKind.SHELL:
        return classify_arguments(call.arguments)
    return kind


def observation_of(part: object) -> ToolResultPart | None:
    """A text-protocol agent's command output, read as a tool result.

    mini-SWE-agent (and agents built like it) runs the shell command the model wrote in its
    reply and sends the output back as a *user* message in its observation template,
    ``<returncode>N</returncode>\n<output>...</output>``, not as a tool result. Such a message is
    read like a tool result, so its exit status and errors count.
    """
    if type(part) is not TextPart:
        return None
    text = part.text
    if not text[:64].lstrip().startswith(t.OBSERVATION_PREFIX):
        return None
    return ToolResultPart.model_construct(call_id="", content=[part])


def _has_text(result: ToolResultPart) -> bool:
    content = result.content
    if len(content) == 1:
        only = content[0]
        return isinstance(only, TextPart) and only.text != ""
    return any(isinstance(c, TextPart) and c.text for c in content)


def _has_marker(text: str) -> bool:
    return len(text) >= _MARKER_LEN and t.COMPACTION_MARKER in text.lower()
