"""The straightforward reading of tool output and shell commands, kept as the specification.

Every needle is searched in the whole text and every line is looked at; no gates, no hit index,
no laziness. ``switchyard.routers.stage.text`` and ``.shell`` take shortcuts for speed, and the
tests check that they give exactly these answers.
"""

from __future__ import annotations

import json
import re

from switchyard.routers.stage import tables as t
from switchyard.routers.stage.shell import _edits, _program, _reads, _segments, _words, _writes
from switchyard.routers.stage.tables import ToolKind

_DIGITS = re.compile(r"[0-9]+")


def severity(lower: str, tool_errors: bool, failing_tests: bool) -> tuple[float, tuple[str, ...]]:
    level = 0.0
    names = [name for name, _, needles in t.SUBSTRING_ERRORS if any(n in lower for n in needles)]
    for name, value, _ in t.SUBSTRING_ERRORS:
        if name in names:
            level = max(level, value)
    if "nonzero_exit" not in names and nonzero_exit(lower):
        names.append("nonzero_exit")
        level = max(level, t.SOFT)
    lines = [line.removesuffix("\r").lstrip() for line in lower.split("\n")]
    for name, hit in (
        ("compile_error", any(compiler_line(line) for line in lines)),
        (
            "runtime_exception",
            any(m in lower for m in t.STACK_FRAME_MARKERS)
            and any(line.startswith(t.EXCEPTION_LINE_PREFIXES) for line in lines),
        ),
        (
            "runtime_panic",
            any(m in lower for m in t.PANIC_CONTEXT) and any(line.startswith(t.PANIC_LINE_PREFIX) for line in lines),
        ),
        ("patch_error", any(line.startswith(t.PATCH_LINE_PREFIXES) or t.PATCH_LINE_INFIX in line for line in lines)),
    ):
        if hit:
            names.append(name)
            level = max(level, t.HARD)
    if level < t.SOFT:
        if tool_errors and tool_reported_error(lower):
            names.append("tool_error")
            level = t.SOFT
        elif failing_tests and failure_count(lower):
            names.append("failing_tests")
            level = t.SOFT
    return level, tuple(names)


def compiler_line(line: str) -> bool:
    if line in t.COMPILER_LINES or line.startswith("error: could not compile "):
        return True
    if line.startswith("error[e"):
        code, sep, _ = line[len("error[e") :].partition("]:")
        return bool(sep) and code.isdigit() and code.isascii()
    return False


def nonzero_exit(lower: str) -> bool:
    for phrase in t.EXIT_PHRASES:
        for at in occurrences(lower, phrase):
            i = at + len(phrase)
            while i < len(lower) and lower[i] in t.EXIT_SEPARATORS:
                i += 1
            j = i
            while j < len(lower) and lower[j].isdigit() and lower[j].isascii():
                j += 1
            if lower[i:j].strip("0"):
                return True
    for form in t.RETURNCODE_FORMS:
        for match in re.finditer(re.escape(form) + r"(?!=)[ \t]*([0-9]+)", lower):
            if match.group(1).strip("0"):
                return True
    return False


def failure_count(lower: str) -> bool:
    for word in t.COUNTED_FAILURE_WORDS:
        for at in occurrences(lower, word):
            end = at + len(word)
            if end < len(lower) and lower[end].isascii() and lower[end].isalnum():
                continue
            i = at
            while i > 0 and lower[i - 1].isspace():
                i -= 1
            j = i
            while j > 0 and lower[j - 1].isdigit() and lower[j - 1].isascii():
                j -= 1
            if lower[j:i].strip("0"):
                return True
    return False


def occurrences(text: str, needle: str) -> list[int]:
    """Every start of ``needle`` in ``text``, overlapping ones included."""
    out = []
    at = text.find(needle)
    while at >= 0:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


def tool_reported_error(lower: str) -> bool:
    head = lower.lstrip()
    if head.startswith(("error:", "error -")):
        return True
    if head.startswith("{") and '"error"' in head:
        try:
            value = json.loads(head)
        except ValueError:
            return False
        return isinstance(value, dict) and value.get("error") not in (None, "", False)
    return False


def fingerprint(lower: str, names: tuple[str, ...]) -> str:
    line = next(
        (x for x in lower.split("\n") if any(m in x for m in t.DIAGNOSTIC_MARKERS)),
        next((x for x in lower.split("\n") if x.strip()), ""),
    )
    words = ["<path>" if w.startswith("/") or "/src/" in w or "/tmp/" in w else w for w in line.split()]
    return ",".join(names) + "|" + " ".join(_DIGITS.sub("#", w) for w in words)[:240]


def clean_pass(lower: str) -> bool:
    return (
        any(p in lower for p in t.TEST_PASS_PHRASES)
        and not any(f in lower for f in t.TEST_FAILURE_LITERALS)
        and not failure_count(lower)
    )


def analyse(text: str, tool_errors: bool, failing_tests: bool) -> tuple[float, tuple[str, ...], str | None, bool]:
    """``(level, names, fingerprint, clean_pass)`` of one tool result."""
    lower = text.lower()
    level, names = severity(lower, tool_errors, failing_tests)
    return level, names, fingerprint(lower, names) if level >= t.HARD else None, clean_pass(lower)


def classify_command(cmd: str) -> ToolKind:
    """The shell classification with every substring searched and the command always segmented."""
    pieces = list(_segments(cmd))
    segments = [_words(s) for s in pieces]
    if any(s in cmd for s in t.SHELL_WRITE_SUBSTRINGS) or any(_writes(w) for w in segments):
        return ToolKind.WRITE
    if "python" in cmd and any(s in cmd for s in t.PYTHON_WRITE_SUBSTRINGS):
        return ToolKind.WRITE
    if any(w and _program(w[0]) == "node" for w in segments) and any(s in cmd for s in t.NODE_WRITE_SUBSTRINGS):
        return ToolKind.WRITE
    if any(s in cmd for s in t.SHELL_EDIT_SUBSTRINGS) or any(_edits(w) for w in segments):
        return ToolKind.EDIT
    if any(s in cmd for s in t.SHELL_READ_SUBSTRINGS) or any(
        _reads(p, w) for p, w in zip(pieces, segments, strict=True)
    ):
        return ToolKind.READ
    return ToolKind.OTHER
