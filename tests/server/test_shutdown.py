"""Bounded graceful shutdown of a real ``switchyard serve`` process (issue 16, item 3)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _waits import serving, wait_until

from switchyard.testing import FakeModel, FakeUpstream, serve_fake

# A subprocess that imports the whole server: on a 2-core machine kept busy by other work its
# start took over 20 s. The bounds are hang guards (serving() fails at once if the process exits).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DRAIN_S = 1.0
REPO = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "user", "content": "tell me a long story"}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Stream(threading.Thread):
    """Reads one streamed request to its end, noting when it ended."""

    def __init__(self, url: str, body: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.raw = b""
        self.started = threading.Event()
        self.ended_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(timeout=30) as client, client.stream("POST", self.url, json=self.body) as resp:
                for chunk in resp.iter_bytes():
                    self.raw += chunk
                    self.started.set()
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.started.set()


def test_sigterm_drains_then_ends_open_streams_with_error_events(tmp_path: Path) -> None:
    upstream = FakeUpstream([FakeModel("quick", per_chunk_s=0.05)])
    upstream.stall_s = 60.0
    fake = serve_fake(upstream)
    port = _free_port()
    config = {
        "llm_clients": {"up": {"base_url": f"http://127.0.0.1:{fake.port}/v1", "timeout": {"read": 120, "total": 300}}},
        "targets": {"long": {"client": "up", "model": "stall-mid"}, "quick": {"client": "up", "model": "quick"}},
        "routes": {
            "long": {"type": "passthrough", "target": "long"},
            "quick": {"type": "passthrough", "target": "quick"},
        },
        "server": {"drain_s": DRAIN_S},
    }
    (tmp_path / "router.yaml").write_text(yaml.safe_dump(config))
    log = tmp_path / "decisions.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(tmp_path / "router.yaml")]
    cmd += ["--port", str(port), "--decision-log", str(log), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        serving(f"http://127.0.0.1:{port}/health", proc, 90, "switchyard serve")
        root = f"http://127.0.0.1:{port}"
        streams = {
            "chat": _Stream(f"{root}/v1/chat/completions", {"model": "long", "messages": MESSAGES, "stream": True}),
            "anthropic": _Stream(
                f"{root}/v1/messages", {"model": "long", "max_tokens": 100, "messages": MESSAGES, "stream": True}
            ),
            "responses": _Stream(f"{root}/v1/responses", {"model": "long", "input": MESSAGES, "stream": True}),
        }
        for s in streams.values():
            s.start()
        for s in streams.values():
            assert s.started.wait(10) and s.error is None
        waiting: dict[str, Any] = {}

        def json_request() -> None:
            body = {"model": "long", "messages": MESSAGES}
            try:
                waiting["resp"] = httpx.post(f"{root}/v1/chat/completions", json=body, timeout=30)
            except httpx.HTTPError as exc:
                waiting["error"] = exc

        json_thread = threading.Thread(target=json_request, daemon=True)
        json_thread.start()
        # Its upstream answer is now stalled half-way: wait (bounded) until the fake has it.
        wait_until(lambda: upstream.count("stall-mid") >= 4, what="the JSON request reached the upstream")
        quick = _Stream(f"{root}/v1/chat/completions", {"model": "quick", "messages": MESSAGES, "stream": True})
        quick.start()
        assert quick.started.wait(10)

        sigterm_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                httpx.get(f"{root}/health", timeout=1)
            except httpx.ConnectError:
                return True
            except httpx.HTTPError:
                return False  # accepted, then cut: still shutting down
            return False

        wait_until(refused, 10, "the proxy stopped accepting")  # bounded, not a fixed pause
        output, _ = proc.communicate(timeout=DRAIN_S + 10)
        exited_after = time.monotonic() - sigterm_at
        # uvicorn re-raises the signal it handled once shut down, so the exit reads as SIGTERM.
        assert proc.returncode in (0, -signal.SIGTERM), output
        assert exited_after < DRAIN_S + 15, exited_after  # bounded (the upstream stalls 60 s)

        for s in [*streams.values(), quick]:
            s.join(5)
            assert not s.is_alive()
        # A JSON request still waiting for its answer was answered 503 in its API's shape.
        json_thread.join(5)
        assert "error" not in waiting, waiting
        assert waiting["resp"].status_code == 503
        assert waiting["resp"].json()["error"]["code"] == "server_shutting_down"
        # A request that finished within the drain time finished normally.
        assert quick.raw.rstrip().endswith(b"data: [DONE]") and b'"error"' not in quick.raw
        # The others lasted until the drain time, then got an error event in their own format.
        for s in streams.values():
            assert DRAIN_S - 0.1 <= s.ended_at - sigterm_at < DRAIN_S + 15
        chat = streams["chat"].raw.decode()
        assert '"error"' in chat and "shutting down" in chat and "server_shutting_down" in chat
        anth = streams["anthropic"].raw.decode()
        assert "event: error" in anth and "shutting down" in anth
        assert "message_stop" not in anth
        resp = streams["responses"].raw.decode()
        assert "event: response.failed" in resp and "response.completed" not in resp
        assert '"status":"completed"' not in resp.split("event: response.failed")[0].split("output_item.done")[-1]

        records = [json.loads(line) for line in log.read_text().splitlines()]
        cut = [r for r in records if r["route"] == "long"]
        assert len(cut) == 4
        assert all(r["status"] == 503 and r["details"]["interrupted"] == "server_shutting_down" for r in cut), cut
        assert [r["status"] for r in records if r["route"] == "quick"] == [200]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        fake.stop()
