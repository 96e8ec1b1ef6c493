"""What the trajectory router reads off an agent's conversation: cheap features, kept per session.

Layer: ``routers`` — imports ``protocol`` only; pure Python (it runs on every turn).

Every feature exists in any agent's traffic, whatever its tools are called:

* **task text** (the first user message): its length, words, digits, sentences, clauses joined
  by "and"/"then", quoted names, lines, code-like tokens, and hashed word unigrams and bigrams;
* **progress**: assistant turns, tool calls, distinct tools, calls per turn, identical calls
  repeated, follow-up user messages, whether the request ends on a user message;
* **errors**: tool results that failed (the tool's own flag, an error class the stage router's
  text reader recognises, or a result that opens with "error"), their share, the streak at the
  end, the same error text coming back, empty results ("no results", ``[]``), and hashed error
  classes;
* **answer shape**: assistant turns without a tool call, the length of the last one and whether
  it apologises or gives up ("unable", "cannot", "sorry").

The counts only grow within a run, so they are kept in a :class:`Tally` per session and a turn
walks only the messages after those already counted (the stage router's validated
:class:`~switchyard.routers.stage.prefix.PrefixCache` keeps them). :func:`vector` turns a tally
into the sparse vector the checkpoint scores: ``{index: value}`` with the dense features first
and the hashed ones after them.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections.abc import Sequence

from switchyard._dataclass import dataclass
from switchyard.protocol.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, message_chars
from switchyard.routers.stage.text import analyse_result

DENSE = (
    "turn0",
    "log_turns",
    "log_calls",
    "log_distinct_tools",
    "calls_per_turn",
    "log_repeat_calls",
    "repeat_share",
    "log_errors",
    "error_share",
    "error_streak",
    "last_error",
    "log_repeated_errors",
    "log_empty_results",
    "empty_share",
    "log_result_chars",
    "log_last_result_chars",
    "log_text_turns",
    "log_last_text_chars",
    "last_is_text",
    "gives_up",
    "log_reasoning_chars",
    "log_followups",
    "ends_on_user",
    "task_log_chars",
    "task_log_words",
    "task_log_digits",
    "task_sentences",
    "task_clauses",
    "task_quotes",
    "task_log_lines",
    "task_code",
)
"""Names of the dense features, in vector order (the checkpoint records them)."""

FEATURE_VERSION = 1
"""Bumped whenever a feature's definition changes (a checkpoint of another version is refused)."""

_WORD = re.compile(r"[a-z0-9]+")
_GIVE_UP = re.compile(r"\b(?:unable|cannot|can't|couldn't|could not|sorry|apologi[sz]e|not possible|unfortunately)\b")
_EMPTY = re.compile(r"^\s*(?:\[\]|\{\}|none|null|no results?(?: found)?\.?|not found\.?)\s*$")
_TASK_CLAUSE = re.compile(r"\b(?:and|then|also|after|afterwards|finally)\b")
_TASK_CODE = re.compile(r"[`/\\_]|\.\w{1,4}\b|\w\(")
_MAX_TASK = 8000
"""Task characters the lexical features read (a pasted log must not cost a millisecond)."""
_MAX_RESULT = 4000
"""Characters of a tool result read for its error class (errors show early)."""


def _bucket(token: str, dims: int) -> int:
    return zlib.crc32(token.encode()) % dims


@dataclass(slots=True, frozen=True)
class TaskText:
    """The task's lexical features, read once per session.

    Attributes:
        dense: Values of the ``task_*`` dense features, in :data:`DENSE` order.
        grams: Hashed unigram and bigram buckets of the task text (sorted, unique).
    """

    dense: tuple[float, ...]
    grams: tuple[int, ...]


def read_task(text: str, dims: int) -> TaskText:
    """The lexical features of a task text, hashed into ``dims`` buckets."""
    text = text[:_MAX_TASK]
    lower = text.lower()
    words = _WORD.findall(lower)
    grams = {_bucket("w:" + w, dims) for w in words}
    grams.update(_bucket(f"b:{a} {b}", dims) for a, b in itertools.pairwise(words))
    digits = sum(ch.isdigit() for ch in text)
    sentences = sum(text.count(ch) for ch in ".?!")
    dense = (
        math.log1p(len(text)) / 8.0,
        math.log1p(len(words)) / 6.0,
        math.log1p(digits) / 4.0,
        min(sentences, 20) / 10.0,
        min(len(_TASK_CLAUSE.findall(lower)), 20) / 10.0,
        min(text.count("'") + text.count('"'), 20) / 10.0,
        math.log1p(text.count("\n")) / 4.0,
        min(len(_TASK_CODE.findall(text)), 40) / 20.0,
    )
    return TaskText(dense, tuple(sorted(grams)))


@dataclass(slots=True)
class Tally:
    """Run-wide counts over the first ``covered`` messages of a conversation.

    A tally is never changed once stored: :func:`advance` returns a new one.
    """

    covered: int = 0
    task: TaskText | None = None
    turns: int = 0
    calls: int = 0
    tools: frozenset[str] = frozenset()
    call_keys: frozenset[int] = frozenset()
    repeats: int = 0
    results: int = 0
    errors: int = 0
    streak: int = 0
    last_error: bool = False
    error_keys: frozenset[int] = frozenset()
    repeated_errors: int = 0
    error_classes: frozenset[str] = frozenset()
    empty: int = 0
    result_chars: int = 0
    last_result_chars: int = 0
    text_turns: int = 0
    last_text_chars: int = 0
    last_is_text: bool = False
    gives_up: bool = False
    reasoning_chars: int = 0
    users: int = 0
    ends_on_user: bool = False
    chars: int = 0


def _result_text(part: ToolResultPart) -> str:
    inner = part.content
    if len(inner) == 1 and type(inner[0]) is TextPart:
        return inner[0].text
    return part.text


def _is_error(part: ToolResultPart, text: str) -> tuple[bool, tuple[str, ...]]:
    head = text[:_MAX_RESULT]
    info = analyse_result(head)
    stripped = head.lstrip()[:12].lower()
    failed = part.is_error or info.level > 0 or stripped.startswith(("error", "exception", "traceback"))
    return failed, info.names


def advance(tally: Tally | None, messages: Sequence[Message], dims: int) -> Tally:
    """The tally of ``messages``, continuing ``tally`` (which covers a prefix of them).

    Args:
        tally: Counts over ``messages[:tally.covered]``; ``None`` starts afresh.
        messages: The whole conversation.
        dims: Hash buckets of the task's n-grams.
    """
    t = Tally() if tally is None else tally
    tools, call_keys, error_keys, classes = set(t.tools), set(t.call_keys), set(t.error_keys), set(t.error_classes)
    task, turns, calls, repeats, results, errors = t.task, t.turns, t.calls, t.repeats, t.results, t.errors
    streak, last_error, repeated_errors, empty = t.streak, t.last_error, t.repeated_errors, t.empty
    result_chars, last_result_chars, text_turns = t.result_chars, t.last_result_chars, t.text_turns
    last_text_chars, last_is_text, gives_up, reasoning = (
        t.last_text_chars,
        t.last_is_text,
        t.gives_up,
        t.reasoning_chars,
    )
    users, ends_on_user, chars = t.users, t.ends_on_user, t.chars
    for msg in messages[t.covered :]:
        role = msg.role
        chars += message_chars(msg)
        if role == "user" or role == "tool":
            ends_on_user = role == "user"
            for part in msg.content:
                if type(part) is ToolResultPart:
                    text = _result_text(part)
                    results += 1
                    result_chars += len(text)
                    last_result_chars = len(text)
                    failed, names = _is_error(part, text)
                    if failed:
                        errors += 1
                        streak += 1
                        key = hash(text[:200])
                        if key in error_keys:
                            repeated_errors += 1
                        error_keys.add(key)
                        classes.update(names)
                    else:
                        streak = 0
                    last_error = failed
                    if len(text) < 40 and (not text.strip() or _EMPTY.match(text.lower())):
                        empty += 1
            if role == "user" and not msg.tool_results:
                text = msg.text
                if task is None and text.strip():
                    task = read_task(text, dims)
                else:
                    users += 1
        elif role == "assistant":
            ends_on_user = False
            turns += 1
            made_call = False
            for part in msg.content:
                if type(part) is ToolCallPart:
                    made_call = True
                    calls += 1
                    tools.add(part.name)
                    key = hash((part.name, part.arguments))
                    if key in call_keys:
                        repeats += 1
                    call_keys.add(key)
                elif type(part) is ReasoningPart:
                    reasoning += len(part.text)
            if made_call:
                last_is_text = False
            else:
                text = msg.text
                text_turns += 1
                last_text_chars = len(text)
                last_is_text = True
                gives_up = bool(_GIVE_UP.search(text[-2000:].lower()))
    return Tally(
        covered=len(messages),
        task=task,
        turns=turns,
        calls=calls,
        tools=frozenset(tools),
        call_keys=frozenset(call_keys),
        repeats=repeats,
        results=results,
        errors=errors,
        streak=streak,
        last_error=last_error,
        error_keys=frozenset(error_keys),
        repeated_errors=repeated_errors,
        error_classes=frozenset(classes),
        empty=empty,
        result_chars=result_chars,
        last_result_chars=last_result_chars,
        text_turns=text_turns,
        last_text_chars=last_text_chars,
        last_is_text=last_is_text,
        gives_up=gives_up,
        reasoning_chars=reasoning,
        users=users,
        ends_on_user=ends_on_user,
        chars=chars,
    )


def vector(t: Tally, dims: int) -> dict[int, float]:
    """The sparse feature vector of a tally: dense features at ``0..len(DENSE)-1``, then the
    task's hashed n-grams and the hashed error classes at ``len(DENSE) + bucket``."""
    results = max(t.results, 1)
    calls = max(t.calls, 1)
    log1p = math.log1p
    dense = (
        1.0 if t.turns == 0 else 0.0,
        log1p(t.turns) / 3.0,
        log1p(t.calls) / 3.0,
        log1p(len(t.tools)) / 2.0,
        min(t.calls / max(t.turns, 1), 5.0) / 2.0,
        log1p(t.repeats) / 2.0,
        t.repeats / calls,
        log1p(t.errors) / 2.0,
        t.errors / results,
        min(t.streak, 5) / 5.0,
        1.0 if t.last_error else 0.0,
        log1p(t.repeated_errors) / 2.0,
        log1p(t.empty) / 2.0,
        t.empty / results,
        log1p(t.result_chars) / 10.0,
        log1p(t.last_result_chars) / 8.0,
        log1p(t.text_turns) / 2.0,
        log1p(t.last_text_chars) / 8.0,
        1.0 if t.last_is_text else 0.0,
        1.0 if t.gives_up else 0.0,
        log1p(t.reasoning_chars) / 10.0,
        log1p(t.users) / 2.0,
        1.0 if t.ends_on_user else 0.0,
    )
    task = t.task.dense if t.task is not None else (0.0,) * 8
    out = {i: v for i, v in enumerate((*dense, *task)) if v}
    base = len(DENSE)
    if t.task is not None and t.task.grams:
        w = 1.0 / math.sqrt(len(t.task.grams))
        for g in t.task.grams:
            out[base + g] = w
    for name in t.error_classes:
        out[base + _bucket("e:" + name, dims)] = out.get(base + _bucket("e:" + name, dims), 0.0) + 0.5
    return out
