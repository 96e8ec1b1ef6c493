"""A scripted model that drives a real coding agent through a three-turn tool loop.

Used by the agent matrix (``tests/agents``): the real agent binaries (Claude Code, Codex, Qwen
Code, Hermes Agent, the Python frameworks) talk to ``switchyard serve``, which talks to a
:class:`~switchyard.testing.FakeUpstream` whose models run :meth:`ToolLoop.brain`. Because the
fake upstream speaks Chat Completions, Anthropic Messages and Responses (JSON and SSE), the same
script drives an agent on any route. The turns are:

1. call the agent's own *write* tool (``Write``, ``write_file``, ...) to create :attr:`ToolLoop.path`
   with :attr:`ToolLoop.content` (agents without one, like Codex, get a shell ``printf``);
2. call the agent's *shell* tool (``Bash``, ``terminal``, ``exec_command``, ...) to ``cat`` it;
3. answer in text: :attr:`ToolLoop.done` plus what the shell printed, or :attr:`ToolLoop.failed`
   when the shell output does not contain the content (so the agent's final answer proves that
   the tool result travelled back through the router intact).

The tools are recognised by name, their argument names are read from each tool's JSON schema, so
the script follows what the agent actually offers. Frameworks that end a run with a tool of their
own (smolagents' ``final_answer``) get the answer as that tool call.
"""

from __future__ import annotations

import shlex
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.testing.fake_common import Brain, FakeModel, Turn, content_text

WRITE_TOOLS = ("Write", "write_file", "create_file")
"""Write tools, in order of preference (Claude Code, Qwen Code / Hermes / drivers, others)."""

SHELL_TOOLS = ("Bash", "run_shell_command", "terminal", "exec_command", "shell", "bash", "run_shell")
"""Shell tools (Claude Code, Qwen Code, Hermes, Codex, drivers)."""

FINISH_TOOLS = ("final_answer",)
"""Tools a framework expects to be called with the final answer (smolagents)."""

_PATH_KEYS = ("file_path", "path", "absolute_path", "filename")
_CONTENT_KEYS = ("content", "contents", "text")
_COMMAND_KEYS = ("command", "cmd", "script")
_OBSERVATION = "Observation:"


def _results(body: dict[str, Any]) -> list[str]:
    """Tool results so far: ``tool`` messages, or (smolagents, which keeps tool calls and results
    as text) user messages that start with ``Observation:``."""
    out: list[str] = []
    for msg in body.get("messages") or []:
        text = content_text(msg.get("content"))
        if msg.get("role") == "tool":
            out.append(text)
        elif msg.get("role") == "user" and text.startswith(_OBSERVATION):
            out.append(text.removeprefix(_OBSERVATION))
    return out


def _schemas(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Offered function tools: name → JSON schema of the arguments."""
    out: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        name = fn.get("name")
        if isinstance(name, str):
            params = fn.get("parameters")
            out[name] = params if isinstance(params, dict) else {}
    return out


def _key(schema: dict[str, Any], candidates: tuple[str, ...]) -> str:
    props = schema.get("properties") or {}
    return next((k for k in candidates if k in props), candidates[0])


def _pick(offered: dict[str, dict[str, Any]], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in offered), None)


@dataclass(slots=True)
class ToolLoop:
    """The script of one agent run.

    Attributes:
        path: Absolute path of the file the agent is asked to write.
        content: What the file must contain (one line; make it unique per test).
        done: Prefix of the final answer when the shell output showed the content.
        failed: Prefix of the final answer when it did not.
    """

    path: str
    content: str
    done: str = "ALL DONE."
    failed: str = "LOOP BROKEN."

    def brain(self) -> Brain:
        """The brain to give every :class:`~switchyard.testing.FakeModel` of the upstream."""

        def brain(body: dict[str, Any], model: FakeModel) -> Turn:
            return self.turn(body, model)

        return brain

    def turn(self, body: dict[str, Any], model: FakeModel) -> Turn:
        """Decides the next turn from a Chat-shaped view of the request."""
        offered = _schemas(body)
        shell = _pick(offered, SHELL_TOOLS)
        results = _results(body)
        if shell is None and _pick(offered, WRITE_TOOLS) is None:
            # A side call (title, summary, classifier) or a client without tools: plain text.
            return Turn(text=f"[{model.name}] switchyard tool loop", reasoning=model.reasoning)
        if not results:
            return Turn(tool_calls=[self._write(offered, shell)], reasoning=model.reasoning)
        if len(results) == 1:
            return Turn(tool_calls=[self._read(offered, shell)], reasoning=model.reasoning)
        shown = results[-1]
        ok = self.content in shown
        answer = f"{self.done if ok else self.failed} {model.name} read: {shown.strip()[:400]}"
        finish = _pick(offered, FINISH_TOOLS)
        if finish is not None:
            return Turn(tool_calls=[(finish, {_key(offered[finish], ("answer",)): answer})], reasoning=model.reasoning)
        return Turn(text=answer, reasoning=model.reasoning)

    def _shell_call(self, offered: dict[str, dict[str, Any]], shell: str, command: str) -> tuple[str, dict[str, Any]]:
        schema = offered[shell]
        key = _key(schema, _COMMAND_KEYS)
        kind = ((schema.get("properties") or {}).get(key) or {}).get("type")
        args: dict[str, Any] = {key: ["bash", "-lc", command] if kind == "array" else command}
        return shell, args

    def _write(self, offered: dict[str, dict[str, Any]], shell: str | None) -> tuple[str, dict[str, Any]]:
        writer = _pick(offered, WRITE_TOOLS)
        if writer is None and shell is not None:
            command = f"printf '%s\\n' {shlex.quote(self.content)} > {shlex.quote(self.path)}"
            return self._shell_call(offered, shell, command)
        assert writer is not None
        schema = offered[writer]
        return writer, {_key(schema, _PATH_KEYS): self.path, _key(schema, _CONTENT_KEYS): self.content + "\n"}

    def _read(self, offered: dict[str, dict[str, Any]], shell: str | None) -> tuple[str, dict[str, Any]]:
        if shell is None:
            reader = _pick(offered, ("Read", "read_file"))
            name = reader or next(iter(offered))
            return name, {_key(offered[name], _PATH_KEYS): self.path}
        return self._shell_call(offered, shell, f"cat {shlex.quote(self.path)}")
