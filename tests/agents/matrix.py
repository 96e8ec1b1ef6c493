"""The agent matrix harness: a scripted fake upstream, ``switchyard serve`` in a subprocess, and
one real agent run per test, with everything it did (disk, answer, decision records) to assert on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import launchers
import pytest
import yaml
from _waits import serving, stop

from switchyard.testing import FakeModel, FakeUpstream, serve_fake
from switchyard.testing.agent_loop import ToolLoop

AGENT_TIMEOUT_S = 150.0
ROUTES = ("chat", "anthropic", "responses", "staged", "planned", "learned")
"""Route names = the upstream format they reach; ``staged`` starts on chat and escalates to anthropic."""

TARGET_OF_ROUTE = {"chat": "vllm", "anthropic": "claude", "responses": "gpt"}
OOM = "RuntimeError: CUDA out of memory."


def free_port() -> int:
    """A port nothing listens on right now (bound, read and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def router_config(upstream_port: int) -> dict[str, Any]:
    """Three upstream formats on one fake server, a route per format and a staged route."""
    base = f"http://127.0.0.1:{upstream_port}"
    return {
        "llm_clients": {
            "vllm": {"format": "openai_chat", "base_url": f"{base}/v1"},
            "anthropic": {"format": "anthropic_messages", "base_url": base},
            "openai": {"format": "openai_responses", "base_url": f"{base}/v1"},
        },
        "targets": {
            # Like Nemotron Lightning on vLLM: a Chat upstream that returns `reasoning`.
            "vllm": {"client": "vllm", "model": "vllm-model", "context_window": 131072},
            "claude": {"client": "anthropic", "model": "claude-model", "context_window": 200000},
            "gpt": {"client": "openai", "model": "gpt-model", "context_window": 200000},
        },
        "routes": {
            # Hermes sizes its context from `model.context_length`; keep both equal (docs/agents.md).
            "chat": {"type": "passthrough", "target": "vllm", "context_window": 131072},
            "anthropic": {"type": "passthrough", "target": "claude"},
            "responses": {"type": "passthrough", "target": "gpt"},
            # No tool_semantics: the default profile knows every agent's shell tool here,
            # Qwen Code's run_shell_command included.
            "staged": {"type": "stage_router", "efficient": "vllm", "capable": "claude"},
            # Plan on the anthropic target, execute on the chat target (docs/plan-execute.md).
            "planned": {"type": "plan_execute", "efficient": "vllm", "capable": "claude"},
            # The learned trajectory router with the stage router's run rule, as in
            # examples/agent-routing.yaml (docs/trajectory-router.md).
            "learned": {
                "type": "trajectory",
                "efficient": "vllm",
                "capable": "claude",
                "persistent_errors": {"repeats": 2},
            },
        },
    }


class EgressTrap:
    """A fake HTTP(S) proxy every agent is pointed at (``HTTPS_PROXY`` etc.): any connection it
    receives is an agent trying to reach something other than 127.0.0.1 (telemetry, updates,
    model catalogues). It answers nothing useful and records the request line."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.attempts: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    first = conn.recv(512).split(b"\r\n", 1)[0].decode(errors="replace")
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                except OSError:
                    first = "(no request line)"
                self.attempts.append(first)

    def close(self) -> None:
        """Stops listening."""
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@dataclass(slots=True)
class Stack:
    """The fake upstream and the proxy serving the matrix routes."""

    upstream: FakeUpstream
    root_url: str
    log: Path
    trap: EgressTrap
    script: ToolLoop = field(default_factory=lambda: ToolLoop(path="/nonexistent", content="unset"))

    @property
    def base_url(self) -> str:
        """The proxy's OpenAI base URL."""
        return self.root_url + "/v1"

    def records(self) -> list[dict[str, Any]]:
        """Every decision record written so far."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@contextmanager
def serve_stack(tmp: Path) -> Iterator[Stack]:
    """Starts the fake upstream (thread) and ``switchyard serve`` (subprocess) on free ports."""
    holder: list[Stack] = []

    def brain(body: dict[str, Any], model: FakeModel) -> Any:
        return holder[0].script.turn(body, model)

    models = [
        FakeModel(name, brain=brain, reasoning=f"{name} thinks about the next step.")
        for name in ("vllm-model", "claude-model", "gpt-model")
    ]
    upstream = FakeUpstream(models)
    fake = serve_fake(upstream)
    trap = EgressTrap()
    config = tmp / "router.yaml"
    config.write_text(yaml.safe_dump(router_config(fake.port)))
    log = tmp / "decisions.jsonl"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(launchers.ROOT)}
    argv = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(port)]
    argv += ["--decision-log", str(log), "--log-level", "warning"]
    out = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        root = f"http://127.0.0.1:{port}"
        serving(root + "/health", proc, 30, "switchyard serve", log=tmp / "serve.log")
        holder.append(Stack(upstream, root, log, trap))
        yield holder[0]
    finally:
        stop(proc)
        out.close()
        fake.stop()
        trap.close()


@dataclass(slots=True)
class Outcome:
    """What one agent run left behind."""

    returncode: int
    stdout: str
    stderr: str
    file: Path
    records: list[dict[str, Any]]
    bodies: list[dict[str, Any]]
    egress: list[str]

    def explain(self) -> str:
        """Everything needed to see why a run failed (for assertion messages)."""
        decisions = [(r.get("route"), r.get("selected"), r.get("source"), r.get("error")) for r in self.records]
        return (
            f"rc={self.returncode}\nstdout: {self.stdout[-2500:]}\nstderr: {self.stderr[-2500:]}\nrecords: {decisions}"
        )


def run_agent(stack: Stack, agent: str, route: str, tmp: Path, api: str | None = None) -> Outcome:
    """Runs ``agent`` once on ``route`` through the proxy, with a fresh script and home."""
    home, cwd = tmp / "home", tmp / "work"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    cwd.mkdir(exist_ok=True)
    target = cwd / "proof.txt"
    content = f"switchyard-matrix {agent} {api or ''} {route} ok".replace("  ", " ")
    if route == "staged":
        content += f" {OOM}"  # the stage router reads it in the shell output and escalates
    stack.script = ToolLoop(path=str(target), content=content)
    seen_records = len(stack.records())
    seen_bodies = len(stack.upstream.received)
    seen_egress = len(stack.trap.attempts)
    prompt = f"Write {target.name}, show it with the shell, then report what it says."
    if agent == "claude-code":
        launch = launchers.claude_code(stack.root_url, route, prompt, home, cwd)
    elif agent == "codex":
        launch = launchers.codex(stack.base_url, route, prompt, home, cwd)
    elif agent == "qwen-code":
        launch = launchers.qwen_code(stack.base_url, route, prompt, home, cwd)
    elif agent == "hermes":
        launch = launchers.hermes(stack.base_url, route, prompt, home, cwd)
    elif agent == "anthropic-sdk-js":
        launch = launchers.node_driver(agent, stack.base_url, route, prompt, home, cwd, api)
    else:
        launch = launchers.python_driver(agent, stack.base_url, route, prompt, home, cwd, api)
    launch.write_files()
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        launch.env[var] = stack.trap.url
    try:
        done = subprocess.run(
            launch.argv,
            env=launch.env,
            cwd=launch.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT_S,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -9, str(exc.stdout or ""), f"timed out after {AGENT_TIMEOUT_S} s\n{exc.stderr or ''}"
    settle(stack, seen_records, seen_bodies)
    return Outcome(
        rc,
        out,
        err,
        target,
        stack.records()[seen_records:],
        [r.body for r in stack.upstream.received[seen_bodies:]],
        stack.trap.attempts[seen_egress:],
    )


def settle(stack: Stack, seen_records: int, seen_bodies: int, bound_s: float = 10.0) -> None:
    """Waits (bounded) until the decision log holds the record of every upstream call since the
    run began: the proxy writes a record once the answer's last byte is out, so an agent can
    exit before the record of its last answer is written."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        records = stack.records()[seen_records:]
        calls = sum(len(r.get("attempts") or ()) + len(r.get("router_attempts") or ()) for r in records)
        if calls >= len(stack.upstream.received) - seen_bodies:
            return
        time.sleep(0.01)


def require(agent: str) -> None:
    """Skips when ``agent`` is not installed, except under CI, where that is a failure."""
    if launchers.installed(agent):
        return
    message = f"{agent} is not installed in {launchers.PREFIX} (run `make agents`)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; under CI=true the agent matrix must run")
    pytest.skip(message)


def scratch() -> Path:
    """A short temp dir (agents print paths; short ones keep messages readable)."""
    return Path(tempfile.mkdtemp(prefix="sy-agent-"))
