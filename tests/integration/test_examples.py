"""Every example in ``examples/`` runs end to end, as examples/README.md tells a new user to run it.

``switchyard fake-upstream`` and ``switchyard serve -c examples/X.yaml --access-log`` run as real
subprocesses (the CLI a user types); each route of each example answers a request, the answer
comes from the simulated model the route chose, and the access log names the request. The one
difference from the README: servers listen on free ports, so the loopback ports 8000/9000 written
in the examples are pointed at the fake's port (by the examples' own ``${…_URL}`` variables, or
in a copy of the file where the port is written literally).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _waits import serving

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CLI = [sys.executable, "-m", "switchyard"]

# Requests that exercise something per example (default: one chat request per route).
SERVED = [
    "router.yaml",
    "escalation.yaml",
    "lightning.yaml",
    "llm-classifier.yaml",
    "decision-model.yaml",
    "plan-execute.yaml",
    "profiles.yaml",
    "reliability.yaml",
    "restricted.yaml",
    "stage-router.yaml",
    "coding-agent.yaml",
    "agent-routing.yaml",
    "translation.yaml",
    "verify.yaml",
    "compose.yaml",
    "eval/routellm.yaml",
    "eval/swebench.yaml",
    "probe/router.yaml",
]
# A suite file lists datasets and model pairs for `replay --suite`; tests/eval checks it.
NOT_CONFIGS = {"probe/minilm-features.yaml", "probe/smollm2-features.yaml", "eval/agent-suite.yaml"}

Expect = tuple[str, str]
"""``(x-switchyard-decision-source, x-switchyard-selected-model)`` a request must get."""


def _turn(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((EXAMPLES / "requests" / name).read_text())
    return body


def _chat(route: str, text: str) -> dict[str, Any]:
    return {"model": route, "messages": [{"role": "user", "content": text}]}


# The walkthrough's requests for examples whose routes decide in more than one way, with the
# decision examples/README.md shows for each (request body, extra headers, expected decision).
WALKTHROUGH: dict[str, list[tuple[dict[str, Any], dict[str, str], Expect]]] = {
    "coding-agent.yaml": [
        (_turn("repeating-errors.json"), {"x-switchyard-session-id": "run-1"}, ("persistent_errors", "capable")),
    ],
    "agent-routing.yaml": [
        (_chat("agent", "list the files"), {"x-switchyard-session-id": "t-1"}, ("trajectory", "efficient")),
        (_turn("repeating-errors.json"), {"x-switchyard-session-id": "t-2"}, ("persistent_errors", "capable")),
        # the session stays on the capable model once switched
        (_chat("agent", "list the files"), {"x-switchyard-session-id": "t-2"}, ("latched", "capable")),
    ],
    "compose.yaml": [
        (_chat("agent", "add a docstring to utils.py"), {}, ("cascade:2/llm_classifier", "efficient")),
        (_chat("agent", "debug the race condition in the scheduler"), {}, ("cascade:2/llm_classifier", "capable")),
        (_turn("stuck-agent.json"), {"x-switchyard-session-id": "demo-1"}, ("cascade:1/stage_router", "capable")),
        (
            _chat("agent", "debug the race condition in the scheduler"),
            {"x-switchyard-session-id": "demo-2", "x-claude-code-agent-id": "explore-1"},
            ("subagents/cascade:default", "efficient"),
        ),
        (_chat("reviewed", "hello"), {}, ("advisor:no_trigger", "efficient")),
        (_turn("finished-turn.json"), {"x-switchyard-session-id": "review-1"}, ("advisor:redo", "efficient")),
    ],
    "decision-model.yaml": [
        (_chat("agent", "debug the race condition in the scheduler"), {}, ("decision-model", "capable")),
        (_chat("agent", "fix a typo in the README"), {}, ("decision-model", "efficient")),
        (_chat("typed", "debug the race condition in the scheduler"), {}, ("decision-model", "capable")),
        (_chat("typed", "why is the sky blue"), {}, ("fail_open", "efficient")),
    ],
    "plan-execute.yaml": [
        (_chat("agent", "add a --verbose flag to the CLI"), {"x-switchyard-session-id": "pe-1"}, ("plan", "capable")),
        (_turn("tool-loop.json"), {"x-switchyard-session-id": "pe-1"}, ("execute", "efficient")),
    ],
    "profiles.yaml": [
        (
            _chat("agent", "add a docstring to utils.py"),
            {"x-switchyard-session-id": "p-1"},
            ("profile:efficient_first/fall_open", "efficient"),
        ),
        (
            _chat("agent", "debug the race condition in the scheduler"),
            {"x-switchyard-session-id": "p-2"},
            ("profile:capable_first/fall_open", "capable"),
        ),
        # The same hard task in the first session: its profile was chosen at its first turn.
        (
            _chat("agent", "debug the race condition in the scheduler"),
            {"x-switchyard-session-id": "p-1"},
            ("profile:efficient_first/fall_open", "efficient"),
        ),
    ],
    "restricted.yaml": [
        (_turn("stuck-agent.json"), {"x-switchyard-session-id": "r-1"}, ("override", "capable")),
        (
            _turn("stuck-agent.json"),
            {"x-switchyard-session-id": "r-2", "x-switchyard-require": "onprem"},
            ("override", "efficient"),
        ),
        (_chat("guarded", "summarise the release notes"), {}, ("passthrough", "capable")),
        (_chat("guarded", "why does sk-ant-api03-" + "x" * 40 + " fail?"), {}, ("passthrough", "efficient")),
        (_chat("guarded", "write to jane.doe@example.com about INC-004211"), {}, ("passthrough", "efficient")),
    ],
}  # a `features` block read by train-probe, not a router config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(port: int) -> dict[str, str]:
    v1 = f"http://127.0.0.1:{port}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(
        PYTHONPATH=str(ROOT),
        LIGHTNING_URL=v1,
        LIGHTNING_BASE_URL=v1,
        VLLM_URL=v1,
        DECIDER_URL=v1,
        TYPESAFE_BASE_URL=v1,
        TYPESAFE_API_KEY="fake",
        FRONTIER_URL=v1,
        FRONTIER_BASE_URL=v1,
        OPENAI_BASE_URL=v1,
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
        OPENAI_API_KEY="fake",
        ANTHROPIC_API_KEY="fake",
    )
    return env


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    return out or ""


class _Served:
    """A ``switchyard`` command serving on ``port``; ``log`` is its output once it stopped."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.log = ""


@contextmanager
def _serve(*args: str, fake: int | None = None) -> Iterator[_Served]:
    """``switchyard ARGS --port P`` in a subprocess (its env pointed at ``fake``, else at itself),
    once it answers ``/health``; stopped on leaving, its output kept."""
    served = _Served(_free_port())
    proc = subprocess.Popen(
        [*CLI, *args, "--port", str(served.port)],
        env=_env(served.port if fake is None else fake),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        serving(f"http://127.0.0.1:{served.port}/health", proc, 30, str(proc.args))
        yield served
    finally:
        served.log = _stop(proc)


@pytest.fixture(scope="module")
def fake() -> Iterator[int]:
    with _serve("fake-upstream", "--latency-scale", "0", "--quiet") as served:
        yield served.port


def _copy(name: str, port: int, tmp: Path) -> Path:
    """The example in a copy of examples/ where literal loopback ports point at the fake."""
    dest = tmp / "examples"
    if not dest.exists():
        shutil.copytree(EXAMPLES, dest, ignore=shutil.ignore_patterns("*.pt", "*.npz", "__pycache__"))
    path = dest / name
    text = re.sub(r"(127\.0\.0\.1|localhost):(8000|9000)/v1(?=[\s\"'},])", f"127.0.0.1:{port}/v1", path.read_text())
    path.write_text(text)
    return path


Request = tuple[str, dict[str, Any], dict[str, str], Expect | None]


def _requests(name: str, config: dict[str, Any]) -> list[Request]:
    """One chat request per route, plus a Messages and a Responses request for the first route,
    then the example's walkthrough requests."""
    out: list[Request] = []
    routes = list(config["routes"])
    for route in routes:
        out.append(("/v1/chat/completions", _chat(route, "hello there"), {}, None))
    first = routes[0]
    out.append(
        ("/v1/messages", {"model": first, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}, {}, None)
    )
    out.append(("/v1/responses", {"model": first, "input": "hi"}, {}, None))
    out.extend(("/v1/chat/completions", body, headers, expect) for body, headers, expect in WALKTHROUGH.get(name, []))
    return out


def test_every_example_is_listed() -> None:
    found = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.yaml")}
    assert found == set(SERVED) | NOT_CONFIGS, "add new examples to SERVED (and to examples/README.md)"
    readme = (EXAMPLES / "README.md").read_text()
    for name in [*SERVED, "dropin_anthropic.py"]:
        assert f"examples/{name}" in readme, f"examples/README.md does not walk through {name}"


@pytest.mark.parametrize("name", SERVED)
def test_example_serves_every_route(fake: int, tmp_path: Path, name: str) -> None:
    if name == "probe/router.yaml" and not (EXAMPLES / "probe" / "smollm2").exists():
        pytest.skip("the probe checkpoint is trained locally first (see examples/README.md)")
    path = _copy(name, fake, tmp_path)
    config = yaml.safe_load(path.read_text())
    with _serve("serve", "-c", str(path), "--access-log", fake=fake) as served:
        port = served.port
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert {m["id"] for m in models["data"]} >= set(config["routes"])
        for endpoint, body, headers, expect in _requests(name, config):
            resp = httpx.post(f"http://127.0.0.1:{port}{endpoint}", json=body, headers=headers, timeout=30)
            assert resp.status_code == 200, (endpoint, body["model"], resp.text)
            target = resp.headers["x-switchyard-selected-model"]
            if expect is not None:
                assert (resp.headers["x-switchyard-decision-source"], target) == expect, (body, headers)
            assert resp.headers["x-switchyard-route"] == body["model"]
            model = config["targets"][target].get("model") or "nemotron-3.5-lightning"  # preset targets
            # The simulated model answers "[its model id] ..." in every API's shape.
            assert f"[{model}]" in json.dumps(resp.json()), resp.text
    log = served.log
    for route in config["routes"]:
        assert re.search(
            rf"POST /v1/chat/completions route={re.escape(route)} status=200 model=\S+ overhead_ms=", log
        ), log
    assert "POST /v1/messages route=" in log and "POST /v1/responses route=" in log


def test_dropin_example_runs(fake: int) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "dropin_anthropic.py")],
        env=_env(fake),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "answer:" in proc.stdout and "tokens:" in proc.stdout


def test_restricted_example_refuses_what_no_target_may_serve(fake: int, tmp_path: Path) -> None:
    """A label no target carries: a 403 in the caller's shape, and no upstream call."""
    path = _copy("restricted.yaml", fake, tmp_path)
    with _serve("serve", "-c", str(path), fake=fake) as served:
        port = served.port
        body = {"model": "agent", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        headers = {"x-switchyard-require": "onprem, eu"}
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/messages", json=body, headers=headers, timeout=30)
        assert resp.status_code == 403, resp.text
        error = resp.json()
        assert error["type"] == "error" and error["error"]["type"] == "permission_error"
        assert "x-switchyard-require" in error["error"]["message"]
        assert "efficient, capable" in error["error"]["message"]


def test_verify_example_serves_claude_when_lightnings_tool_call_is_malformed(fake: int, tmp_path: Path) -> None:
    """The README's request for examples/verify.yaml, as JSON and as a stream, and in shadow mode."""
    path = _copy("verify.yaml", fake, tmp_path)
    with _serve("serve", "-c", str(path), fake=fake) as served:
        url = f"http://127.0.0.1:{served.port}/v1/chat/completions"
        body = _turn("sloppy-tool-call.json")
        resp = httpx.post(url, json=body, timeout=30)
        assert resp.status_code == 200 and resp.headers["x-switchyard-selected-model"] == "capable", resp.text
        [call] = resp.json()["choices"][0]["message"]["tool_calls"]
        assert "path" in json.loads(call["function"]["arguments"])
        streamed = httpx.post(url, json={**body, "stream": True}, timeout=30)
        assert streamed.headers["x-switchyard-selected-model"] == "capable"
        assert "path" in streamed.text and streamed.text.rstrip().endswith("data: [DONE]")
        shadow = httpx.post(url, json={**body, "model": "measured"}, timeout=30)
        [call] = shadow.json()["choices"][0]["message"]["tool_calls"]
        assert (
            shadow.headers["x-switchyard-selected-model"] == "efficient"
            and json.loads(call["function"]["arguments"]) == {}
        )
