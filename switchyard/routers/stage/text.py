"""Reading tool output: how bad an error is, and whether a test run passed.

Layer: ``routers`` — pure functions over lower-cased text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from switchyard.routers.stage import tables as t

_DIGIT_RUNS = re.compile(r"[0-9]+")


def severity_of(lower: str, *, tool_errors: bool = False, failing_tests: bool = False) -> tuple[float, tuple[str, ...]]:
    """The error severity of one tool result and the names of the patterns that fired.

    Args:
        lower: The result's text, lower-cased.
        tool_errors: A result that starts with ``error:`` or is a JSON object with an ``error``
            is a soft failure (default profile; ``compat: nvidia`` leaves it out).
        failing_tests: A test summary with a non-zero failure count is a soft failure
            (likewise default profile only).

    Returns:
        ``(severity, names)`` with severity 0 (clean), 0.3, 0.7 or 1.0.
    """
    severity = 0.0
    fired: set[str] = set()
    for anchor, needles in t.ANCHORED_ERRORS:
        if anchor in lower:
            for name, level, needle in needles:
                if name not in fired and needle in lower:
                    fired.add(name)
                    severity = max(severity, level)
    names = sorted(fired, key=t.ERROR_ORDER.__getitem__) if len(fired) > 1 else list(fired)
    if "nonzero_exit" not in fired and "exit" in lower and _nonzero_exit(lower):
        names.append("nonzero_exit")
        severity = max(severity, t.SOFT)
    for name, hit in (
        ("compile_error", _compiler_error(lower)),
        ("runtime_exception", _runtime_exception(lower)),
        ("runtime_panic", _panic(lower)),
        ("patch_error", _patch_failed(lower)),
    ):
        if hit:
            names.append(name)
            severity = max(severity, t.HARD)
    if severity < t.SOFT:
        if tool_errors and _tool_reported_error(lower):
            names.append("tool_error")
            severity = t.SOFT
        elif failing_tests and has_failure_count(lower):
            names.append("failing_tests")
            severity = t.SOFT
    return severity, tuple(names)


@dataclass(slots=True, frozen=True)
class ResultInfo:
    """What one tool result says.

    Attributes:
        level: Error severity (0, 0.3, 0.7, 1.0).
        names: Error patterns that fired.
        fingerprint: Identity of a hard failure (see :func:`failure_fingerprint`), else ``None``.
        clean_pass: A test run passed: a pass phrase, no failure literal, no non-zero failure count.
    """

    level: float
    names: tuple[str, ...]
    fingerprint: str | None
    clean_pass: bool


_CACHE_LIMIT = 16_384
"""Longer results are analysed every time instead of being kept in the cache."""


def analyse_result(text: str, tool_errors: bool = False, failing_tests: bool = False) -> ResultInfo:
    """Reads one tool result's text (cached: a result stays in the recent window for several turns).

    Args:
        text: The result's text, as sent (any case).
        tool_errors: See :func:`severity_of`.
        failing_tests: See :func:`severity_of`.
    """
    if len(text) > _CACHE_LIMIT:
        return _analyse(text, tool_errors, failing_tests)
    return _analyse_cached(text, tool_errors, failing_tests)


def _analyse(text: str, tool_errors: bool, failing_tests: bool) -> ResultInfo:
    lower = text.lower()
    level, names = severity_of(lower, tool_errors=tool_errors, failing_tests=failing_tests)
    fingerprint = failure_fingerprint(lower, names) if level >= t.HARD else None
    # False negatives are preferred: a pass hands a capable session back to the efficient model.
    clean_pass = (
        any(a in lower for a in t.TEST_PASS_ANCHORS)
        and any(p in lower for p in t.TEST_PASS_PHRASES)
        and not any(f in lower for f in t.TEST_FAILURE_LITERALS)
        and not has_failure_count(lower)
    )
    return ResultInfo(level, names, fingerprint, clean_pass)


_analyse_cached = lru_cache(maxsize=2048)(_analyse)


def has_failure_count(lower: str) -> bool:
    """A failure word with a non-zero number before it ("2 failed", "1 error"); "0 failed" is clean."""
    if "fail" not in lower and "error" not in lower:
        return False
    for word in t.COUNTED_FAILURE_WORDS:
        at = lower.find(word)
        while at >= 0:
            end = at + len(word)
            if end == len(lower) or not (lower[end].isascii() and lower[end].isalnum()):
                digits = _digits_before(lower, at)
                if digits and digits.strip("0"):
                    return True
            at = lower.find(word, end)
    return False


def failure_fingerprint(lower: str, names: tuple[str, ...]) -> str:
    """A stable identity for a hard failure, so the same error seen twice can be recognised.

    The first line that reads like a diagnostic (else the first non-blank line) is kept, with
    paths replaced by ``<path>`` and digit runs by ``#`` (they change between retries), after
    the names of the patterns that fired.
    """
    # The first line holding a marker is the line of the earliest marker hit (no marker spans
    # a line break), found with one C-level search per marker instead of one per line.
    hits = [at for at in (lower.find(m) for m in t.DIAGNOSTIC_MARKERS) if at >= 0]
    if hits:
        at = min(hits)
        end = lower.find("\n", at)
        line = lower[lower.rfind("\n", 0, at) + 1 : end if end >= 0 else len(lower)]
    else:
        line = next((x for x in lower.split("\n") if x.strip()), "")
    words = ["<path>" if w.startswith("/") or "/src/" in w or "/tmp/" in w else w for w in line.split()]
    # Digit runs never span a space, so one pass over the joined line equals one per word.
    return ",".join(names) + "|" + _DIGIT_RUNS.sub("#", " ".join(words))[:240]


def _digits_before(lower: str, at: int) -> str:
    i = at
    while i > 0 and lower[i - 1].isspace():
        i -= 1
    j = i
    while j > 0 and lower[j - 1].isdigit() and lower[j - 1].isascii():
        j -= 1
    return lower[j:i]


def _nonzero_exit(lower: str) -> bool:
    for phrase in t.EXIT_PHRASES:
        at = lower.find(phrase)
        while at >= 0:
            i = at + len(phrase)
            while i < len(lower) and lower[i] in t.EXIT_SEPARATORS:
                i += 1
            j = i
            while j < len(lower) and lower[j].isdigit() and lower[j].isascii():
                j += 1
            if lower[i:j].strip("0"):
                return True
            at = lower.find(phrase, at + len(phrase))
    return False


def _lines(lower: str) -> list[str]:
    # Split on "\n" only (a "\r" before it is dropped), the way the reference reads lines.
    return [line.removesuffix("\r").lstrip() for line in lower.split("\n")]


def _compiler_error(lower: str) -> bool:
    if "compil" not in lower and "error[e" not in lower:
        return False
    for line in _lines(lower):
        if line in t.COMPILER_LINES or line.startswith("error: could not compile "):
            return True
        if line.startswith("error[e"):
            code, sep, _ = line[len("error[e") :].partition("]:")
            if sep and code.isdigit() and code.isascii():
                return True
    return False


def _runtime_exception(lower: str) -> bool:
    if not any(m in lower for m in t.STACK_FRAME_MARKERS):
        return False
    return any(line.startswith(t.EXCEPTION_LINE_PREFIXES) for line in _lines(lower))


def _panic(lower: str) -> bool:
    if t.PANIC_LINE_PREFIX not in lower or not any(m in lower for m in t.PANIC_CONTEXT):
        return False
    return any(line.startswith(t.PANIC_LINE_PREFIX) for line in _lines(lower))


def _patch_failed(lower: str) -> bool:
    if "patch" not in lower and "invalid context" not in lower:
        return False
    return any(line.startswith(t.PATCH_LINE_PREFIXES) or t.PATCH_LINE_INFIX in line for line in _lines(lower))


def _tool_reported_error(lower: str) -> bool:
    """A tool that says it failed: ``Error: …`` or a JSON object with a non-null ``error``."""
    head = lower.lstrip()
    if head.startswith("error:") or head.startswith("error -"):
        return True
    if head.startswith("{") and '"error"' in head:
        try:
            value = json.loads(head)
        except ValueError:
            return False
        return isinstance(value, dict) and value.get("error") not in (None, "", False)
    return False
