"""Records the requests real coding agents send when they delegate to a sub-agent.

A scripted fake upstream (stdlib HTTP server on 127.0.0.1) speaks Anthropic Messages (for
Claude Code) and OpenAI Responses (for Codex). Its script makes the parent agent call its
delegation tool (Claude Code's ``Task``/``Agent`` tool, Codex's ``spawn_agent``), answers the
sub-agent's own calls with a short text, then lets the parent finish. Every request that reaches
it is written, headers and body, to a JSONL file with secrets removed; the fixtures under
``tests/fixtures/subagents/`` were made this way.

The agents are installed outside the repository and run with dummy keys, telemetry off and a
throw-away HOME::

    npm install --prefix /tmp/h5-agents @anthropic-ai/claude-code @openai/codex
    python benchmarks/record_subagent_traffic.py claude --agents /tmp/h5-agents --out claude.jsonl
    python benchmarks/record_subagent_traffic.py codex --agents /tmp/h5-agents --out codex.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SECRET_HEADERS = (
    "x-codex-installation-id",
    "authorization",
    "x-api-key",
    "cookie",
    "chatgpt-account-id",
    "openai-organization",
    "openai-project",
)
SUBAGENT_PROMPT = "List the files in the current directory and report how many there are."
SUBAGENT_ANSWER = "There are 2 files."
PARENT_ANSWER = "The sub-agent reported 2 files."


def _redact(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for key, value in headers.items():
        low = key.lower()
        if low in SECRET_HEADERS:
            value = "<redacted>"
        out[low] = value
    return out


_INSTALL_IDS = re.compile(r'(\\?"(?:device_id|installation_id)\\?"\\?:\\?")[0-9a-fA-F-]+')


def _scrub(line: str) -> str:
    """Replaces per-machine identifiers (Claude Code's device id, Codex's installation id)."""
    return _INSTALL_IDS.sub(lambda m: m.group(1) + "redacted", line)


def _texts(value: Any) -> str:
    """Every string under ``value`` joined (to look for markers in any request shape)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_texts(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_texts(v) for v in value)
    return ""


class Recorder:
    """Holds the recorded exchanges and decides each scripted answer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.count = 0
        self.delegated = False
        path.write_text("")

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            entry["seq"] = self.count
            with self.path.open("a") as fh:
                fh.write(_scrub(json.dumps(entry)) + "\n")


# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_tool(body: dict[str, Any]) -> str | None:
    for tool in body.get("tools") or []:
        if tool.get("name") in ("Task", "Agent"):
            return str(tool["name"])
    return None


def anthropic_plan(body: dict[str, Any], rec: Recorder) -> tuple[str, Any]:
    """``("tool", (name, input))`` or ``("text", str)`` for one Messages request."""
    messages = body.get("messages") or []
    text = _texts(messages)
    has_result = any(
        isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
        for m in messages
    )
    tool = _anthropic_tool(body)
    if SUBAGENT_PROMPT in text and "Delegate" not in text:
        return "text", SUBAGENT_ANSWER
    if tool and "Delegate" in text and not has_result:
        rec.delegated = True
        return "tool", (
            tool,
            {"description": "Count files", "prompt": SUBAGENT_PROMPT, "subagent_type": "general-purpose"},
        )
    if has_result:
        return "text", PARENT_ANSWER
    return "text", "OK"


def anthropic_sse(model: str, plan: tuple[str, Any]) -> bytes:
    mid = "msg_" + uuid.uuid4().hex[:12]
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
    ]
    kind, payload = plan
    if kind == "tool":
        name, args = payload
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_" + uuid.uuid4().hex[:12],
                        "name": name,
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "tool_use"
    else:
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": payload}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "end_turn"
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def anthropic_json(model: str, plan: tuple[str, Any]) -> bytes:
    kind, payload = plan
    if kind == "tool":
        name, args = payload
        content = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": name, "input": args}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": payload}]
        stop = "end_turn"
    return json.dumps(
        {
            "id": "msg_" + uuid.uuid4().hex[:12],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    ).encode()


# -- OpenAI Responses ---------------------------------------------------------------------------


def _responses_tools(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        names.append(str(tool.get("name") or tool.get("type")))
        for inner in tool.get("tools") or []:  # namespaced tools
            names.append(f"{tool.get('name')}.{inner.get('name')}")
    return names


def responses_plan(body: dict[str, Any], headers: dict[str, str], rec: Recorder) -> tuple[str, Any]:
    items = body.get("input") or []
    text = _texts(items)
    has_output = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
    spawn = next((n for n in _responses_tools(body) if n.split(".")[-1] == "spawn_agent"), None)
    if SUBAGENT_PROMPT in text and "Delegate" not in text:
        return "text", SUBAGENT_ANSWER
    if spawn and "Delegate" in text and not has_output:
        rec.delegated = True
        return "tool", (spawn, {"message": SUBAGENT_PROMPT})
    if has_output:
        return "text", PARENT_ANSWER
    return "text", "OK"


def responses_sse(model: str, plan: tuple[str, Any]) -> bytes:
    rid = "resp_" + uuid.uuid4().hex[:12]
    kind, payload = plan
    if kind == "tool":
        name, args = payload
        namespace, _, short = name.rpartition(".")
        item: dict[str, Any] = {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:8],
            "call_id": "call_" + uuid.uuid4().hex[:8],
            "name": short,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
    else:
        item = {
            "type": "message",
            "id": "msg_" + uuid.uuid4().hex[:8],
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": payload, "annotations": []}],
        }
    base = {"id": rid, "object": "response", "model": model, "status": "in_progress", "output": []}
    done = {
        **base,
        "status": "completed",
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    events = [
        ("response.created", {"type": "response.created", "response": base}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def make_handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            rec.record({"method": "GET", "path": self.path, "headers": _redact(dict(self.headers))})
            if "/models" in self.path:
                self._send(200, json.dumps({"object": "list", "data": [], "models": []}).encode(), "application/json")
            else:
                self._send(404, b"{}", "application/json")

        def do_HEAD(self) -> None:
            self._send(200, b"", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.headers.get("content-encoding") == "zstd":
                raise RuntimeError("zstd bodies are not supported by this recorder")
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = _redact(dict(self.headers))
            path = self.path.split("?")[0]
            entry: dict[str, Any] = {"method": "POST", "path": self.path, "headers": headers, "body": body}
            model = str(body.get("model") or "fake")
            if path.endswith("/messages/count_tokens"):
                rec.record(entry)
                self._send(200, b'{"input_tokens": 10}', "application/json")
                return
            if path.endswith("/messages"):
                plan = anthropic_plan(body, rec)
                entry["scripted"] = plan[0]
                rec.record(entry)
                if body.get("stream"):
                    self._send(200, anthropic_sse(model, plan), "text/event-stream")
                else:
                    self._send(200, anthropic_json(model, plan), "application/json")
                return
            if path.endswith("/responses"):
                plan = responses_plan(body, headers, rec)
                entry["scripted"] = plan[0]
                rec.record(entry)
                self._send(200, responses_sse(model, plan), "text/event-stream")
                return
            rec.record(entry)
            self._send(404, b'{"error": {"message": "not scripted"}}', "application/json")

    return Handler


def serve(rec: Recorder) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(rec))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_claude(agents: Path, port: int, home: Path, work: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "sk-ant-dummy-recording-key",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        # The recorder may run as root in a container; Claude Code refuses to skip permission
        # prompts as root unless told it is sandboxed.
        "IS_SANDBOX": "1",
    }
    cmd = [
        str(agents / "node_modules/.bin/claude"),
        "-p",
        "--model",
        "claude-sonnet-4-5",
        "--dangerously-skip-permissions",
        "--output-format",
        "json",
        "Delegate to a sub-agent with the Task tool: count the files here.",
    ]
    return subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=timeout, check=False)


def run_codex(agents: Path, port: int, home: Path, work: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        "\n".join(
            [
                'model = "gpt-5.1-codex"',
                'model_provider = "fake"',
                "[model_providers.fake]",
                'name = "fake"',
                f'base_url = "http://127.0.0.1:{port}/v1"',
                'env_key = "FAKE_OPENAI_KEY"',
                'wire_api = "responses"',
                "[features]",
                "multi_agent = true",
                "[analytics]",
                "enabled = false",
                "[otel]",
                'exporter = "none"',
                "",
            ]
        )
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "FAKE_OPENAI_KEY": "sk-dummy-recording-key",
        "OPENAI_API_KEY": "sk-dummy-recording-key",
    }
    cmd = [
        str(agents / "node_modules/.bin/codex"),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "Delegate to a sub-agent (spawn_agent): count the files here.",
    ]
    return subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=timeout, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("agent", choices=("claude", "codex"))
    parser.add_argument("--agents", type=Path, default=Path("/tmp/h5-agents"), help="npm prefix with the agents")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file of recorded requests")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    rec = Recorder(args.out)
    server = serve(rec)
    port = server.server_address[1]
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        (work / "a.txt").write_text("a\n")
        (work / "b.txt").write_text("b\n")
        runner = run_claude if args.agent == "claude" else run_codex
        try:
            done = runner(args.agents, port, home, work, args.timeout)
            print(
                f"exit {done.returncode}\nstdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}", file=sys.stderr
            )
        except subprocess.TimeoutExpired:
            print("agent timed out", file=sys.stderr)
    server.shutdown()
    server.server_close()
    print(f"recorded {rec.count} request(s); delegated: {rec.delegated}")
    return 0 if rec.delegated else 1


if __name__ == "__main__":
    sys.exit(main())
