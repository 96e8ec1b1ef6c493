"""Synthetic coding-agent trajectories (OpenAI Chat messages) for the stage-router benchmarks.

Written for this repository: scripted sessions of a coding agent that reads, greps, edits,
writes and runs tests and programs through Claude-Code-style (``Bash``, ``Read``, ``Edit``,
``Write``, ``TodoWrite``, ``Grep``), Codex-style (``exec_command``, ``apply_patch``) and plain
(``read_file``, ``run_tests``) tools, hitting tracebacks, OOM, compiler errors, refused
connections, timeouts, failing and passing test runs, loops and context compaction.

``trajectories(seed)`` is deterministic for a seed. Each trajectory is
``{"id": str, "messages": [chat message dicts]}``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

Msg = dict[str, Any]

TASK = (
    "Fix the failing behaviour described in ISSUE.md in this repository, keep the public API, "
    "and make sure the test suite passes."
)
SYSTEM = "You are a coding agent working in /app. Use the tools to inspect and change the repository."

PY_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/app/src/parser.py", line {line}, in parse\n'
    "    return int(value)\n"
    "ValueError: invalid literal for int() with base 10: '{value}'\n"
)
PYTEST_FAIL = (
    "============================= test session starts ==============================\n"
    "collected {n} items\n\ntests/test_parser.py ..F.\n\n"
    "=================================== FAILURES ===================================\n"
    "    def test_parse_pair():\n>       assert parse_pair('3,5') == (3, 5)\nE       AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_parser.py::test_parse_pair - AssertionError\n"
    "========================= 1 failed, {p} passed in 0.41s ========================="
)
PYTEST_TDD_FAIL = (
    "FAILED tests/test_pairs.py::test_new_case - assert None == (1, 2)\n"
    "========================= 1 failed, {p} passed in 0.22s ========================="
)
PYTEST_PASS = "============================== {n} passed in 0.{ms}s =============================="
CARGO_ERROR = (
    "   Compiling parser v0.1.0 (/app)\n"
    "error[E0308]: mismatched types\n --> src/lib.rs:{line}:9\n"
    "error: could not compile `parser` (lib) due to 1 previous error"
)
CARGO_PASS = "running {n} tests\ntest result: ok. {n} passed; 0 failed; 0 ignored; 0 measured"
CUDA_OOM = (
    'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
)
GO_PANIC = "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()"
NODE_ERROR = "TypeError: Cannot read properties of undefined (reading 'map')\n    at render (/app/src/view.js:12:9)"
CONN_REFUSED = "curl: (7) Failed to connect to localhost port 8000: Connection refused"
TIMEOUT = "Command timed out after 120 seconds"
IMPORT_ERROR = "ModuleNotFoundError: No module named 'yaml'"
NOT_FOUND = "bash: line 1: pytestt: command not found"
EXIT_2 = "Process exited with code 2\nOutput:\nusage: tool [-h] FILE\ntool: error: the following arguments are required"
EXIT_0 = "Process exited with code 0\nOutput:\n{body}"
TOOL_ERROR = "Error: no documentation page matches 'parse_pair'"
JSON_ERROR = '{"error": "index not built", "hint": "run indexer"}'
COMPACTION = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below: the agent located the bug in src/parser.py and "
    "started a fix."
)
FILE_BODY = "def parse(value):\n    return int(value)\n\n\ndef parse_pair(text):\n    a, b = text.split(';')\n"


class Session:
    """Builds one trajectory turn by turn."""

    def __init__(self, name: str, rng: random.Random, *, style: str) -> None:
        self.name = name
        self.rng = rng
        self.style = style
        self.messages: list[Msg] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        self._ids = 0

    def _id(self) -> str:
        self._ids += 1
        return f"call_{self.name}_{self._ids}"

    def calls(self, *calls: tuple[str, dict[str, Any], str], text: str | None = None) -> None:
        """One assistant turn with one or more tool calls, then their results."""
        ids = [self._id() for _ in calls]
        self.messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, (n, a, _) in zip(ids, calls, strict=True)
                ],
            }
        )
        for i, (_, _, out) in zip(ids, calls, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": i, "content": out})

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    # -- tool flavours -------------------------------------------------------------------------

    def shell(self, command: str, output: str) -> None:
        if self.style == "codex":
            self.calls(("exec_command", {"cmd": command, "workdir": "/app"}, output))
        elif self.style == "plain":
            self.calls(("run_command", {"command": command}, output))
        else:
            self.calls(("Bash", {"command": command, "description": "run"}, output))

    def read(self, path: str) -> None:
        body = FILE_BODY * self.rng.randint(1, 4)
        if self.style == "codex":
            self.calls(("exec_command", {"cmd": f"sed -n '1,200p' {path}"}, EXIT_0.format(body=body)))
        elif self.style == "plain":
            self.calls(("read_file", {"path": path}, body))
        else:
            self.calls(("Read", {"file_path": f"/app/{path}"}, body))

    def search(self, pattern: str) -> None:
        hits = "\n".join(f"src/mod{i}.py:{i * 7}: {pattern}(x)" for i in range(self.rng.randint(1, 6)))
        if self.style == "claude" and self.rng.random() < 0.5:
            self.calls(("Grep", {"pattern": pattern, "path": "src"}, hits))
        else:
            self.shell(f"grep -rn '{pattern}' src/", hits)

    def edit(self, path: str) -> None:
        if self.style == "codex":
            patch = (
                f"*** Begin Patch\n*** Update File: {path}\n-    a, b = text.split(';')\n+    a, b = text.split(',')\n"
            )
            self.calls(("apply_patch", {"input": patch}, "Success. Updated the following files:\nM " + path))
        elif self.style == "plain":
            self.calls(("edit_file", {"path": path, "old": "';'", "new": "','"}, f"edited {path}"))
        elif self.rng.random() < 0.25:
            self.shell(f"sed -i 's/;/,/' {path}", "")
        else:
            self.calls(
                ("Edit", {"file_path": f"/app/{path}", "old_string": "';'", "new_string": "','"}, "File updated.")
            )

    def write(self, path: str) -> None:
        if self.style == "claude" and self.rng.random() < 0.5:
            self.shell(f"cat > {path} <<'EOF'\nimport pytest\nEOF", "")
        elif self.style == "codex":
            self.calls(("apply_patch", {"input": f"*** Add File: {path}\n+x = 1\n"}, "Success. Added " + path))
        else:
            self.calls(("Write", {"file_path": f"/app/{path}", "content": "x = 1\n"}, f"Wrote {path}"))

    def test(self, outcome: str) -> None:
        n = self.rng.randint(4, 40)
        out = {
            "pass": PYTEST_PASS.format(n=n, ms=self.rng.randint(10, 99)),
            "fail": PYTEST_FAIL.format(n=n, p=n - 1),
            "tdd": PYTEST_TDD_FAIL.format(p=n - 1),
            "traceback": PY_TRACEBACK.format(line=self.rng.randint(3, 90), value="3;5"),
            "import": IMPORT_ERROR,
            "cargo_error": CARGO_ERROR.format(line=self.rng.randint(3, 90)),
            "cargo_pass": CARGO_PASS.format(n=n),
        }[outcome]
        if self.style == "plain":
            self.calls(("run_tests", {}, out))
        elif outcome.startswith("cargo"):
            self.shell("cargo test", out)
        else:
            self.shell("python -m pytest -q", out)

    def todo(self) -> None:
        if self.style == "codex":
            self.calls(("update_plan", {"plan": [{"step": "fix parser", "status": "in_progress"}]}, "Plan updated"))
        else:
            self.calls(("TodoWrite", {"todos": [{"content": "fix parser", "status": "in_progress"}]}, "Todos updated"))


# -- scenario scripts ---------------------------------------------------------------------------------


def clean_fix(s: Session) -> None:
    s.todo()
    s.read("ISSUE.md")
    s.search("parse_pair")
    s.read("src/parser.py")
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Fixed parse_pair to split on ',' and the suite passes.")


def traceback_loop(s: Session) -> None:
    s.read("src/parser.py")
    for _ in range(s.rng.randint(3, 5)):
        s.test("traceback")
    s.read("src/parser.py")
    s.edit("src/parser.py")
    s.test("traceback")
    s.edit("src/parser.py")
    s.edit("tests/test_parser.py")
    s.test("pass")
    s.say("The parser now accepts both separators.")


def oom_training(s: Session) -> None:
    s.read("train.py")
    s.shell("python train.py --batch-size 256", CUDA_OOM)
    s.edit("train.py")
    s.shell("python train.py --batch-size 64", "epoch 1 loss 0.41\nepoch 2 loss 0.33\ndone")
    s.say("Training fits in memory with batch size 64.")


def explore_forever(s: Session) -> None:
    for i in range(s.rng.randint(6, 10)):
        if s.rng.random() < 0.5:
            s.read(f"src/mod{i}.py")
        else:
            s.search(f"symbol{i}")
    s.shell("git status", "On branch main\nnothing to commit, working tree clean")
    s.shell("git log --oneline -5", "a1b2c3 fix\nd4e5f6 init")
    s.say("I could not find where the value is produced; it is probably generated at build time.")


def rust_compile_loop(s: Session) -> None:
    s.read("src/lib.rs")
    for _ in range(s.rng.randint(2, 4)):
        s.shell("cargo build", CARGO_ERROR.format(line=s.rng.randint(3, 90)))
        s.edit("src/lib.rs")
    s.test("cargo_pass")
    s.say("It compiles and the tests pass.")


def service_refused(s: Session) -> None:
    for _ in range(s.rng.randint(2, 4)):
        s.shell("curl -s localhost:8000/health", CONN_REFUSED)
    s.shell("nohup python -m app.server > /tmp/server.log 2>&1 &", "")
    s.shell("sleep 2 && curl -s localhost:8000/health", '{"status": "ok"}')
    s.say("The service is up.")


def compacted(s: Session) -> None:
    s.user(COMPACTION)
    s.read("src/parser.py")
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Done after the context was summarised.")


def tdd(s: Session) -> None:
    s.write("tests/test_pairs.py")
    s.test("tdd")
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Added a failing test first, then made it pass.")


def tool_errors(s: Session) -> None:
    for _ in range(s.rng.randint(2, 3)):
        s.calls(("search_docs", {"query": "parse_pair"}, TOOL_ERROR))
    s.calls(("search_index", {"query": "parse_pair"}, JSON_ERROR))
    s.read("src/parser.py")
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Docs were missing, fixed from the source instead.")


def misc_failures(s: Session) -> None:
    s.shell("pytestt -q", NOT_FOUND)
    s.test("import")
    s.shell("pip install pyyaml", "Successfully installed PyYAML-6.0.2")
    s.shell("node build.js", NODE_ERROR)
    s.shell("go run ./cmd/tool", GO_PANIC)
    s.shell("python long_job.py", TIMEOUT)
    s.shell("tool", EXIT_2)
    s.test("fail")
    s.calls(("Read", {"file_path": "/app/a.py"}, "a = 1"), ("Read", {"file_path": "/app/b.py"}, "b = 2"))
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Fixed.")


def follow_up_task(s: Session) -> None:
    clean_fix(s)
    s.user("Thanks. Now also add a docstring to parse_pair and run the tests again.")
    s.read("src/parser.py")
    s.edit("src/parser.py")
    s.test("pass")
    s.say("Docstring added.")


SCENARIOS: list[tuple[str, Callable[[Session], None]]] = [
    ("clean_fix", clean_fix),
    ("traceback_loop", traceback_loop),
    ("oom_training", oom_training),
    ("explore_forever", explore_forever),
    ("rust_compile_loop", rust_compile_loop),
    ("service_refused", service_refused),
    ("compacted", compacted),
    ("tdd", tdd),
    ("tool_errors", tool_errors),
    ("misc_failures", misc_failures),
    ("follow_up_task", follow_up_task),
]
STYLES = ("claude", "codex", "plain")


def trajectories(seed: int = 0, per_scenario: int = 2) -> list[dict[str, Any]]:
    """Every scenario in every tool style, ``per_scenario`` random variants each."""
    out: list[dict[str, Any]] = []
    for name, script in SCENARIOS:
        for style in STYLES:
            for k in range(per_scenario):
                rng = random.Random(f"{seed}:{name}:{style}:{k}")
                session = Session(f"{name}-{style}-{k}", rng, style=style)
                script(session)
                out.append({"id": f"synthetic/{name}/{style}/{k}", "messages": session.messages})
    return out


def long_session(n_messages: int = 200, seed: int = 0, *, result_chars: int = 0) -> list[Msg]:
    """One long Claude-Code-style session of exactly ``n_messages`` messages ending on a tool
    result (the usual shape of an agent's request), scenarios back to back, with the assistant
    narrating about half of its tool calls. ``result_chars`` pads every tool result to at least
    that many characters (big file reads and logs)."""
    rng = random.Random(seed)
    session = Session("long", rng, style="claude")
    # No compaction: a compacted conversation is an override on every turn, the cheap case.
    scripts = [script for name, script in SCENARIOS if name != "compacted"]
    while len(session.messages) < n_messages + 40:
        rng.choice(scripts)(session)
        session.user("Next: keep going with the remaining items in ISSUE.md.")
    messages = session.messages[:n_messages]
    while messages[-1]["role"] != "tool":
        messages.pop()
    for msg in messages:
        if msg["role"] == "assistant" and msg.get("tool_calls") and rng.random() < 0.5:
            msg["content"] = "Let me check what the code does here before changing anything. " * 3
        if msg["role"] == "tool" and len(msg["content"]) < result_chars:
            msg["content"] += "\n" + "log line with some output 0123456789\n" * (result_chars // 38 + 1)
    # Pad back to n_messages with a few more read rounds if trimming shortened it.
    while len(messages) < n_messages - 1:
        i = len(messages)
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"pad{i}",
                        "type": "function",
                        "function": {"name": "Read", "arguments": json.dumps({"file_path": "/app/x.py"})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"pad{i}", "content": FILE_BODY})
    return messages
