"""What a shell command does: write a file, edit one, read, or something else (run, build, test).

Layer: ``routers`` — pure functions.

Not a shell parser: a command line is cut at unquoted ``;``, ``|``, ``&`` and newlines, and
only the program (after ``env`` and ``VAR=value`` prefixes) and its plain words are looked at.
Redirection and in-place edits win over the read-like look of a command (``cat > f`` writes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache

from switchyard.routers.stage import tables as t
from switchyard.routers.stage.tables import ToolKind

_SEPARATORS = frozenset("\n;|&")


_CACHE_LIMIT = 16_384
"""Longer argument strings (big heredocs) are classified every time instead of cached."""


def classify_arguments(arguments: str) -> ToolKind:
    """The kind of a shell tool call from its JSON arguments (``OTHER`` without a command).

    Results are cached by the arguments string: the same recent calls are looked at again on
    every turn of a session.
    """
    if len(arguments) > _CACHE_LIMIT:
        return _classify_arguments(arguments)
    return _classify_arguments_cached(arguments)


def _classify_arguments(arguments: str) -> ToolKind:
    command = command_of(arguments)
    return classify_command(command) if command else ToolKind.OTHER


_classify_arguments_cached = lru_cache(maxsize=4096)(_classify_arguments)


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


def _any_of(needles: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled search for "any of these substrings" (cheaper than one search each)."""
    return re.compile("|".join(re.escape(n) for n in needles))


_WRITES = _any_of(t.SHELL_WRITE_SUBSTRINGS)
_PYTHON_WRITES = _any_of(t.PYTHON_WRITE_SUBSTRINGS)
_NODE_WRITES = _any_of(t.NODE_WRITE_SUBSTRINGS)
_EDITS = _any_of(t.SHELL_EDIT_SUBSTRINGS)
_READS = _any_of(t.SHELL_READ_SUBSTRINGS)
_SPECIAL = ("\n", ";", "|", "&", "'", '"', "\\")
"""Characters that make :func:`_segments` cut or quote; a command without them is one segment."""


def classify_command(cmd: str) -> ToolKind:
    """The kind of a lower-cased command line: ``WRITE``, ``EDIT``, ``READ`` or ``OTHER``."""
    if any(c in cmd for c in _SPECIAL):
        pieces = list(_segments(cmd))
    else:
        whole = cmd.strip()
        pieces = [whole] if whole else []
    segments = [_words(s) for s in pieces]
    if _WRITES.search(cmd) or any(_writes(w) for w in segments):
        return ToolKind.WRITE
    if "python" in cmd and _PYTHON_WRITES.search(cmd):
        return ToolKind.WRITE
    if _NODE_WRITES.search(cmd) and any(w and _program(w[0]) == "node" for w in segments):
        return ToolKind.WRITE
    if _EDITS.search(cmd) or any(_edits(w) for w in segments):
        return ToolKind.EDIT
    if _READS.search(cmd) or any(_reads(p, w) for p, w in zip(pieces, segments, strict=True)):
        return ToolKind.READ
    return ToolKind.OTHER


def _segments(cmd: str) -> Iterator[str]:
    """Pieces of ``cmd`` between unquoted separators, stripped, empty ones skipped."""
    start = 0
    quote = ""
    escaped = False
    for i, ch in enumerate(cmd):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _SEPARATORS:
            piece = cmd[start:i].strip()
            start = i + 1
            if piece:
                yield piece
    piece = cmd[start:].strip()
    if piece:
        yield piece


def _words(segment: str) -> list[str]:
    """The segment's words with ``env [-flags]`` and leading ``VAR=value`` assignments dropped."""
    words = segment.split()
    i = 0
    if words and words[0] == "env":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 1
    while i < len(words) and "=" in words[i] and not words[i].startswith("="):
        i += 1
    return words[i:]


def _program(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1] or word


def _writes(words: list[str]) -> bool:
    if not words:
        return False
    program = _program(words[0])
    if program in t.WRITE_PROGRAMS:
        return True
    return program in t.REDIRECTING_PROGRAMS and any(w in (">", ">>") for w in words[1:])


def _edits(words: list[str]) -> bool:
    if not words:
        return False
    program, args = _program(words[0]), words[1:]
    if program in ("mv", "rm"):
        return True
    if program == "perl":
        for word in args:
            if not word.startswith("-"):
                break
            if "i" in word.lstrip("-"):
                return True
        return False
    if program == "git":
        return bool(args) and args[0] in t.GIT_EDIT_SUBCOMMANDS
    if program == "gofmt":
        return "-w" in args
    if program == "cargo":
        return bool(args) and args[0] == "fmt" and "--check" not in args
    if program == "ruff":
        return _ruff_fixes(args[0] if args else None, args)
    if program == "prettier":
        return "--write" in args
    if program == "black":
        return "--check" not in args
    # A formatter behind a runner (``npx prettier --write``, ``uv run ruff format``).
    # The cheap list checks first: most commands have none of these words.
    if "--write" in args and any(_program(w) == "prettier" for w in args):
        return True
    if (("format" in args and "--check" not in args) or ("check" in args and "--fix" in args)) and any(
        _program(w) == "ruff" for w in args
    ):
        return True
    return False


def _ruff_fixes(sub: str | None, args: list[str]) -> bool:
    return (sub == "format" and "--check" not in args) or (sub == "check" and "--fix" in args)


def _reads(segment: str, words: list[str]) -> bool:
    if segment == "env":
        return True
    if not words:
        return False
    program, args = _program(words[0]), words[1:]
    if program in t.READ_PROGRAMS or program == "type":
        return True
    if program == "command":
        return bool(args) and args[0] == "-v"
    if program != "git" or not args:
        return False
    sub, rest = args[0], args[1:]
    if sub == "branch":
        return not rest or rest[0].startswith("-")
    if sub == "remote":
        return not rest or rest[0].startswith("-") or rest[0] == "get-url"
    if sub == "config":
        return bool(rest) and rest[0] in ("--get", "--get-all", "--list", "-l")
    return sub in t.GIT_READ_SUBCOMMANDS
