"""The demo's simulated world: a small repository, the agent's tools, and model "brains".

Both simulated models follow the same competent script (read → test → edit → test → answer);
they differ in voice, price and speed, which is what routing trades between.
"""

from __future__ import annotations

from typing import Any

import orjson

from switchyard.testing.fake_upstream import FakeModel, Turn, last_user_text
from switchyard.testing.judges import verdict_kind

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace text in a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
                "required": ["path", "old", "new"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

TASKS = [
    "The test for calc.add fails. Find the bug in calc.py and fix it.",
    "Thanks. Now give calc.add a one-line docstring.",
]

STAGE_TASKS = [
    "The parser tests crash. Make parse_pair in parser.py accept '3,5' and get the suite green.",
    "Thanks. Now give calc.add a one-line docstring.",
]
"""The stage-router session: the efficient model keeps re-running a crashing suite until the
router escalates; the frontier model fixes the bug and the router hands the session back."""

PARSER_BUG = "def parse_pair(text):\n    a, b = text.split(';')\n    return int(a), int(b)\n"
PARSER_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "test_parser.py", line 4, in test_parse_pair\n'
    "    assert parse_pair('3,5') == (3, 5)\n"
    '  File "parser.py", line 2, in parse_pair\n'
    "    a, b = text.split(';')\n"
    "ValueError: not enough values to unpack (expected 2, got 1)\n"
    "1 failed"
)


class Repo:
    """The files and test runner the demo agent's tools act on."""

    def __init__(self, *, parser: bool = False) -> None:
        self.files = {"calc.py": "def add(a, b):\n    return a - b\n"}
        if parser:
            self.files["parser.py"] = PARSER_BUG
            self.files["test_parser.py"] = "def test_parse_pair():\n    assert parse_pair('3,5') == (3, 5)\n"

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Runs one tool call and returns its output."""
        if name == "read_file":
            return self.files.get(str(args.get("path")), "error: no such file")
        if name == "edit_file":
            path, old, new = str(args.get("path")), str(args.get("old")), str(args.get("new"))
            text = self.files.get(path, "")
            if old not in text:
                return f"error: {old!r} not found in {path}"
            self.files[path] = text.replace(old, new, 1)
            return f"edited {path}"
        if name == "run_tests":
            if "split(';')" in self.files.get("parser.py", ""):
                return PARSER_TRACEBACK
            if "parser.py" in self.files:
                return f"{2 + self.files['test_parser.py'].count('def test')} passed in 0.02s"
            if "a - b" in self.files["calc.py"]:
                return "FAILED test_add: assert add(2, 2) == 4 (got 0)\n1 failed"
            return "1 passed"
        return f"error: unknown tool {name}"


def _history(body: dict[str, Any]) -> tuple[list[str], str, str]:
    """(tool names called in the current task, last tool output, current task text)."""
    messages = body.get("messages") or []
    # The router's handoff notes arrive as user messages too; they are not a new task.
    start = max(
        (
            i
            for i, m in enumerate(messages)
            if m.get("role") == "user" and not str(m.get("content") or "").startswith("[router]")
        ),
        default=0,
    )
    names: list[str] = []
    last_output = ""
    for msg in messages[start:]:
        for call in msg.get("tool_calls") or []:
            names.append(str((call.get("function") or {}).get("name")))
        if msg.get("role") == "tool":
            content = msg.get("content")
            last_output = content if isinstance(content, str) else ""
    task = messages[start].get("content") if messages else ""
    return names, last_output, str(task or "")


def agent_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """A deterministic coding agent: enough judgement to finish both demo tasks."""
    verbose = "frontier" in model.name
    names, output, task = _history(body)
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "user" and str(last.get("content") or "").startswith("[router] A reviewer"):
        # The advisor sent the turn back with a plan; this agent's only plan is to run the tests.
        return Turn(
            text="" if not verbose else "Running the suite as the reviewer asked.", tool_calls=[("run_tests", {})]
        )
    if "parse_pair" in task:
        return _parser_brain(names, output, verbose)

    def say(short: str, long: str) -> str:
        return long if verbose else short

    if "docstring" in task:
        if not names:
            return Turn(
                text=say("", "Let me look at the function first."), tool_calls=[("read_file", {"path": "calc.py"})]
            )
        if names[-1] == "read_file":
            return Turn(
                tool_calls=[
                    (
                        "edit_file",
                        {
                            "path": "calc.py",
                            "old": "def add(a, b):\n",
                            "new": 'def add(a, b):\n    """Return a + b."""\n',
                        },
                    )
                ]
            )
        return Turn(
            text=say(
                "Added the docstring.",
                "I added a one-line docstring to calc.add describing that it returns the sum of "
                "its two arguments. No behaviour changed, so the tests still pass.",
            )
        )
    if not names:
        return Turn(
            text=say("", "I'll start by reading calc.py to see how add is implemented."),
            tool_calls=[("read_file", {"path": "calc.py"})],
        )
    if names[-1] == "read_file":
        return Turn(tool_calls=[("run_tests", {})])
    if names[-1] == "run_tests" and "FAILED" in output:
        return Turn(
            text=say("", "The test expects 4 but add subtracts. I'll fix the operator."),
            tool_calls=[("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})],
        )
    if names[-1] == "edit_file":
        return Turn(tool_calls=[("run_tests", {})])
    return Turn(
        text=say(
            "Fixed: add used '-' instead of '+'. Tests pass.",
            "The bug was in calc.add, which returned a - b instead of a + b. I changed the "
            "operator and re-ran the suite: the failing test now passes and nothing else broke.",
        )
    )


def _parser_brain(names: list[str], output: str, frontier: bool) -> Turn:
    """The stage-router task: the efficient model retries the crashing suite ("maybe it is
    flaky"); the frontier model reads the traceback, fixes the split, adds a case, re-runs."""
    if not names:
        return Turn(tool_calls=[("read_file", {"path": "parser.py"})])
    if names[-1] == "read_file":
        return Turn(tool_calls=[("run_tests", {})])
    if " passed" in output:
        return Turn(text="Fixed parse_pair: it splits on ',' now, and the suite passes.")
    if not frontier:
        return Turn(tool_calls=[("run_tests", {})])
    if "Traceback" in output:
        fix = {"path": "parser.py", "old": "split(';')", "new": "split(',')"}
        return Turn(text="parse_pair splits on ';' but the input uses ','.", tool_calls=[("edit_file", fix)])
    if names[-1] == "edit_file" and names.count("edit_file") == 1:
        case = {
            "path": "test_parser.py",
            "old": "def test_parse_pair():",
            "new": "def test_spaces():\n    assert parse_pair('3, 5') == (3, 5)\n\n\ndef test_parse_pair():",
        }
        return Turn(text="Adding a regression test with spaces.", tool_calls=[("edit_file", case)])
    return Turn(tool_calls=[("run_tests", {})])


def models() -> list[FakeModel]:
    """The two simulated models, with the demo's latencies."""
    return [
        FakeModel("nemotron-lightning-sim", brain=agent_brain, first_byte_s=0.015, per_chunk_s=0.001),
        FakeModel("frontier-sim", brain=agent_brain, first_byte_s=0.08, per_chunk_s=0.004),
    ]


def parse_args(arguments: str) -> dict[str, Any]:
    """Tool-call arguments as a dict (``{}`` when unparsable)."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _current_request(view: str) -> str:
    """The person's current request in a classifier view: the latest user message, else the task."""
    return view.split("## Latest user message")[-1]


def _suite_is_red(view: str) -> bool:
    """Whether the last test run visible in an escalation transcript failed."""
    failed, passed = view.rfind("FAILED"), view.rfind("passed")
    return failed > passed


def judge_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """The demo's simulated judge (a stand-in for a real judge model and its packaged rubric).

    * Capability forecasts: debugging is uncertain for the efficient model (p_solve 0.45), a
      docstring is routine (0.92).
    * Escalation reviews: a toy rule — escalate while the test suite is red.
    """
    view = last_user_text(body)
    kind = verdict_kind(body)
    if kind == "capability":
        if "docstring" in _current_request(view):
            verdict: dict[str, Any] = {
                "crux": "add one line of documentation",
                "primary_rule": "SUP-1",
                "capability_boundary": "supported",
                "p_solve": 0.92,
            }
        else:
            verdict = {
                "crux": "locate the fault from a failing test",
                "primary_rule": "UNC-1",
                "capability_boundary": "uncertain",
                "p_solve": 0.45,
            }
    elif kind == "hand_back":
        verdict = {"reason": "demo keeps the capable model", "hand_back": False}
    else:
        red = _suite_is_red(view)
        verdict = {"reason": "the suite is red" if red else "progressing", "escalate": red}
    return Turn(text=orjson.dumps(verdict).decode())


def advisor_brain(body: dict[str, Any], model: FakeModel) -> Turn:
    """The demo's simulated advisor: REDO when code was edited after the last passing test run
    (a claimed finish nobody verified), else APPROVE."""
    view = last_user_text(body)
    work = view.split("=== The executor's latest turn")[0]
    edited = work.rfind("tool_call edit_file")
    passed = work.rfind(" passed")
    if edited > passed:
        return Turn(text="REDO: the code changed after the last test run. Run the test suite and report the result.")
    return Turn(text="APPROVE")


def advisor_model() -> FakeModel:
    """The simulated advisor, served next to the frontier model (it is the frontier model's job)."""
    return FakeModel("advisor-sim", brain=advisor_brain, first_byte_s=0.05)


def judge_model() -> FakeModel:
    """The simulated judge, served next to the efficient model (a small, fast model)."""
    return FakeModel("judge-sim", brain=judge_brain, first_byte_s=0.01)
