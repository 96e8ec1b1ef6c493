"""Signal extraction from conversations that went through a wire codec into the IR."""

from __future__ import annotations

import pytest
from _convo import WIRE_FORMATS, Call, Step, Turn, bash, decode, tool

from switchyard.protocol.messages import Message, TextPart, ToolCallPart, ToolResultPart
from switchyard.routers.stage import NVIDIA_PROFILE, ToolKind, extract
from switchyard.routers.stage.signals import DEFAULT_PROFILE, classify_call
from switchyard.routers.stage.text import analyse_result, severity_of

TRACEBACK = 'Traceback (most recent call last):\n  File "/app/a.py", line {n}, in f\nValueError: bad value {n}'
SYS: Step = ("system", "You are a coding agent.")
TASK: Step = ("user", "Fix the parser.")


def signals(steps: list[Step], fmt: str = "openai_chat", **kw: object):  # type: ignore[no-untyped-def]
    return extract(decode(steps, fmt).messages, **kw)  # type: ignore[arg-type]


# -- the same conversation in every wire format -------------------------------------------------

AGENT_SESSION: list[Step] = [
    SYS,
    TASK,
    tool("Read", "def parse(x): ...", file_path="/app/parser.py"),
    Turn(
        [Call("Edit", {"file_path": "/app/parser.py"}, "File updated."), Call("Read", {"file_path": "/app/t.py"}, "x")]
    ),
    bash("python -m pytest -q", TRACEBACK.format(n=3)),
    bash("python -m pytest -q", "===== 4 passed in 0.12s ====="),
]


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
def test_signals_are_the_same_in_every_wire_format(fmt: str) -> None:
    sig = signals(AGENT_SESSION, fmt)
    assert sig.severity == 0.7 and sig.errors == ("traceback", "value_error")
    assert (sig.recent_writes, sig.recent_edits, sig.recent_reads) == (0, 0, 1)
    assert sig.tests_passed
    # Chat lays out 1 user + 4 assistant turns + 5 tool messages; batched formats count the same.
    assert sig.turn_depth == 10
    assert sig == signals(AGENT_SESSION, "openai_chat")


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
def test_no_tool_activity_gives_quiet_signals(fmt: str) -> None:
    sig = signals([SYS, TASK], fmt)
    assert sig.severity == 0 and not sig.tests_passed and not sig.compacted
    assert sig.turn_depth == 1 and sig.tool_calls == 0


# -- severity -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "severity", "name"),
    [
        ("all good", 0.0, None),
        ("RuntimeError: CUDA out of memory. Tried to allocate 2 GiB", 1.0, "oom"),
        ("curl: (7) Failed to connect: Connection refused", 0.7, "connection_refused"),
        (TRACEBACK.format(n=1), 0.7, "traceback"),
        ("ModuleNotFoundError: No module named 'yaml'", 0.7, "import_error"),
        ("bash: pytestt: command not found", 0.7, "command_not_found"),
        ("Command timed out after 120 seconds", 0.7, "timeout"),
        ("cat: x: No such file or directory", 0.7, "missing_file"),
        ("error[E0308]: mismatched types", 0.7, "compile_error"),
        ("TypeError: x is undefined\n    at render (/app/view.js:12:9)", 0.7, "runtime_exception"),
        ("TypeError: documented in the API reference", 0.0, None),
        ("panic: runtime error: index out of range\n\ngoroutine 1 [running]:", 0.7, "runtime_panic"),
        ("error: patch failed: src/lib.rs:4", 0.7, "patch_error"),
        ("Process exited with code 2", 0.3, "nonzero_exit"),
        ("Process exited with code 0\nOutput:\nok", 0.0, None),
        ("exit status: 1", 0.3, "nonzero_exit"),
        ("subprocess returned non-zero exit status 1", 0.3, "nonzero_exit"),
        # the forms real agents print (mini-SWE-agent's observation template, CompletedProcess, wrappers)
        ("<returncode>1</returncode>\n<output>\nhello\n</output>", 0.3, "nonzero_exit"),
        ("<returncode>0</returncode>\n<output>\nok\n</output>", 0.0, None),
        ("<returncode>127</returncode>\n<output>\n</output>", 0.3, "nonzero_exit"),
        ("CompletedProcess(args=['make'], returncode=2)", 0.3, "nonzero_exit"),
        ("returncode: 3\nstdout: ''", 0.3, "nonzero_exit"),
        ("returncode: 0\nstdout: 'ok'", 0.0, None),
        ("Exit status 2", 0.3, "nonzero_exit"),
        ("exit code 2", 0.3, "nonzero_exit"),
        ("    if proc.returncode == 2:\n        retry()", 0.0, None),
    ],
)
def test_error_table(output: str, severity: float, name: str | None) -> None:
    level, names = severity_of(output.lower())
    assert level == severity
    assert (name in names) if name else not names


def test_default_profile_reads_tool_reported_errors_and_failing_tests() -> None:
    for text, name in [
        ("Error: flight HAT030 not available on date 2024-05-13", "tool_error"),
        ('{"error": "index not built"}', "tool_error"),
        ("FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 3 passed in 0.2s", "failing_tests"),
    ]:
        assert analyse_result(text, True, True).names == (name,)
        assert analyse_result(text, True, True).level == 0.3
        assert analyse_result(text).level == 0.0, "compat: nvidia does not count it"
    assert analyse_result('{"error": null, "data": 1}', True, True).level == 0.0
    assert analyse_result("5 passed, 0 failed", True, True).level == 0.0


def test_severity_is_the_worst_of_the_last_three_results() -> None:
    steps: list[Step] = [TASK, bash("python a.py", TRACEBACK.format(n=1))]
    for k in range(3):
        steps.append(bash(f"python b{k}.py", "fine"))
        assert signals(steps).severity == (0.7 if k < 2 else 0.0), k
    assert signals(steps, window=4).severity == 0.7


def test_empty_results_do_not_push_errors_out_of_the_window() -> None:
    steps: list[Step] = [TASK, bash("python a.py", TRACEBACK.format(n=1))]
    steps += [bash("sed -i s/a/b/ x.py", "") for _ in range(3)]
    assert signals(steps).severity == 0.7


def test_repeated_failure_ignores_line_numbers_and_paths() -> None:
    once = [TASK, bash("pytest", TRACEBACK.format(n=10)), bash("pytest", "ok")]
    assert not signals(once).repeated_failure
    twice = [*once, bash("pytest", TRACEBACK.format(n=99))]
    assert signals(twice).repeated_failure
    different = [*once, bash("pytest", "Traceback (most recent call last):\nKeyError: 'x'")]
    assert not signals(different).repeated_failure
    out_of_window = [*once, bash("ls", "a"), bash("ls", "b"), bash("pytest", TRACEBACK.format(n=5))]
    assert not signals(out_of_window).repeated_failure
    soft = [TASK, bash("make", "exit code 2"), bash("make", "exit code 2")]
    assert not signals(soft).repeated_failure


# -- tests passed ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "passed"),
    [
        ("===== 5 passed in 0.12s =====", True),
        ("running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored", True),
        ("ok  github.com/x/y\t0.01s (5 passed, 0 errors)", True),
        ("✓ all checks passed", True),
        ("2 failed, 5 passed in 0.56s", False),
        ("test result: FAILED. 2 passed; 1 failed", False),
        ("5 passed\nfatal: not a git repository", False),
        ("compiled fine", False),
    ],
)
def test_test_run_outcomes(output: str, passed: bool) -> None:
    sig = signals([TASK, tool("Edit", "File updated."), bash("pytest", output)])
    assert sig.tests_passed is passed


def test_a_pass_only_counts_after_the_latest_failure() -> None:
    after = [TASK, bash("pytest", TRACEBACK.format(n=1)), bash("pytest", "5 passed in 0.1s")]
    assert signals(after).tests_passed
    before = [TASK, bash("pytest", "5 passed in 0.1s"), bash("pytest", TRACEBACK.format(n=1)), tool("Edit")]
    assert not signals(before).tests_passed


# -- compaction, depth, window -------------------------------------------------------------------------


def test_compaction_marker_in_user_text() -> None:
    summary = "This session is being continued from a previous conversation that ran out of context."
    assert signals([SYS, ("user", summary), bash("ls", "a")]).compacted
    assert not signals([SYS, TASK, bash("cat notes.txt", summary)]).compacted, "tool output is not a marker"
    quoted: list[Step] = [SYS, TASK, ("assistant", "Note: THIS SESSION IS BEING CONTINUED later."), ("user", "ok")]
    assert not signals(quoted).compacted
    assert extract(decode(quoted).messages, profile=NVIDIA_PROFILE).compacted, "NVIDIA also reads assistant text"
    assert not signals([("system", summary), TASK]).compacted, "instructions are not scanned"


def test_turn_depth_counts_like_chat_completions() -> None:
    batched = [
        Message.of("system", "sys"),
        Message.of("user", "task"),
        Message(role="assistant", content=[ToolCallPart(id="a", name="Read"), ToolCallPart(id="b", name="Read")]),
        Message(
            role="user",
            content=[
                ToolResultPart(call_id="a", content=[TextPart(text="x")]),
                ToolResultPart(call_id="b", content=[TextPart(text="y")]),
                TextPart(text="also, keep the API"),
            ],
        ),
    ]
    # Chat would send: user, assistant, tool, tool, user.
    assert extract(batched).turn_depth == 5
    assert extract(batched, profile=NVIDIA_PROFILE).turn_depth == 3, "NVIDIA counts raw messages"
    assert extract(batched).tool_results == 2 and extract(batched).tool_calls == 2


def test_activity_window_counts_the_last_tool_calls() -> None:
    steps: list[Step] = [TASK] + [tool("Write", path=f"f{i}") for i in range(5)] + [tool("Edit"), tool("Read")]
    sig = signals(steps)
    assert (sig.recent_writes, sig.recent_edits, sig.recent_reads) == (1, 1, 1)
    wide = signals(steps, window=6)
    assert (wide.recent_writes, wide.recent_edits, wide.recent_reads) == (4, 1, 1)


def test_error_flag_of_a_tool_result_is_a_hard_error() -> None:
    messages = [
        Message.of("user", "task"),
        Message(role="assistant", content=[ToolCallPart(id="a", name="run")]),
        Message(role="tool", content=[ToolResultPart(call_id="a", content=[TextPart(text="boom")], is_error=True)]),
    ]
    sig = extract(messages)
    assert sig.severity == 0.7 and "tool_error_flag" in sig.errors


# -- tool kinds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("ls -la", ToolKind.READ),
        ("cat src/a.py", ToolKind.READ),
        ("rg parse_pair", ToolKind.READ),
        ("sed -n 1,5p x", ToolKind.READ),
        ("cd /app && ls", ToolKind.READ),
        ("FOO=1 env -i /bin/ls x", ToolKind.READ),
        ("git status", ToolKind.READ),
        ("git branch", ToolKind.READ),
        ("command -v python", ToolKind.READ),
        ("sed -i 's/a/b/' x", ToolKind.EDIT),
        ("git apply fix.diff", ToolKind.EDIT),
        ("perl -pi -e s/a/b/ x", ToolKind.EDIT),
        ("mv a b", ToolKind.EDIT),
        ("black .", ToolKind.EDIT),
        ("uv run ruff format src", ToolKind.EDIT),
        ("cargo fmt", ToolKind.EDIT),
        ("echo hi > f", ToolKind.WRITE),
        ("cat > f <<'EOF'\nx\nEOF", ToolKind.WRITE),
        ("mkdir -p build", ToolKind.WRITE),
        ("python3 - <<'PY'\nopen('a','w').write('x')\nPY", ToolKind.WRITE),
        ("node -e \"fs.writeFileSync('a','b')\"", ToolKind.WRITE),
        ("python x.py", ToolKind.OTHER),
        ("pytest -q", ToolKind.OTHER),
        ("cargo test", ToolKind.OTHER),
        ("black --check .", ToolKind.OTHER),
        ("git commit -m 'x; y'", ToolKind.OTHER),
        ("grep '.write(' src", ToolKind.READ),
    ],
)
def test_shell_commands(command: str, kind: ToolKind) -> None:
    call = ToolCallPart(id="c", name="Bash", arguments=f'{{"command": {json_str(command)}}}')
    assert classify_call(call) is kind


def json_str(text: str) -> str:
    import json

    return json.dumps(text)


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("Edit", "{}", ToolKind.EDIT),
        ("apply_patch", '{"input": "*** Begin Patch"}', ToolKind.EDIT),
        ("Write", "{}", ToolKind.WRITE),
        ("read_file", "{}", ToolKind.READ),
        ("TodoWrite", "{}", ToolKind.PLAN),
        ("update_plan", "{}", ToolKind.PLAN),
        ("exec_command", '{"cmd": "sed -i s/a/b/ x"}', ToolKind.EDIT),
        ("shell", '{"command": ["bash", "-lc", "cat > x <<eof"]}', ToolKind.WRITE),
        ("local_shell_call", '{"command": ["ls"]}', ToolKind.READ),
        ("bash", '{"input": "ls"}', ToolKind.READ),
        ("bash", "{}", ToolKind.OTHER),
        ("bash", "not json", ToolKind.OTHER),
        ("WebFetch", "{}", ToolKind.OTHER),
    ],
)
def test_tool_names(name: str, arguments: str, kind: ToolKind) -> None:
    assert classify_call(ToolCallPart(id="c", name=name, arguments=arguments)) is kind


def test_search_tools_and_custom_semantics() -> None:
    grep = ToolCallPart(id="c", name="Grep", arguments="{}")
    assert classify_call(grep) is ToolKind.READ
    assert classify_call(grep, search_tools=NVIDIA_PROFILE.search_tools) is ToolKind.OTHER
    semantics = {"get_user_details": ToolKind.READ, "book_reservation": ToolKind.WRITE, "read": ToolKind.OTHER}
    assert classify_call(ToolCallPart(id="c", name="Get_User_Details"), semantics) is ToolKind.READ
    assert classify_call(ToolCallPart(id="c", name="book_reservation"), semantics) is ToolKind.WRITE
    assert classify_call(ToolCallPart(id="c", name="Read"), semantics) is ToolKind.OTHER, "user table wins"
    run = {"run": ToolKind.SHELL}
    assert classify_call(ToolCallPart(id="c", name="run", arguments='{"command": "ls"}'), run) is ToolKind.READ


def test_qwen_code_tools_are_classified_in_the_default_profile_only() -> None:
    # Qwen Code names its shell and search tools run_shell_command and grep_search (recorded in
    # tests/fixtures/agents/qwen-code-chat-1.json); NVIDIA's table leaves them unclassified.
    failing = ToolCallPart(id="c", name="run_shell_command", arguments='{"command": "pytest -q"}')
    reading = ToolCallPart(id="c", name="run_shell_command", arguments='{"command": "cat notes.txt"}')
    grep = ToolCallPart(id="c", name="grep_search", arguments='{"pattern": "def main"}')
    assert classify_call(failing) is classify_call(ToolCallPart(id="c", name="bash", arguments=failing.arguments))
    assert classify_call(reading) is ToolKind.READ and classify_call(grep) is ToolKind.READ
    for call in (failing, reading, grep):
        assert classify_call(call, search_tools=NVIDIA_PROFILE.search_tools) is ToolKind.OTHER


def test_default_profile_is_the_default() -> None:
    assert extract([]) == extract([], profile=DEFAULT_PROFILE)


# -- text-protocol agents (mini-SWE-agent): observations arrive as user messages ----------------

MINI_SWE_SYSTEM: Step = ("system", "You are a helpful assistant that can interact with a computer shell.")


def mini_swe(*observations: str) -> list[Step]:
    """A mini-SWE-agent conversation: the model writes one ```bash block per reply and the agent
    sends the output back as a user message in its observation template."""
    steps: list[Step] = [MINI_SWE_SYSTEM, ("user", "<pr_description>Fix the parser.</pr_description>")]
    for i, out in enumerate(observations):
        steps.append(("assistant", f"THOUGHT: step {i}\n\n```bash\npython -m pytest -q\n```"))
        steps.append(("user", out))
    return steps


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
def test_mini_swe_agent_observations_count_as_tool_results(fmt: str) -> None:
    failing = "<returncode>2</returncode>\n<output>\nERROR: file or directory not found: tests/x.py\n</output>"
    ok = "<returncode>0</returncode>\n<output>\n4 passed in 0.12s\n</output>"
    bad = signals(mini_swe(ok, failing), fmt)
    assert bad.severity >= 0.3 and "nonzero_exit" in bad.errors
    good = signals(mini_swe(failing, ok), fmt, window=1)
    assert good.severity == 0.0
    # an ordinary user message is not an observation
    plain = signals([MINI_SWE_SYSTEM, ("user", "exit code 2 is what I get, please fix")], fmt)
    assert plain.severity == 0.0
