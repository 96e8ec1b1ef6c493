"""Differential check: our ``type: advisor`` against NVIDIA's advisor gate (nemo-switchyard 0.3.0).

Scripted sessions go, turn by turn, through NVIDIA's own server (run from its separate virtual
environment by ``_nemo_advisor_worker.py``) and through our proxy, both pointed at one scripted
fake upstream on 127.0.0.1. The executor's and the advisor's answers are fixed by markers in
the conversation (``<<s1t3 exec=final advisor=redo>>``), so both implementations see the same
models. Compared per turn: the upstream calls made (executor ask, advisor review, executor
re-ask after REDO, advisor serving), what a REDO re-ask carried, the reply the caller got and its
status. Every difference must be one of ``EXPECTED`` (each explained in docs/advisor.md); the
script exits 1 on any other.

Setup and run (from the repository root)::

    python3 -m venv /tmp/nemo-venv && /tmp/nemo-venv/bin/pip install nemo-switchyard==0.3.0
    .venv/bin/python benchmarks/differential_advisor.py [--nemo-python /tmp/nemo-venv/bin/python]
        [--markdown report.md]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread

HERE = Path(__file__).resolve().parent
MARK = re.compile(r"<<(s\d+t\d+) exec=([a-z-]+) advisor=([a-z-]+)>>")
REDO_PREFIX = "REDO-FEEDBACK: "

CONFIGS: dict[str, dict[str, Any]] = {
    "tools": {"gate_trigger": "no_tool_call", "gate_min_tool_results": 1, "max_reviews": 2, "fail_open": True},
    "pattern": {
        "gate_trigger": "pattern",
        "gate_trigger_pattern": "DONE",
        "gate_stall_turns": 3,
        "max_reviews": 3,
    },
}


@dataclass(slots=True)
class Session:
    """One scripted session: a route, an optional session id, and its turns as
    ``(assistant turns before, tool results before, exec kind, advisor kind)``."""

    name: str
    route: str
    session_id: str | None
    turns: list[tuple[int, int, str, str]]
    task: str = "Fix the failing test in parser.py."

    def bodies(self, number: int) -> list[dict[str, Any]]:
        out = []
        for t, (assistants, results, exec_kind, advisor_kind) in enumerate(self.turns, start=1):
            messages: list[dict[str, Any]] = [{"role": "user", "content": self.task}]
            for i in range(max(assistants, results)):
                call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                if i < results:
                    messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"file{i}.py"})
            messages.append({"role": "user", "content": f"<<s{number}t{t} exec={exec_kind} advisor={advisor_kind}>>"})
            out.append(
                {
                    "model": self.route,
                    "messages": messages,
                    "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
                }
            )
        return out


SESSIONS = [
    # no_tool_call, at least 1 tool result, 2 reviews per session
    Session("budget and verdicts", "tools", "a1", [
        (0, 0, "final", "approve"),  # no tool result yet: no trigger
        (1, 1, "tool", "approve"),  # calls a tool: no trigger
        (2, 2, "final", "approve"),  # reviewed: APPROVE replays the turn
        (3, 3, "final", "redo"),  # reviewed: REDO re-asks the executor
        (4, 4, "final", "redo"),  # budget spent: the executor serves unreviewed
    ]),
    Session("unusable verdicts refund", "tools", "a2", [
        (1, 1, "final", "garbage"),  # unparseable: refund, approve
        (2, 2, "final", "approved"),  # "APPROVED" is no verdict word: refund, approve
        (3, 3, "final", "md-approve"),  # "**Verdict:** APPROVE"
        (4, 4, "final", "lower-redo"),  # "redo: ..." (any case)
        (5, 5, "final", "approve"),  # budget spent
    ]),
    Session("advisor call fails", "tools", "a4", [
        (1, 1, "final", "fail"),  # HTTP 500 from the advisor
        (2, 2, "final", "approve"),
        (3, 3, "final", "approve"),
    ], task="Advisor outage task."),
    Session("same task, other session", "tools", "a3", [(2, 2, "final", "approve"), (3, 3, "final", "approve")]),
    Session("sessionless 1", "tools", None, [(1, 1, "final", "approve"), (2, 2, "final", "approve")],
            task="Sessionless task one."),
    Session("sessionless 2", "tools", None, [(1, 1, "final", "approve"), (2, 2, "final", "approve")],
            task="Sessionless task two."),
    # pattern DONE, stall after 3 assistant turns, 3 reviews per session
    Session("pattern and stall", "pattern", "p1", [
        (0, 0, "tool", "approve"),  # no DONE: no trigger
        (1, 1, "done", "approve"),  # DONE in the text: reviewed
        (3, 3, "tool", "redo"),  # 3 assistant turns: stall review, REDO
        (4, 4, "tool", "approve"),  # stall fired already: no trigger
    ], task="Refactor the config loader."),
    Session("stall, same task, other session", "pattern", "p2", [(3, 3, "tool", "approve")],
            task="Refactor the config loader."),
    Session("REDO of a tool-only turn", "pattern", "p3", [(3, 3, "toolonly", "redo")], task="Tool-only task."),
    Session("executor fails", "tools", "x1", [(1, 1, "fail", "approve")], task="Executor outage task."),
]  # fmt: skip

EXPECTED = {
    "sessionless 2": "sessionless budget: NVIDIA keeps one budget for all sessionless traffic of the instance, "
    "ours one per task (first-message hash)",
    "stall, same task, other session": "stall marker: NVIDIA keys it by the task (first user message) across "
    "sessions, ours per session",
    "advisor call fails": "failed advisor call: NVIDIA 0.3.0 fails the request (HTTP 500) even with fail_open = true "
    "and keeps the review spent; ours approves and refunds, as NVIDIA's docs describe",
    "REDO of a tool-only turn": "discarded tool-only turn: NVIDIA appends a placeholder assistant message, ours "
    "names the tool calls the executor was about to make",
    "executor fails": "executor failure: NVIDIA fails the request, ours lets the advisor target serve the turn",
}


# -- the scripted upstream ----------------------------------------------------------------------


@dataclass(slots=True)
class Upstream:
    """Answers as the markers say and logs every call as ``(marker, role, kind, note)``."""

    log: list[tuple[str, str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages") or []
        flat = json.dumps(messages)
        marks = MARK.findall(flat)
        if not marks:
            return 400, {"error": {"message": "no marker"}}
        marker, exec_kind, advisor_kind = marks[-1]
        last = messages[-1]
        last_text = last.get("content") if isinstance(last.get("content"), str) else json.dumps(last.get("content"))
        model = body.get("model")
        if model == "executor-model":
            if str(last_text).startswith(REDO_PREFIX):
                discarded = messages[-2]
                note = "discarded=" + (str(discarded.get("content") or "").strip() or "<empty>")[:40]
                self._log(marker, "executor", "redo", note)
                return 200, _chat(f"Revised after review ({marker}).")
            self._log(marker, "executor", "ask", "")
            if exec_kind == "fail":
                return 500, {"error": {"message": "executor down", "type": "server_error"}}
            if exec_kind == "tool":
                return 200, _chat("Checking the files.", tool=True)
            if exec_kind == "toolonly":
                return 200, _chat("", tool=True)
            if exec_kind == "done":
                return 200, _chat(f"DONE: the loader is refactored ({marker}).")
            return 200, _chat(f"The fix is complete ({marker}).")
        serving = str(last_text).startswith("<<")
        if serving:
            self._log(marker, "advisor", "serve", "")
            return 200, _chat(f"Advisor answered the turn ({marker}).")
        self._log(marker, "advisor", "review", advisor_kind)
        replies = {
            "approve": "APPROVE",
            "md-approve": "**Verdict:** APPROVE",
            "redo": "REDO: add a regression test and run the suite.",
            "lower-redo": "redo: run the suite before claiming success.",
            "garbage": "This looks mostly fine, I think.",
            "approved": "APPROVED, nice work.",
        }
        if advisor_kind == "fail":
            return 500, {"error": {"message": "advisor down", "type": "server_error"}}
        return 200, _chat(replies[advisor_kind])

    def _log(self, marker: str, role: str, kind: str, note: str) -> None:
        with self.lock:
            self.log.append((marker, role, kind, note))


def _chat(text: str, *, tool: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool:
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'}}
        ]
    return {
        "id": "chatcmpl-diff",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def serve(upstream: Upstream) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"object": "list", "data": []})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            if body.get("stream"):
                self._send(400, {"error": {"message": "the differential sends buffered requests only"}})
                return
            self._send(*upstream.answer(body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# -- the two implementations --------------------------------------------------------------------


def nvidia_toml(port: int) -> str:
    lines = [
        "schema_version = 1",
        "[llm_clients.local]",
        'format = "openai_chat"',
        f'base_url = "http://127.0.0.1:{port}/v1"',
        "max_retries = 0",
        "[targets.executor]",
        'id = "executor-model"',
        'llm_client = "local"',
        "[targets.advisor]",
        'id = "advisor-model"',
        'llm_client = "local"',
    ]
    for name, keys in CONFIGS.items():
        lines += [f"[routes.{name}]", f'id = "{name}"', 'type = "advisor"', 'executor_target = "executor"',
                  'advisor_target = "advisor"', f"redo_feedback_prefix = {json.dumps(REDO_PREFIX)}"]  # fmt: skip
        lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def our_config(port: int) -> dict[str, Any]:
    return {
        "llm_clients": {
            "local": {
                "format": "openai_chat",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "max_retries": 0,
                "circuit_breaker": {"failures": 0},
            }
        },
        "targets": {
            "executor": {"client": "local", "model": "executor-model"},
            "advisor": {"client": "local", "model": "advisor-model"},
        },
        "routes": {
            name: {
                "type": "advisor",
                "executor_target": "executor",
                "advisor_target": "advisor",
                "redo_feedback_prefix": REDO_PREFIX,
                **keys,
            }
            for name, keys in CONFIGS.items()
        },
    }


def _headers(session: Session) -> dict[str, str]:
    return {"x-switchyard-session-id": session.session_id} if session.session_id else {}


def run_nvidia(python: str, port: int) -> tuple[str, list[list[list[Any]]]]:
    job = {
        "toml": nvidia_toml(port),
        "sessions": [{"headers": _headers(s), "turns": s.bodies(i)} for i, s in enumerate(SESSIONS, start=1)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        inp.write_text(json.dumps(job))
        done = subprocess.run(
            [python, str(HERE / "_nemo_advisor_worker.py"), str(inp), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:  # NVIDIA's server logs every request; show them only on failure
            raise RuntimeError(f"NVIDIA worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(out.read_text())
    return str(result["version"]), result["replies"]


def run_ours(port: int) -> list[list[list[Any]]]:
    sy = Switchyard.from_config(our_config(port))
    replies: list[list[list[Any]]] = []
    try:
        with ServerThread(sy) as server, httpx.Client(timeout=30) as client:
            url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
            for i, session in enumerate(SESSIONS, start=1):
                got = []
                for body in session.bodies(i):
                    r = client.post(url, json=body, headers=_headers(session))
                    text = (
                        r.json()["choices"][0]["message"].get("content") or "" if r.status_code == 200 else r.text[:300]
                    )
                    got.append([r.status_code, text, r.headers.get("x-switchyard-decision-source")])
                replies.append(got)
    finally:
        sy.close()
    return replies


# -- comparison ----------------------------------------------------------------------------------


def _calls(log: list[tuple[str, str, str, str]], marker: str) -> list[str]:
    return [
        f"{role}:{kind}" + (f"({note})" if note and kind == "redo" else "")
        for m, role, kind, note in log
        if m == marker
    ]


def _status_class(status: int) -> str:
    return "ok" if status == 200 else "error"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", default="/tmp/nemo-venv/bin/python")
    parser.add_argument("--markdown", type=Path, help="also write the report as Markdown")
    args = parser.parse_args(argv)
    if not Path(args.nemo_python).exists():
        print(f"{args.nemo_python} not found: create the venv (see the module docstring)", file=sys.stderr)
        return 2
    upstream = Upstream()
    server = serve(upstream)
    port = server.server_address[1]
    try:
        version, theirs = run_nvidia(args.nemo_python, port)
        their_log = list(upstream.log)
        upstream.log.clear()
        ours = run_ours(port)
        our_log = list(upstream.log)
    finally:
        server.shutdown()
        server.server_close()
    rows = []
    unexplained = 0
    turns = agree = 0
    for i, session in enumerate(SESSIONS, start=1):
        for t in range(1, len(session.turns) + 1):
            marker = f"s{i}t{t}"
            a, b = theirs[i - 1][t - 1], ours[i - 1][t - 1]
            calls_a, calls_b = _calls(their_log, marker), _calls(our_log, marker)
            same = calls_a == calls_b and _status_class(a[0]) == _status_class(b[0]) and (a[0] != 200 or a[1] == b[1])
            turns += 1
            agree += same
            why = "" if same else EXPECTED.get(session.name, "UNEXPLAINED")
            unexplained += why == "UNEXPLAINED"
            rows.append((session.name, marker, " ".join(calls_a) or "-", " ".join(calls_b) or "-",
                         f"{a[0]} {a[1][:40]!r}", f"{b[0]} {b[1][:40]!r} [{b[2]}]", why))  # fmt: skip
    header = f"advisor differential: nemo-switchyard {version} vs ours; {agree}/{turns} turns identical"
    lines = [header, ""]
    lines += ["| session | turn | NVIDIA calls | our calls | NVIDIA reply | our reply [source] | difference |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    diffs = {session for session, *_rest, why in rows if why}
    lines += ["", f"sessions with differences: {len(diffs)}; unexplained turns: {unexplained}"]
    report = "\n".join(lines)
    print(report)
    if args.markdown:
        args.markdown.write_text(report + "\n")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
