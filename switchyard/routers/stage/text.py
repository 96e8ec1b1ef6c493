"""Reading tool output: how bad an error is, and whether a test run passed.

Layer: ``routers`` — pure functions over lower-cased text.

Speed matters here: the newest tool result of every turn is new text, read while the request
waits. Every rule is therefore checked with a few C-level substring searches, shared where the
rules share a word (most needles contain ``error``: when the text has none, they are all
skipped at once), and the line-level rules (``a line starting with …``) look only at the lines
around a hit instead of splitting the whole output into lines. The results equal those of the
straightforward reading (every needle searched, every line looked at), which the tests check
against a reference implementation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache

from switchyard.routers.stage import tables as t

_DIGIT_RUNS = re.compile(r"[0-9]+")

_KEY = "error"
"""Most needles contain it (and ``error`` is the first anchor): a text without it skips them all,
and in a long text they are looked for only around its hits (see :func:`_hits`)."""
_KEYED = tuple(
    (name, level, needle, needle.index(_KEY))
    for anchor, entries in t.ANCHORED_ERRORS
    if anchor == _KEY
    for name, level, needle in entries
)
"""The error-table needles holding ``error``, with where it sits in each."""
_ANCHORED = tuple(
    (anchor, tuple((name, level, needle, needle.index(anchor)) for name, level, needle in entries))
    for anchor, entries in t.ANCHORED_ERRORS
    if anchor != _KEY
)
"""The other needles under their anchors: a needle is searched only when its anchor occurs."""
_PASS_GROUPS = tuple(
    (anchor, tuple(p for p in t.TEST_PASS_PHRASES if anchor in p and not any(a in p for a in t.TEST_PASS_ANCHORS[:i])))
    for i, anchor in enumerate(t.TEST_PASS_ANCHORS)
)
"""Each pass phrase under the first anchor it contains."""
_KEYED_LITERALS = tuple((f, f.index(_KEY)) for f in t.TEST_FAILURE_LITERALS if _KEY in f)
_OTHER_LITERALS = tuple(f for f in t.TEST_FAILURE_LITERALS if _KEY not in f)
_FAIL_WORDS = tuple(w for w in t.COUNTED_FAILURE_WORDS if w.startswith("fail"))
_ERROR_WORDS = tuple(w for w in t.COUNTED_FAILURE_WORDS if w.startswith(_KEY))
_PANIC_AT = t.PANIC_LINE_PREFIX.index(_KEY)
_STACK_KEY = "  at "
"""Every stack-frame marker holds it."""
_EXCEPTION_KEY = "error:"
"""Every exception line prefix holds it, so its hits lead to every candidate line."""

_HITS_FROM = 1024
"""Texts at least this long get the hit index; in shorter ones a direct search is cheaper."""
_MAX_HITS = 24
"""More hits than this and direct searches are cheaper than checking around each hit."""


def _error_hits(lower: str, first: int) -> list[int] | None:
    """Where ``error`` occurs (``first``: its first hit); see :func:`_hits`."""
    return _hits(lower, _KEY, first)


def _hits(lower: str, anchor: str, first: int) -> list[int] | None:
    """Where ``anchor`` occurs in a long text (``first``: its first hit), or ``None`` when the
    text is short or holds it too often; then every needle is searched directly."""
    if len(lower) < _HITS_FROM:
        return None
    hits = [first]
    at = lower.find(anchor, first + 1)
    while at >= 0:
        if len(hits) == _MAX_HITS:
            return None
        hits.append(at)
        at = lower.find(anchor, at + 1)
    return hits


def _keyed(lower: str, hits: list[int] | None, needle: str, offset: int) -> bool:
    """``needle in lower`` for a needle holding the anchor of ``hits`` at ``offset``: every
    occurrence of the needle puts one of the hits at ``offset`` into it."""
    if hits is None:
        return needle in lower
    for at in hits:
        if at >= offset and lower.startswith(needle, at - offset):
            return True
    return False


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
    first = lower.find(_KEY)
    hits = _error_hits(lower, first) if first >= 0 else None
    severity, names, _ = _severity(lower, first >= 0, hits, tool_errors, failing_tests)
    return severity, names


def _severity(
    lower: str, has_error: bool, hits: list[int] | None, tool_errors: bool, failing_tests: bool
) -> tuple[float, tuple[str, ...], bool | None]:
    """:func:`severity_of`, plus :func:`has_failure_count` when it was computed on the way."""
    severity, names = _error_table(lower, has_error, hits)
    if "nonzero_exit" not in names and any(g in lower for g in t.EXIT_GATES) and _nonzero_exit(lower):
        names.append("nonzero_exit")
        if severity < t.SOFT:
            severity = t.SOFT
    hard = _line_rules(lower, has_error, hits)
    if hard:
        names.extend(hard)
        if severity < t.HARD:
            severity = t.HARD
    counted: bool | None = None
    if severity < t.SOFT:
        if tool_errors and _tool_reported_error(lower):
            names.append("tool_error")
            severity = t.SOFT
        elif failing_tests:
            counted = _has_failure_count(lower, has_error, hits)
            if counted:
                names.append("failing_tests")
                severity = t.SOFT
    return severity, tuple(names), counted


def _error_table(lower: str, has_error: bool, hits: list[int] | None) -> tuple[float, list[str]]:
    """The worst level and the names (in table order) of the substring patterns that occur."""
    severity = 0.0
    fired: list[str] = []
    if has_error:
        for name, level, needle, offset in _KEYED:
            if name not in fired and (needle in lower if hits is None else _keyed(lower, hits, needle, offset)):
                fired.append(name)
                if level > severity:
                    severity = level
    for anchor, entries in _ANCHORED:
        at = lower.find(anchor)
        if at < 0:
            continue
        # Several needles under one anchor: in a long text, look only around its hits.
        anchor_hits = _hits(lower, anchor, at) if len(entries) > 1 and len(lower) >= _HITS_FROM else None
        for name, level, needle, offset in entries:
            if name not in fired and (
                needle in lower if anchor_hits is None else _keyed(lower, anchor_hits, needle, offset)
            ):
                fired.append(name)
                if level > severity:
                    severity = level
    return severity, sorted(fired, key=t.ERROR_ORDER.__getitem__) if len(fired) > 1 else fired


def _line_rules(lower: str, has_error: bool, hits: list[int] | None) -> list[str]:
    """The hard failures told by whole lines, each behind the searches that rule it out cheaply."""
    hard = []
    if ("compil" in lower or (has_error and _keyed(lower, hits, "error[e", 0))) and _compiler_error(lower, has_error):
        hard.append("compile_error")
    if has_error and _STACK_KEY in lower and _runtime_exception(lower):
        hard.append("runtime_exception")
    if has_error and _keyed(lower, hits, t.PANIC_LINE_PREFIX, _PANIC_AT) and _panic(lower):
        hard.append("runtime_panic")
    if ("patch" in lower or "invalid context" in lower) and _patch_failed(lower):
        hard.append("patch_error")
    return hard


class ResultInfo:
    """What one tool result says.

    ``level`` and ``names`` are read at once; ``fingerprint`` and ``clean_pass`` only when first
    asked for (then kept), since a turn needs them only for some results: fingerprints only when
    two hard failures share the window, a clean pass only for a result without a failure.

    Attributes:
        level: Error severity (0, 0.3, 0.7, 1.0).
        names: Error patterns that fired.
    """

    __slots__ = ("_clean_pass", "_counted", "_fingerprint", "_text", "level", "names")

    def __init__(self, text: str, level: float, names: tuple[str, ...], counted: bool | None = None) -> None:
        self._text = text
        self.level = level
        self.names = names
        self._counted = counted
        self._fingerprint: str | None = None
        self._clean_pass: bool | None = None

    @property
    def fingerprint(self) -> str | None:
        """Identity of a hard failure (see :func:`failure_fingerprint`), else ``None``."""
        if self.level < t.HARD:
            return None
        if self._fingerprint is None:
            self._fingerprint = failure_fingerprint(self._text.lower(), self.names)
        return self._fingerprint

    @property
    def clean_pass(self) -> bool:
        """A test run passed: a pass phrase, no failure literal, no non-zero failure count."""
        if self._clean_pass is None:
            lower = self._text.lower()
            first = lower.find(_KEY)
            hits = _error_hits(lower, first) if first >= 0 else None
            self._clean_pass = _clean_pass(lower, first >= 0, hits, self._counted)
        return self._clean_pass

    def __repr__(self) -> str:
        return f"ResultInfo(level={self.level}, names={self.names})"


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
    first = lower.find(_KEY)
    has_error = first >= 0
    hits = _error_hits(lower, first) if has_error and len(lower) >= _HITS_FROM else None
    level, names, counted = _severity(lower, has_error, hits, tool_errors, failing_tests)
    info = ResultInfo(text, level, names, counted)
    if level == 0:
        # A clean result is the one whose pass the window may need; read it while ``lower`` is at hand.
        info._clean_pass = _clean_pass(lower, has_error, hits, counted)
    return info


_analyse_cached = lru_cache(maxsize=2048)(_analyse)


def _clean_pass(lower: str, has_error: bool, hits: list[int] | None, counted: bool | None) -> bool:
    """A pass phrase, no failure literal, no non-zero failure count. False negatives are
    preferred: a pass hands a capable session back to the efficient model. The cheapest
    refutations come first (an error output usually says ``error:`` early on)."""
    if has_error and any(_keyed(lower, hits, f, offset) for f, offset in _KEYED_LITERALS):
        return False
    if not any(anchor in lower and any(p in lower for p in phrases) for anchor, phrases in _PASS_GROUPS):
        return False
    if any(f in lower for f in _OTHER_LITERALS):
        return False
    return not (_has_failure_count(lower, has_error, hits) if counted is None else counted)


def has_failure_count(lower: str) -> bool:
    """A failure word with a non-zero number before it ("2 failed", "1 error"); "0 failed" is clean."""
    first = lower.find(_KEY)
    return _has_failure_count(lower, first >= 0, _error_hits(lower, first) if first >= 0 else None)


def _has_failure_count(lower: str, has_error: bool, hits: list[int] | None) -> bool:
    # Every counted word starts with "fail" or "error", so only those hits are looked at.
    if _counted_after(lower, _every(lower, "fail"), _FAIL_WORDS):
        return True
    return has_error and _counted_after(lower, hits if hits is not None else _every(lower, _KEY), _ERROR_WORDS)


def _every(lower: str, stem: str) -> list[int]:
    """Every occurrence of ``stem``."""
    hits = []
    at = lower.find(stem)
    while at >= 0:
        hits.append(at)
        at = lower.find(stem, at + 1)
    return hits


def _counted_after(lower: str, hits: list[int], words: tuple[str, ...]) -> bool:
    n = len(lower)
    for at in hits:
        for word in words:
            if lower.startswith(word, at):
                end = at + len(word)
                if (end == n or not (lower[end].isascii() and lower[end].isalnum())) and _digits_before(
                    lower, at
                ).strip("0"):
                    return True
    return False


def failure_fingerprint(lower: str, names: tuple[str, ...]) -> str:
    """A stable identity for a hard failure, so the same error seen twice can be recognised.

    The first line that reads like a diagnostic (else the first non-blank line) is kept, with
    paths replaced by ``<path>`` and digit runs by ``#`` (they change between retries), after
    the names of the patterns that fired.
    """
    return _fingerprint(lower, names, lower.find(_KEY))


def _fingerprint(lower: str, names: tuple[str, ...], first_error: int) -> str:
    # The first line holding a marker is the line of the earliest marker hit (no marker spans a
    # line break). Once one marker is found, the others are only searched before it.
    at = first_error
    for marker in _MARKERS:
        hit = lower.find(marker) if at < 0 else lower.find(marker, 0, at + len(marker) - 1)
        if hit >= 0:
            at = hit
    if at >= 0:
        end = lower.find("\n", at)
        line = lower[lower.rfind("\n", 0, at) + 1 : end if end >= 0 else len(lower)]
    else:
        line = next((x for x in lower.split("\n") if x.strip()), "")
    words = line.split()
    if "/" in line:
        words = ["<path>" if w.startswith("/") or "/src/" in w or "/tmp/" in w else w for w in words]
    # Digit runs never span a space, so one pass over the joined line equals one per word.
    return ",".join(names) + "|" + _DIGIT_RUNS.sub("#", " ".join(words))[:240]


_MARKERS = tuple(m for m in t.DIAGNOSTIC_MARKERS if m != _KEY)
"""The diagnostic markers besides ``error``, whose first hit the caller knows."""


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
    return _nonzero_returncode(lower)


def _nonzero_returncode(lower: str) -> bool:
    for form in t.RETURNCODE_FORMS:
        at = lower.find(form)
        while at >= 0:
            i = at + len(form)
            if form.endswith("=") and lower.startswith("=", i):
                at = lower.find(form, i)
                continue
            while i < len(lower) and lower[i] in " \t":
                i += 1
            j = i
            while j < len(lower) and lower[j].isdigit() and lower[j].isascii():
                j += 1
            if lower[i:j].strip("0"):
                return True
            at = lower.find(form, i)
    return False


def _lines_holding(lower: str, needle: str) -> Iterator[str]:
    """Each line (split on ``\\n``, a trailing ``\\r`` dropped, leading whitespace stripped, the
    way the reference reads lines) that holds ``needle``, which must not contain ``\\n``."""
    at = lower.find(needle)
    while at >= 0:
        start = lower.rfind("\n", 0, at) + 1
        end = lower.find("\n", at)
        if end < 0:
            yield lower[start:].removesuffix("\r").lstrip()
            return
        yield lower[start:end].removesuffix("\r").lstrip()
        at = lower.find(needle, end)


def _compiler_error(lower: str, has_error: bool = True) -> bool:
    # Every compiler line holds "compil" or starts with "error[e".
    for line in _lines_holding(lower, "compil"):
        if line in t.COMPILER_LINES or line.startswith("error: could not compile "):
            return True
    if not has_error:
        return False
    for line in _lines_holding(lower, "error[e"):
        if line.startswith("error[e"):
            code, sep, _ = line[len("error[e") :].partition("]:")
            if sep and code.isdigit() and code.isascii():
                return True
    return False


def _runtime_exception(lower: str) -> bool:
    if _STACK_KEY not in lower or not any(m in lower for m in t.STACK_FRAME_MARKERS):
        return False
    return any(line.startswith(t.EXCEPTION_LINE_PREFIXES) for line in _lines_holding(lower, _EXCEPTION_KEY))


def _panic(lower: str) -> bool:
    if t.PANIC_LINE_PREFIX not in lower or not any(m in lower for m in t.PANIC_CONTEXT):
        return False
    return any(line.startswith(t.PANIC_LINE_PREFIX) for line in _lines_holding(lower, t.PANIC_LINE_PREFIX))


def _patch_failed(lower: str) -> bool:
    # A line starting with "error: patch failed:" also holds "patch failed:".
    for needle in ("patch failed:", t.PATCH_LINE_INFIX, "invalid context"):
        for line in _lines_holding(lower, needle):
            if line.startswith(t.PATCH_LINE_PREFIXES) or t.PATCH_LINE_INFIX in line:
                return True
    return False


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
