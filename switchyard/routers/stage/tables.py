"""The stage router's vocabularies: error severities, test-run phrases, tool kinds, shell programs.

Layer: ``routers`` — pure data, no imports of ours.

Every table is lower-case and matched against lower-cased text. The tables follow the
published behaviour of NVIDIA's stage router (``nemo-switchyard`` 0.3.0) so that
``compat: nvidia`` reproduces its decisions; the few entries only the default profile uses are
marked "default profile only" and listed in ``docs/stage-router.md``.
"""

from __future__ import annotations

from enum import Enum

SOFT = 0.3
"""A plain failure: a non-zero exit, a failing test summary, a tool that said "Error:"."""
HARD = 0.7
"""A real exception or a missing command/file/module; one unit of evidence for the scorer."""
CRITICAL = 1.0
"""Out of memory: escalates on its own (the ``override`` source)."""


class ToolKind(Enum):
    """What a tool call does, as far as the scorer cares."""

    WRITE = "write"
    EDIT = "edit"
    READ = "read"
    PLAN = "plan"
    SHELL = "shell"
    """Classified by its command line (see :mod:`switchyard.routers.stage.shell`)."""
    OTHER = "other"


# -- error severity ------------------------------------------------------------------------------

SUBSTRING_ERRORS: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("oom", CRITICAL, ("out of memory", "memoryerror", "cannot allocate memory")),
    ("connection_refused", HARD, ("connection refused", "connectionrefusederror", "econnrefused")),
    ("traceback", HARD, ("traceback (most recent call last)",)),
    ("import_error", HARD, ("modulenotfounderror:", "importerror:", "no module named ")),
    ("command_not_found", HARD, ("command not found", "not found\n", "/usr/bin/env: ")),
    ("assertion", HARD, ("assertionerror",)),
    ("value_error", HARD, ("valueerror:",)),
    ("syntax_error", HARD, ("syntaxerror:",)),
    ("timeout", HARD, ("timed out", "timeouterror", "timeout expired", "deadline exceeded")),
    ("missing_file", HARD, ("filenotfounderror:", "no such file or directory", "file does not exist")),
    ("nonzero_exit", SOFT, ("returned non-zero",)),
)
"""``(name, severity, substrings)``: any substring fires the pattern."""

ANCHORS = (
    "error",
    "memory",
    "refused",
    "traceback",
    "module",
    "not found",
    "/usr/bin/env: ",
    "time",
    "deadline",
    "file",
    "non-zero",
)
"""Short pieces that the substrings above contain: a long output is searched once per anchor,
and only the substrings of the anchors it holds are looked for (same result, fewer scans)."""


def _anchored() -> tuple[tuple[str, tuple[tuple[str, float, str], ...]], ...]:
    groups: dict[str, list[tuple[str, float, str]]] = {a: [] for a in ANCHORS}
    for name, level, needles in SUBSTRING_ERRORS:
        for needle in needles:
            anchor = next(a for a in ANCHORS if a in needle)
            groups[anchor].append((name, level, needle))
    return tuple((a, tuple(g)) for a, g in groups.items())


ANCHORED_ERRORS = _anchored()
ERROR_ORDER = {name: i for i, (name, _, _) in enumerate(SUBSTRING_ERRORS)}

EXIT_PHRASES = ("exit code", "exit status", "exited with code", "exited with status")
"""Followed by a status number; only a non-zero number is a (soft) failure, so Codex's
"Process exited with code 0" stays clean."""

EXIT_SEPARATORS = " \t\r\n\x0c:='\"`"

RETURNCODE_FORMS = ("<returncode>", "returncode:", "returncode=", "return code:")
"""Status fields as agents print them: mini-SWE-agent's observation template wraps the status
in ``<returncode>N</returncode>``; Python's ``CompletedProcess`` repr says ``returncode=N``;
many tool wrappers write ``returncode: N``. Only spaces may follow the form before the number,
so source code (``if proc.returncode == 2:``) stays clean."""

OBSERVATION_PREFIX = "<returncode>"
"""How mini-SWE-agent's observation template starts a user message holding command output."""

EXIT_GATES = ("exit", "returncode", "return code")
"""A text holding none of these cannot report an exit status (skips the scans)."""

COMPILER_LINES = ("compilation failed", "error: compilation failed", "error: could not compile")
EXCEPTION_LINE_PREFIXES = (
    "typeerror:",
    "referenceerror:",
    "rangeerror:",
    "runtimeerror:",
    "keyerror:",
    "attributeerror:",
)
"""A line starting with one of these is an exception only when a stack frame follows
(``\\n  at ``), so source code that merely names the type stays clean."""
STACK_FRAME_MARKERS = ("\n    at ", "\n  at ")
PANIC_LINE_PREFIX = "panic: runtime error:"
PANIC_CONTEXT = ("\ngoroutine ", "[signal sig")
PATCH_LINE_PREFIXES = ("error: patch failed:", "patch failed:", "invalid context")
PATCH_LINE_INFIX = ": patch does not apply"

DIAGNOSTIC_MARKERS = (
    "error",
    "exception",
    "panic",
    "failed",
    "timed out",
    "timeout",
    "connection refused",
    "cannot allocate memory",
    "out of memory",
    "not found",
)
"""A line holding one of these is the line that identifies a failure (see ``failure_fingerprint``)."""

# -- test runs ------------------------------------------------------------------------------------

TEST_PASS_ANCHORS = ("pass", "test", "\nok ", "✓ ")
"""Every pass phrase contains one of these."""
TEST_PASS_PHRASES = (
    " passed",
    "passed in",
    "tests passed",
    "all tests passed",
    "test ok",
    "test result: ok",
    "passed.\n",
    "tests pass",
    "\nok ",
    "✓ ",
)
TEST_FAILURE_LITERALS = ("✗ ", "fatal:", "assertionerror", "error:")
COUNTED_FAILURE_WORDS = ("failed", "failure", "failures", "errors", "error")
"""Failure words that only count with a non-zero number before them ("0 failed" is clean)."""

# -- tool calls ------------------------------------------------------------------------------------

TOOL_NAMES: dict[str, ToolKind] = {
    **dict.fromkeys(("write", "create_file", "new_file", "write_file"), ToolKind.WRITE),
    **dict.fromkeys(
        (
            "edit",
            "multiedit",
            "notebookedit",
            "str_replace",
            "str_replace_based_edit_tool",
            "apply_patch",
            "text_editor",
            "patch",
        ),
        ToolKind.EDIT,
    ),
    **dict.fromkeys(("read", "view", "read_file", "search_files"), ToolKind.READ),
    **dict.fromkeys(("todowrite", "todo_write", "todo", "update_plan"), ToolKind.PLAN),
    **dict.fromkeys(("bash", "shell_command", "shell", "local_shell_call", "terminal", "exec_command"), ToolKind.SHELL),
}
"""Built-in tool names (Claude Code, Codex, Hermes, OpenAI harnesses), lower-case."""

SEARCH_TOOLS: dict[str, ToolKind] = {
    **dict.fromkeys(("grep", "glob", "ls"), ToolKind.READ),  # Claude Code's search tools
    # Qwen Code's (and Gemini CLI's) names for its search and shell tools.
    **dict.fromkeys(("grep_search", "list_directory", "read_many_files"), ToolKind.READ),
    "run_shell_command": ToolKind.SHELL,
}
"""Default profile only: agents' own tool names that NVIDIA's table leaves unclassified."""

COMMAND_KEYS = ("command", "cmd", "input")
"""Argument keys a shell tool's command line may hide under (a string or an argv list)."""

# -- shell commands ---------------------------------------------------------------------------------

SHELL_WRITE_SUBSTRINGS = (
    "cat >",
    "cat >>",
    "echo >",
    "echo >>",
    "tee ",
    "printf >",
    "printf >>",
    "> /",
    ">> /",
    "<< 'eof'",
    "<<eof",
    "<<'eof'",
    "<< eof",
)
PYTHON_WRITE_SUBSTRINGS = ("write_text(", "writelines(", ".write(")
NODE_WRITE_SUBSTRINGS = ("writefilesync(", "writefile(", "appendfilesync(", "appendfile(")
SHELL_EDIT_SUBSTRINGS = (
    "sed -i",
    "sed --in-place",
    "awk -i inplace",
    "awk 'inplace=1'",
    "patch ",
    "patch -p",
    "perl -i",
    "perl -p -i",
    "perl -pi",
)
SHELL_READ_SUBSTRINGS = (
    "cat /",
    "cat ./",
    "cat ../",
    "grep ",
    "ls ",
    "ls -",
    "find ",
    "head ",
    "tail ",
    "wc ",
    "diff ",
    "which ",
    "ps ",
    "df ",
    "du ",
    "stat ",
    "file ",
    "less ",
    "more ",
)
READ_PROGRAMS = frozenset(
    (
        "cat",
        "rg",
        "nl",
        "jq",
        "pwd",
        "tree",
        "sed",
        "grep",
        "ls",
        "find",
        "head",
        "tail",
        "wc",
        "diff",
        "which",
        "ps",
        "df",
        "du",
        "stat",
        "file",
        "less",
        "more",
        "readlink",
        "realpath",
        "basename",
        "dirname",
        "printenv",
    )
)
WRITE_PROGRAMS = frozenset(("cp", "mkdir", "touch", "install"))
REDIRECTING_PROGRAMS = frozenset(("echo", "printf", "git")) | READ_PROGRAMS
"""Programs that write a file when their output is redirected (``echo x > f``)."""
GIT_READ_SUBCOMMANDS = frozenset(
    (
        "status",
        "diff",
        "log",
        "show",
        "show-ref",
        "rev-parse",
        "ls-files",
        "ls-remote",
        "ls-tree",
        "grep",
        "blame",
        "merge-base",
        "check-ignore",
        "tag",
    )
)
GIT_EDIT_SUBCOMMANDS = frozenset(("apply", "am", "restore"))

# -- other markers ----------------------------------------------------------------------------------

COMPACTION_MARKER = "session is being continued"
"""Claude Code's preamble when it summarises an overflowed context (case-insensitive)."""
