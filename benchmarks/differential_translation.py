"""Differential check: our translation against NVIDIA's (``nemo-switchyard`` on PyPI).

Runs NVIDIA's Rust server (``switchyard_rust.server.Server``) and ours side by side, each as a
translating proxy over its own recording fake upstream (``switchyard.testing.FakeUpstream``,
which validates requests like the real providers), sends the same corpus of requests through
both — every caller-format/upstream-format pair, JSON and SSE, text, tools, tool results,
images, reasoning, free-form tools — and compares what each upstream received and what each
client saw. NVIDIA's package shares our import name, so it runs in its own virtual environment
(created on first use with ``pip install nemo-switchyard==0.3.0``).

Command (prints the agreement table; ``--json`` writes every case's details):

    .venv/bin/python benchmarks/differential_translation.py [--nemo-python /tmp/nemo-venv/bin/python]
        [--json benchmarks/results/differential.json] [--case NAME]

Exit status: 0 when it ran (differences are reported, not failures), 2 when NVIDIA's server
could not be installed or started (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from switchyard.api import Switchyard
from switchyard.server.runner import ServerThread
from switchyard.testing import FakeModel, FakeUpstream, Turn, echo_brain, serve_fake, streams
from switchyard.wire import codec

NEMO_VERSION = "0.3.0"
DEFAULT_VENV = Path("/tmp/nemo-venv")
FORMATS = ("openai_chat", "anthropic_messages", "openai_responses")
SHORT = {"openai_chat": "chat", "anthropic_messages": "anth", "openai_responses": "resp"}
MODELS = {"openai_chat": "m-chat", "anthropic_messages": "m-anth", "openai_responses": "m-resp"}
ROUTES = {f: f"via-{SHORT[f]}" for f in FORMATS}
CALLER_PATH = {
    "openai_chat": "/v1/chat/completions",
    "anthropic_messages": "/v1/messages",
    "openai_responses": "/v1/responses",
}
UPSTREAM_PATH = {
    "openai_chat": "/chat/completions",
    "anthropic_messages": "/messages",
    "openai_responses": "/responses",
}

HOST = textwrap.dedent(
    """
    import sys
    from switchyard_rust.server import Server
    server = Server(sys.argv[1], port=0)
    print(server.port, flush=True)
    sys.stdin.readline()
    server.close()
    """
)


# -- the two proxies ----------------------------------------------------------------------------


def ensure_nemo(python: Path) -> Path:
    """A Python with NVIDIA's wheel installed (creating the venv if needed)."""
    probe = [str(python), "-c", "import switchyard_rust.server"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    venv = python.parent.parent
    print(f"installing nemo-switchyard=={NEMO_VERSION} into {venv} ...", file=sys.stderr)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"nemo-switchyard=={NEMO_VERSION}"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"cannot install NVIDIA's server: {' '.join(step)} failed:\n{done.stderr[-2000:]}")
    return venv / "bin" / "python"


def nemo_toml(port: int) -> str:
    """NVIDIA's routes.toml (schema_version 1): one client per format, one passthrough route each."""
    lines = ["schema_version = 1", ""]
    bases = {"openai_chat": "/v1", "anthropic_messages": "", "openai_responses": "/v1"}
    for fmt in FORMATS:
        lines += [
            f"[llm_clients.{SHORT[fmt]}]",
            f'format = "{fmt}"',
            f'base_url = "http://127.0.0.1:{port}{bases[fmt]}"',
            "",
        ]
    for fmt in FORMATS:
        lines += [f"[targets.t-{SHORT[fmt]}]", f'id = "{MODELS[fmt]}"', f'llm_client = "{SHORT[fmt]}"', ""]
    for fmt in FORMATS:
        lines += [
            f"[routes.{ROUTES[fmt]}]",
            f'id = "{ROUTES[fmt]}"',
            'type = "passthrough"',
            f'target = "t-{SHORT[fmt]}"',
            "",
        ]
    return "\n".join(lines)


def our_config(port: int) -> dict[str, Any]:
    bases = {"openai_chat": "/v1", "anthropic_messages": "", "openai_responses": "/v1"}
    return {
        "llm_clients": {SHORT[f]: {"format": f, "base_url": f"http://127.0.0.1:{port}{bases[f]}"} for f in FORMATS},
        "targets": {f"t-{SHORT[f]}": {"client": SHORT[f], "model": MODELS[f]} for f in FORMATS},
        "routes": {ROUTES[f]: {"type": "passthrough", "target": f"t-{SHORT[f]}"} for f in FORMATS},
    }


class Nemo:
    """NVIDIA's server in a subprocess of the NVIDIA venv."""

    def __init__(self, python: Path, upstream_port: int, workdir: Path) -> None:
        (workdir / "routes.toml").write_text(nemo_toml(upstream_port))
        (workdir / "host.py").write_text(HOST)
        self.proc = subprocess.Popen(
            [str(python), str(workdir / "host.py"), str(workdir / "routes.toml")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise SystemExit(f"NVIDIA's server did not start (said {line!r})")
        self.base = f"http://127.0.0.1:{int(line)}"

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


# -- the corpus ---------------------------------------------------------------------------------

TOOL_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@dataclass
class Case:
    """One request sent through both proxies."""

    name: str
    caller: str
    upstream: str
    body: dict[str, Any]
    turn: Turn | None = None  # what the upstream model answers (default: the echo brain)
    note: str = ""


def _tools(fmt: str, names: tuple[str, ...] = ("lookup",)) -> list[dict[str, Any]]:
    if fmt == "openai_chat":
        return [
            {"type": "function", "function": {"name": n, "description": f"{n} tool", "parameters": TOOL_SCHEMA}}
            for n in names
        ]
    if fmt == "anthropic_messages":
        return [{"name": n, "description": f"{n} tool", "input_schema": TOOL_SCHEMA} for n in names]
    return [
        {"type": "function", "name": n, "description": f"{n} tool", "parameters": TOOL_SCHEMA, "strict": False}
        for n in names
    ]


def _text_body(fmt: str, text: str, *, system: str | None = "Be brief.") -> dict[str, Any]:
    if fmt == "openai_chat":
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        return {"messages": msgs}
    if fmt == "anthropic_messages":
        return {
            "max_tokens": 1000,
            "messages": [{"role": "user", "content": text}],
            **({"system": system} if system else {}),
        }
    return {"input": text, **({"instructions": system} if system else {})}


def _tool_history(fmt: str) -> dict[str, Any]:
    """A finished parallel tool turn with its results, asking for the final answer."""
    if fmt == "openai_chat":
        return {
            "messages": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"query":"Paris"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"query":"Rome"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
                {"role": "tool", "tool_call_id": "call_b", "content": "24C"},
            ],
            "tools": _tools(fmt),
        }
    if fmt == "anthropic_messages":
        return {
            "max_tokens": 1000,
            "messages": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"query": "Paris"}},
                        {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"query": "Rome"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C"},
                        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "24C", "is_error": False},
                    ],
                },
            ],
            "tools": _tools(fmt),
        }
    return {
        "input": [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"type": "function_call", "call_id": "call_a", "name": "lookup", "arguments": '{"query":"Paris"}'},
            {"type": "function_call", "call_id": "call_b", "name": "lookup", "arguments": '{"query":"Rome"}'},
            {"type": "function_call_output", "call_id": "call_a", "output": "18C"},
            {"type": "function_call_output", "call_id": "call_b", "output": "24C"},
        ],
        "tools": _tools(fmt),
    }


def _image_body(fmt: str) -> dict[str, Any]:
    if fmt == "openai_chat":
        parts = [
            {"type": "text", "text": "describe"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ]
        return {"messages": [{"role": "user", "content": parts}]}
    if fmt == "anthropic_messages":
        parts = [
            {"type": "text", "text": "describe"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]
        return {"max_tokens": 500, "messages": [{"role": "user", "content": parts}]}
    parts = [
        {"type": "input_text", "text": "describe"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
    ]
    return {"input": [{"role": "user", "content": parts}]}


def corpus() -> list[Case]:
    """≥ 30 cases over the nine pairs."""
    cases: list[Case] = []
    for caller in FORMATS:
        for upstream in FORMATS:
            pair = f"{SHORT[caller]}>{SHORT[upstream]}"
            cases.append(Case(f"{pair} text", caller, upstream, _text_body(caller, "hello there")))
            body = {**_text_body(caller, "hello there streamed"), "stream": True}
            cases.append(Case(f"{pair} text sse", caller, upstream, body))
            body = {
                **_text_body(caller, "please use tools in parallel", system=None),
                "tools": _tools(caller),
                "stream": True,
            }
            cases.append(Case(f"{pair} parallel tools sse", caller, upstream, body))
            cases.append(Case(f"{pair} tool results", caller, upstream, _tool_history(caller)))
            cases.append(Case(f"{pair} image", caller, upstream, _image_body(caller)))
    thinking = Turn(text="The answer.", reasoning="Reasoning it through.")
    cases += [
        Case(
            "anth>chat thinking sse",
            "anthropic_messages",
            "openai_chat",
            {
                **_text_body("anthropic_messages", "think"),
                "max_tokens": 4000,
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "stream": True,
            },
            thinking,
            "vLLM reasoning shown to a Claude Code-like caller",
        ),
        Case(
            "resp>chat reasoning sse",
            "openai_responses",
            "openai_chat",
            {**_text_body("openai_responses", "think"), "reasoning": {"effort": "high"}, "stream": True},
            thinking,
        ),
        Case(
            "chat>anth reasoning_effort",
            "openai_chat",
            "anthropic_messages",
            {**_text_body("openai_chat", "think"), "reasoning_effort": "medium", "max_tokens": 20000},
        ),
        Case(
            "resp>anth reasoning sse",
            "openai_responses",
            "anthropic_messages",
            {
                **_text_body("openai_responses", "think"),
                "reasoning": {"effort": "low"},
                "max_output_tokens": 8000,
                "stream": True,
            },
        ),
        Case(
            "chat>resp reasoning_effort",
            "openai_chat",
            "openai_responses",
            {**_text_body("openai_chat", "think"), "reasoning_effort": "low"},
        ),
        Case(
            "chat>anth no max_tokens, temperature 1.5",
            "openai_chat",
            "anthropic_messages",
            {**_text_body("openai_chat", "hot"), "temperature": 1.5, "stop": ["END"]},
        ),
        Case(
            "chat>anth forced tool, no parallel",
            "openai_chat",
            "anthropic_messages",
            {
                **_text_body("openai_chat", "find it", system=None),
                "tools": _tools("openai_chat", ("lookup", "fetch")),
                "tool_choice": {"type": "function", "function": {"name": "fetch"}},
                "parallel_tool_calls": False,
            },
        ),
        Case(
            "anth>chat tool_choice any",
            "anthropic_messages",
            "openai_chat",
            {
                **_text_body("anthropic_messages", "find it", system=None),
                "tools": _tools("anthropic_messages"),
                "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            },
        ),
        Case(
            "chat>chat developer + late system",
            "openai_chat",
            "openai_chat",
            {
                "messages": [
                    {"role": "developer", "content": "D"},
                    {"role": "user", "content": "hi"},
                    {"role": "system", "content": "late"},
                    {"role": "user", "content": "go"},
                ]
            },
        ),
    ]
    patch_tool = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"},
    }
    for upstream in ("openai_chat", "anthropic_messages", "openai_responses"):
        cases.append(
            Case(
                f"resp>{SHORT[upstream]} codex apply_patch sse",
                "openai_responses",
                upstream,
                {
                    "input": "please use a tool",
                    "instructions": "You are Codex.",
                    "tools": [patch_tool],
                    "store": False,
                    "stream": True,
                },
                Turn(tool_calls=[("apply_patch", "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch")]),
                "free-form tool; upstream may see a one-string function",
            )
        )
    return cases


# -- what each side saw ---------------------------------------------------------------------------


def client_view(caller: str, stream: bool, status: int, raw: bytes) -> dict[str, Any]:
    """What the caller got: text, tool calls, reasoning present, stop, usage, stream-rule violations."""
    view: dict[str, Any] = {"status": status}
    if status != 200:
        try:
            view["error"] = json.loads(raw)
        except ValueError:
            view["error"] = raw[:200].decode(errors="replace")
        return view
    violations: list[str] = []
    if stream:
        try:
            events = streams.parse(raw)
        except AssertionError as exc:
            return {**view, "violations": [f"framing: {exc}"]}
        try:
            if caller == "openai_chat":
                streams.check_chat(events, include_usage=False)
            elif caller == "anthropic_messages":
                streams.check_anthropic(events)
            else:
                streams.check_responses(events)
        except AssertionError as exc:
            violations.append(str(exc))
        body = _fold(caller, events)
    else:
        body = json.loads(raw)
    view.update(_extract(caller, body))
    view["violations"] = violations
    return view


def _fold(caller: str, events: list[streams.RawEvent]) -> dict[str, Any]:
    """A stream folded into the caller format's JSON object (independently of our codecs)."""
    if caller == "openai_responses":
        final = [e.json for e in events if e.event in streams.TERMINAL]
        return final[-1]["response"] if final else {"output": [], "status": "none"}
    if caller == "anthropic_messages":
        return _fold_anthropic(events)
    return _fold_chat(events)


def _fold_anthropic(events: list[streams.RawEvent]) -> dict[str, Any]:
    msg: dict[str, Any] = {"content": [], "usage": {}}
    fields = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "_json"}
    for e in events:
        d = e.json
        if e.event == "message_start":
            msg["usage"] = dict(d["message"].get("usage") or {})
        elif e.event == "content_block_start":
            block = dict(d["content_block"])
            if block["type"] == "tool_use":
                block["_json"] = ""
            msg["content"].append(block)
        elif e.event == "content_block_delta":
            block, delta = msg["content"][-1], d["delta"]
            if delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] in fields:
                key = fields[delta["type"]]
                block[key] += delta["partial_json" if key == "_json" else key]
        elif e.event == "message_delta":
            msg["stop_reason"] = d["delta"].get("stop_reason")
            msg["usage"].update(d.get("usage") or {})
    for block in msg["content"]:
        if "_json" in block:
            block["input"] = json.loads(block.pop("_json") or "{}")
    return msg


def _fold_chat(events: list[streams.RawEvent]) -> dict[str, Any]:
    message: dict[str, Any] = {"content": "", "reasoning": "", "tool_calls": {}}
    out: dict[str, Any] = {"choices": [{"message": message, "finish_reason": None}], "usage": None}
    for e in events:
        if e.data == "[DONE]":
            continue
        d = e.json
        if d.get("usage"):
            out["usage"] = d["usage"]
        for ch in d.get("choices") or []:
            delta = ch.get("delta") or {}
            message["content"] += delta.get("content") or ""
            message["reasoning"] += delta.get("reasoning") or delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = message["tool_calls"].setdefault(tc["index"], {"function": {"name": "", "arguments": ""}})
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
                slot["id"] = slot.get("id") or tc.get("id")
            if ch.get("finish_reason"):
                out["choices"][0]["finish_reason"] = ch["finish_reason"]
    message["tool_calls"] = [message["tool_calls"][i] for i in sorted(message["tool_calls"])]
    return out


def _args(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def _extract(caller: str, body: dict[str, Any]) -> dict[str, Any]:
    if caller == "openai_chat":
        choice = (body.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        calls = [(c["function"]["name"], _args(c["function"]["arguments"])) for c in msg.get("tool_calls") or []]
        usage = body.get("usage") or {}
        return {
            "text": msg.get("content") or "",
            "calls": calls,
            "reasoning": bool(msg.get("reasoning") or msg.get("reasoning_content")),
            "stop": choice.get("finish_reason"),
            "usage": (usage.get("prompt_tokens"), usage.get("completion_tokens")) if usage else None,
        }
    if caller == "anthropic_messages":
        blocks = body.get("content") or []
        usage = body.get("usage") or {}
        prompt = (
            (usage.get("input_tokens") or 0)
            + (usage.get("cache_read_input_tokens") or 0)
            + (usage.get("cache_creation_input_tokens") or 0)
        )
        signatures = [b.get("signature") for b in blocks if b.get("type") == "thinking"]
        return {
            "text": "".join(b.get("text", "") for b in blocks if b.get("type") == "text"),
            "calls": [(b["name"], b.get("input")) for b in blocks if b.get("type") == "tool_use"],
            "reasoning": any(b.get("type") == "thinking" for b in blocks),
            "thinking_signature": [
                "empty" if not s else "marked" if s.startswith("switchyard.") else "opaque" for s in signatures
            ],
            "stop": body.get("stop_reason"),
            "usage": (prompt, usage.get("output_tokens")) if usage else None,
        }
    output = body.get("output") or []
    texts = [c.get("text", "") for o in output if o.get("type") == "message" for c in o.get("content") or []]
    calls: list[Any] = []
    for o in output:
        if o.get("type") == "function_call":
            calls.append((o["name"], _args(o.get("arguments"))))
        elif o.get("type") == "custom_tool_call":
            calls.append((o["name"], ("raw", o.get("input"))))
    usage = body.get("usage") or {}
    return {
        "text": "".join(texts),
        "calls": calls,
        "reasoning": any(o.get("type") == "reasoning" for o in output),
        "stop": body.get("status"),
        "usage": (usage.get("input_tokens"), usage.get("output_tokens")) if usage else None,
    }


def upstream_view(fmt: str, body: dict[str, Any] | None) -> dict[str, Any]:
    """What the upstream was asked, through our decoder for its format (semantic comparison)."""
    if body is None:
        return {"sent": False}
    try:
        request = codec(fmt).decode_request(body)
    except Exception as exc:  # the other side may send something we cannot read: say so
        return {"undecodable": str(exc)}
    turns = []
    for m in request.messages:
        for p in m.content:
            kind = p.type
            if kind == "text":
                turns.append((m.role if m.role in ("system", "developer") else "msg", "text", p.text))  # type: ignore[union-attr]
            elif kind == "tool_call":
                turns.append(("call", p.name, p.kind, _args(p.arguments) if p.kind == "function" else p.arguments))  # type: ignore[union-attr]
            elif kind == "tool_result":
                turns.append(("result", p.call_id, p.text, p.is_error))  # type: ignore[union-attr]
            elif kind == "image":
                turns.append(("image", p.media_type or p.url))  # type: ignore[union-attr]
            elif kind == "reasoning":
                turns.append(("reasoning", bool(p.signature or p.encrypted or p.redacted)))  # type: ignore[union-attr]
    return {
        "turns": turns,
        "tools": [(t.name, t.kind) for t in request.tools],
        "tool_choice": request.tool_choice.model_dump(exclude_none=True) if request.tool_choice else None,
        "parallel_tool_calls": request.parallel_tool_calls,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stop": request.stop,
        "reasoning": request.reasoning.model_dump(exclude_none=True) if request.reasoning else None,
        "stream": request.stream,
        "fields": sorted(body),
    }


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Side:
    fake: Any
    base: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_case(case: Case, side: Side, http: httpx.Client) -> dict[str, Any]:
    upstream_app: FakeUpstream = side.fake.app
    model = upstream_app.model(MODELS[case.upstream])
    model.brain = (lambda body, m, t=case.turn: t) if case.turn is not None else echo_brain
    before = len(upstream_app.received)
    body = {**case.body, "model": ROUTES[case.upstream]}
    stream = bool(body.get("stream"))
    started = time.perf_counter()
    resp = http.post(side.base + CALLER_PATH[case.caller], json=body)
    elapsed = (time.perf_counter() - started) * 1000
    sent = [r.body for r in upstream_app.received[before:] if r.path.endswith(UPSTREAM_PATH[case.upstream])]
    return {
        "upstream_body": sent[-1] if sent else None,
        "upstream": upstream_view(case.upstream, sent[-1] if sent else None),
        "client": client_view(case.caller, stream, resp.status_code, resp.content),
        "ms": round(elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", type=Path, default=DEFAULT_VENV / "bin" / "python")
    parser.add_argument("--json", type=Path, help="write every case's details here")
    parser.add_argument("--case", help="run only cases whose name contains this")
    args = parser.parse_args(argv)
    # Lossy-conversion warnings are expected here (the corpus exercises them); keep the table readable.
    logging.getLogger("switchyard").setLevel(logging.ERROR)
    try:
        python = ensure_nemo(args.nemo_python)
    except (SystemExit, OSError, subprocess.SubprocessError) as exc:
        print(f"differential check skipped: {exc}", file=sys.stderr)
        return 2
    cases = [c for c in corpus() if not args.case or args.case in c.name]
    fakes = [serve_fake(FakeUpstream([FakeModel(m) for m in MODELS.values()])) for _ in range(2)]
    workdir = Path(tempfile.mkdtemp(prefix="sy-diff-"))
    nemo: Nemo | None = None
    ours: ServerThread | None = None
    try:
        nemo = Nemo(python, fakes[1].port, workdir)
        ours = ServerThread(Switchyard.from_config(our_config(fakes[0].port))).start()
        sides = {"ours": Side(fakes[0], ours.root_url), "nvidia": Side(fakes[1], nemo.base)}
        rows = []
        with httpx.Client(timeout=30) as http:
            for case in cases:
                got = {name: run_case(case, side, http) for name, side in sides.items()}
                rows.append(_row(case, got["ours"], got["nvidia"]))
        _print(rows)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rows, indent=2, default=str))
    finally:
        if ours is not None:
            ours.stop()
        if nemo is not None:
            nemo.close()
        for fake in fakes:
            fake.stop()
    return 0


def _row(case: Case, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    same_body = ours["upstream_body"] is not None and {**(ours["upstream_body"] or {})} == {
        **(theirs["upstream_body"] or {})
    }
    up_diff = diff(ours["upstream"], theirs["upstream"])
    client_diff = diff(
        {k: v for k, v in ours["client"].items() if k != "violations"},
        {k: v for k, v in theirs["client"].items() if k != "violations"},
    )
    return {
        "case": case.name,
        "caller": case.caller,
        "upstream": case.upstream,
        "upstream_agreement": "identical"
        if same_body
        else ("equivalent" if not up_diff else "differs: " + ", ".join(up_diff)),
        "client_agreement": "same" if not client_diff else "differs: " + ", ".join(client_diff),
        "violations_ours": ours["client"].get("violations", []),
        "violations_nvidia": theirs["client"].get("violations", []),
        "ours": ours,
        "nvidia": theirs,
    }


def _print(rows: list[dict[str, Any]]) -> None:
    print("| case | upstream request | client result | stream rules (ours / NVIDIA) |")
    print("|---|---|---|---|")
    for r in rows:
        rules = f"{'ok' if not r['violations_ours'] else 'FAIL: ' + r['violations_ours'][0]} / " + (
            "ok" if not r["violations_nvidia"] else "FAIL: " + r["violations_nvidia"][0]
        )
        print(f"| {r['case']} | {r['upstream_agreement']} | {r['client_agreement']} | {rules} |")
    same_up = sum(r["upstream_agreement"] in ("identical", "equivalent") for r in rows)
    same_client = sum(r["client_agreement"] == "same" for r in rows)
    print(f"\n{len(rows)} cases: upstream requests agree in {same_up}, client results agree in {same_client}.")


if __name__ == "__main__":
    raise SystemExit(main())
