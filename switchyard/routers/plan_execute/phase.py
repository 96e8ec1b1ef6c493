"""Which phase a turn of an agent is in: planning, execution, or re-planning after trouble.

Layer: ``routers`` — pure; reads the decoded conversation only, so it works the same for
Anthropic Messages (Claude Code), OpenAI Responses (Codex) and Chat Completions agents.

The rules, first match wins (each names its ``why`` in the decision record):

1. ``plan_tool_forced`` — ``tool_choice`` names a plan tool (``TodoWrite``, ``update_plan`` …);
2. ``plan_mode`` — the agent's own plan mode: a ``plan_patterns`` match in the system prompt or
   the newest user message (Claude Code's "Plan mode is active" reminder), or a
   ``plan_mode_tools`` tool in the request's tool set;
3. ``new_request`` — the newest message is a person's (text, no tool results): the first turn of
   a new user request;
4. ``compacted`` — the newest tool-less user turn carries a context-compaction summary: the
   context was rebuilt, the plan is re-read;
5. ``replan`` — sustained trouble since the last plan: the newest ``replan_after`` tool results
   (after the last planning turn) all failed at ``trouble_severity`` or worse;
6. ``plan_changed`` — the agent's newest turn called a plan tool and changed the plan's items
   (added, removed or reworded — not only ticked off), after the last planning turn;
7. otherwise ``execute``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest
from switchyard.routers.stage.signals import extract
from switchyard.routers.transcript import is_real_user

DEFAULT_PLAN_TOOLS = ("todowrite", "todo_write", "update_plan", "todo")
DEFAULT_PLAN_PATTERNS = (r"(?i)\bplan mode is active\b", r"(?i)\byou are in plan mode\b")
_COMPACTED = "session is being continued"
_ITEM_KEYS = ("content", "step", "title", "text", "task", "description")


@dataclass(frozen=True, slots=True)
class Phase:
    """A turn's phase.

    Attributes:
        kind: ``plan``, ``execute`` or ``replan``.
        why: The rule that decided (see the module docstring).
        detail: One short fact for the record (the matched pattern, the failure streak …).
    """

    kind: str
    why: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Rules:
    """What marks planning (from the route's config).

    Attributes:
        plan_tools: Lower-case names of the agent's planning tools.
        plan_mode_tools: Lower-case tool names whose presence in the tool set marks plan mode.
        plan_patterns: Compiled expressions that mark plan mode in the system prompt or the
            newest user message.
        new_request: ``always``, ``with_tools`` (a new user request plans only when it
            carries tools, so an agent's side calls — titles, summaries — do not) or ``never``.
        replan_after: Consecutive failed tool results that call for a re-plan (0: never).
        trouble_severity: Failure severity that counts (0.3 soft, 0.7 hard, 1.0 critical).
    """

    plan_tools: frozenset[str]
    plan_mode_tools: frozenset[str]
    plan_patterns: tuple[re.Pattern[str], ...]
    new_request: str = "always"
    replan_after: int = 3
    trouble_severity: float = 0.7


def classify(request: ChatRequest, rules: Rules, planned_at: int = 0) -> Phase:
    """The phase of the turn ``request`` asks for.

    Args:
        request: The agent's request.
        rules: What marks planning.
        planned_at: Number of messages the last planning turn's request had (from the session
            state; 0 when unknown): trouble and plan changes count only after it.
    """
    messages = request.messages
    forced = _forced_tool(request)
    if forced is not None and forced.lower() in rules.plan_tools:
        return Phase("plan", "plan_tool_forced", forced)
    marker = _plan_mode(request, rules)
    if marker:
        return Phase("plan", "plan_mode", marker)
    last = newest_turn(messages)
    if last is not None and is_real_user(last):
        if _COMPACTED in last.text.lower():
            return Phase("replan", "compacted")
        if rules.new_request == "always" or (rules.new_request == "with_tools" and request.tools):
            return Phase("plan", "new_request")
        return Phase("execute", "new_request_without_tools" if rules.new_request == "with_tools" else "execute")
    streak = _failure_streak(messages, planned_at, rules)
    if rules.replan_after and streak >= rules.replan_after:
        return Phase("replan", "trouble", f"{streak} failed tool results in a row")
    changed = _plan_changed(messages, planned_at, rules.plan_tools)
    if changed:
        return Phase("plan", "plan_changed", changed)
    return Phase("execute", "execute")


def newest_turn(messages: Sequence[Message]) -> Message | None:
    """The newest message of the conversation itself: instructions may follow it (Claude Code
    sends an environment note as a trailing ``system`` message)."""
    return next((m for m in reversed(messages) if m.role not in ("system", "developer")), None)


def compaction_turn(messages: Sequence[Message]) -> bool:
    """Whether this is the first turn after a context compaction: the newest turn is the
    person's message carrying the summary ("This session is being continued …")."""
    last = newest_turn(messages)
    return last is not None and is_real_user(last) and _COMPACTED in last.text.lower()


def _forced_tool(request: ChatRequest) -> str | None:
    choice = request.tool_choice
    name = getattr(choice, "name", None)
    return name if isinstance(name, str) and name else None


def _plan_mode(request: ChatRequest, rules: Rules) -> str:
    for tool in request.tools:
        if tool.name.lower() in rules.plan_mode_tools:
            return f"tool {tool.name}"
    if not rules.plan_patterns:
        return ""
    texts = [m.text for m in request.messages if m.role in ("system", "developer")]
    newest_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    if newest_user is not None:
        # Claude Code puts its reminders beside the tool results, in the same user message.
        texts += [p.text for p in newest_user.content if isinstance(p, TextPart)]
    for pattern in rules.plan_patterns:
        if any(pattern.search(text) for text in texts):
            return f"pattern {pattern.pattern!r}"
    return ""


def _failure_streak(messages: Sequence[Message], planned_at: int, rules: Rules) -> int:
    """Failed tool results at the end of the conversation (newest back to the first success,
    the person's last message or the last planning turn)."""
    streak = 0
    for message in reversed(messages[planned_at:]):
        if is_real_user(message):
            break
        for part in reversed(message.content):
            if not isinstance(part, ToolResultPart):
                continue
            if extract([Message(role="tool", content=[part])], window=1).severity < rules.trouble_severity:
                return streak
            streak += 1
    return streak


def _plan_changed(messages: Sequence[Message], planned_at: int, plan_tools: frozenset[str]) -> str:
    """The plan tool the newest assistant turn called to change the plan, or ``""``."""
    newest = _newest_assistant(messages)
    if newest is None or newest < planned_at:
        return ""  # no turn since the last planning turn (its own plan is not a change)
    if newest == planned_at and planned_at:
        return ""  # the planning turn wrote this plan itself
    calls = [p for p in messages[newest].content if isinstance(p, ToolCallPart) and p.name.lower() in plan_tools]
    if not calls:
        return ""
    previous = _previous_items(messages[:newest], plan_tools)
    for call in calls:
        items = _items(call.arguments)
        if items is None or items != previous:
            return call.name
        previous = items
    return ""


def _newest_assistant(messages: Sequence[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return i
    return None


def _previous_items(messages: Sequence[Message], plan_tools: frozenset[str]) -> frozenset[str] | None:
    for message in reversed(messages):
        for part in reversed(message.content):
            if isinstance(part, ToolCallPart) and part.name.lower() in plan_tools:
                return _items(part.arguments)
    return frozenset()  # no plan before: any items are a new plan


def _items(arguments: str) -> frozenset[str] | None:
    """The item texts of a plan tool's arguments (``None`` when they cannot be read)."""
    try:
        args: Any = json.loads(arguments or "{}")
    except ValueError:
        return None
    lists = [v for v in args.values() if isinstance(v, list)] if isinstance(args, dict) else [args]
    items: set[str] = set()
    for entries in lists:
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, str):
                items.add(entry.strip())
            elif isinstance(entry, dict):
                text = next((entry[k] for k in _ITEM_KEYS if isinstance(entry.get(k), str)), None)
                if text is not None:
                    items.add(text.strip())
    return frozenset(items)
