"""Records the requests a real agent sends, as golden fixtures for fast decoder tests.

Usage (agents installed by ``make agents``)::

    PYTHONPATH=$PWD .venv/bin/python tests/agents/record.py claude-code [--upstream scripted]

The agent talks straight to a recording server on 127.0.0.1 (no router in between); every
request is answered by the fake upstream and written to
``tests/fixtures/agents/<agent>-<api>-<n>.json`` with secrets, and the throw-away paths the
agent was given, replaced by placeholders. Existing files are never overwritten (other
branches copy them byte for byte); a new recording gets the next free ``<n>``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import launchers  # noqa: E402

from switchyard.testing import FakeModel, FakeUpstream, serve_fake  # noqa: E402
from switchyard.testing.agent_loop import ToolLoop  # noqa: E402

FIXTURES = launchers.ROOT / "tests" / "fixtures" / "agents"
SECRET = re.compile(r"(authorization|api-key|x-api-key|cookie|token|secret|password)", re.I)
KEEP_ALWAYS = {"anthropic-version", "anthropic-beta", "content-type", "user-agent", "accept"}


class Recorder:
    """ASGI wrapper that keeps every request (method, path, query, headers, raw body)."""

    def __init__(self, inner: Any, lenient: bool = False) -> None:
        self.inner = inner
        self.lenient = lenient
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        chunks = []
        more = True
        while more:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        raw = b"".join(chunks)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope.get("query_string", b"").decode(),
                "headers": headers,
                "raw": raw,
            }
        )
        if self.lenient and raw:
            raw = forgive(scope["path"], raw)
        if scope["method"] == "HEAD":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        done = False

        async def replay() -> Any:
            nonlocal done
            if not done:
                done = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.inner(scope, replay, send)


def forgive(path: str, raw: bytes) -> bytes:
    """What the fake upstream gets in ``--lenient`` mode (the fixture keeps the original): the
    fields today's fakes reject although the real providers accept them (issue 12) are removed,
    so the agent's later tool-loop turns can be recorded too."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw
    body.pop("client_metadata", None)
    if path.endswith("/messages") and isinstance(body.get("messages"), list):
        body["messages"] = [
            {**m, "role": "user"} if isinstance(m, dict) and m.get("role") == "system" else m for m in body["messages"]
        ]
    return json.dumps(body).encode()


def api_of(path: str) -> str:
    """The wire API a request path belongs to."""
    for suffix, name in (
        ("/messages/count_tokens", "count_tokens"),
        ("/messages", "messages"),
        ("/responses", "responses"),
        ("/chat/completions", "chat"),
    ):
        if path.endswith(suffix):
            return name
    return "other"


def scrub(value: Any, paths: dict[str, str]) -> Any:
    """Replaces throw-away absolute paths by placeholders, recursively."""
    if isinstance(value, str):
        for real, placeholder in paths.items():
            value = value.replace(real, placeholder)
        return value
    if isinstance(value, list):
        return [scrub(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, paths) for k, v in value.items()}
    return value


def fixture(agent: str, req: dict[str, Any], paths: dict[str, str]) -> dict[str, Any]:
    """One request as a fixture document."""
    headers = {
        k: v
        for k, v in sorted(req["headers"].items())
        if k in KEEP_ALWAYS or not SECRET.search(k)
        if k not in {"host", "content-length", "connection"}
    }
    try:
        body: Any = json.loads(req["raw"]) if req["raw"] else None
    except ValueError:
        body = req["raw"].decode(errors="replace")
    return scrub(
        {
            "agent": agent,
            "version": launchers.VERSIONS.get(agent, ""),
            "method": req["method"],
            "path": req["path"],
            "query": req["query"],
            "headers": headers,
            "body": body,
        },
        paths,
    )


def save(agent: str, docs: list[dict[str, Any]], limit: int) -> list[Path]:
    """Writes the first ``limit`` model requests of each API; never overwrites."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    per_api: dict[str, int] = {}
    for doc in docs:
        api = api_of(doc["path"])
        if api == "other" or doc["method"] != "POST":
            continue
        per_api[api] = per_api.get(api, 0) + 1
        if per_api[api] > limit:
            continue
        n = 1
        while (FIXTURES / f"{agent}-{api}-{n}.json").exists():
            n += 1
        path = FIXTURES / f"{agent}-{api}-{n}.json"
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
        written.append(path)
    return written


def launch(agent: str, url: str, home: Path, cwd: Path, prompt: str, api: str | None) -> launchers.Launch:
    """The agent's launch against ``url`` (root URL) with the route/model name ``agent-model``."""
    model = "agent-model"
    if agent == "claude-code":
        return launchers.claude_code(url, model, prompt, home, cwd)
    if agent == "codex":
        return launchers.codex(url + "/v1", model, prompt, home, cwd)
    if agent == "qwen-code":
        return launchers.qwen_code(url + "/v1", model, prompt, home, cwd)
    if agent == "hermes":
        return launchers.hermes(url + "/v1", model, prompt, home, cwd)
    return launchers.python_driver(agent, url + "/v1", model, prompt, home, cwd, api)


def main() -> int:
    """Records one agent run."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("agent")
    p.add_argument("--prompt", default="Create a file hello.txt containing the word switchyard.")
    p.add_argument("--limit", type=int, default=2, help="requests kept per API")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--dry-run", action="store_true", help="print, do not write fixtures")
    p.add_argument(
        "--tool-loop",
        action="store_true",
        help="answer with the matrix's scripted write/shell/answer loop (records the tool-result turns too)",
    )
    p.add_argument("--lenient", action="store_true", help="see forgive(): lets today's fakes answer every turn")
    p.add_argument("--api", help="the wire API of a Python framework driver (chat, responses, anthropic)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="sy-rec-") as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "work"
        (home / "tmp").mkdir(parents=True)
        cwd.mkdir()
        loop = ToolLoop(path=str(cwd / "proof.txt"), content="switchyard recorded tool loop")
        models = [FakeModel("agent-model", brain=loop.brain(), reasoning="Thinking about the next step.")]
        recorder = Recorder(FakeUpstream(models if args.tool_loop else None), lenient=args.lenient)
        server = serve_fake(recorder)  # type: ignore[arg-type]
        try:
            run = launch(args.agent, f"http://127.0.0.1:{server.port}", home, cwd, args.prompt, args.api)
            run.write_files()
            try:
                out = subprocess.run(
                    run.argv,
                    env=run.env,
                    cwd=run.cwd,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                )
                print(out.stdout[-3000:], out.stderr[-3000:], f"rc={out.returncode}", sep="\n")
            except subprocess.TimeoutExpired:
                print("timed out")
            paths = {str(cwd): "$CWD", str(home): "$HOME", tmp: "$TMP", str(launchers.ROOT): "$REPO"}
            # Claude Code names its per-project folder after the cwd with "/" turned into "-".
            paths = {**{k.replace("/", "-"): v.replace("$", "$MANGLED_") for k, v in paths.items()}, **paths}
            label = {"langchain": f"langchain-{'anthropic' if args.api == 'anthropic' else 'openai'}"}.get(
                args.agent, args.agent
            )
            docs = [fixture(label, r, paths) for r in recorder.seen]
        finally:
            server.stop()
    for d in docs:
        print(d["method"], d["path"], d["query"], api_of(d["path"]))
    if not args.dry_run:
        for path in save(docs[0]["agent"] if docs else args.agent, docs, args.limit):
            print("wrote", path.relative_to(launchers.ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
