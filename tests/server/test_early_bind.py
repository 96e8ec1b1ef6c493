"""``switchyard serve`` binds its port before it loads anything heavy (cli/serve.py).

A client that connects while the config is still loading is answered once the server is up
(not refused), a busy port is reported before the config loader is even imported, and a config
that does not validate gives its error and closes the port again.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _waits import wait_until

from switchyard.testing import FakeModel, FakeUpstream, serve_fake

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _serve(config: Path, port: int) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(port)]
    cmd += ["--log-level", "warning"]
    return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    return out


def test_a_client_connecting_during_start_up_gets_its_answer(tmp_path: Path) -> None:
    fake = serve_fake(FakeUpstream([FakeModel("m")]))
    config = {
        "llm_clients": {"up": {"base_url": f"http://127.0.0.1:{fake.port}/v1"}},
        "targets": {"t": {"client": "up", "model": "m"}},
        "routes": {"r": {"type": "passthrough", "target": "t"}},
    }
    # A FIFO for the config: reading it blocks until the test writes it, so the request below is
    # sent while `serve` is certainly still loading.
    fifo = tmp_path / "router.yaml"
    os.mkfifo(fifo)
    port = _free_port()
    proc = _serve(fifo, port)
    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            body = {"model": "r", "messages": [{"role": "user", "content": "hi"}]}
            answer["resp"] = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)
        except Exception as exc:  # reported by the assertion below
            answer["error"] = exc

    try:
        wait_until(lambda: proc.poll() is not None or _accepts(port), 60, "serve listening before its config is read")
        assert proc.poll() is None, _stop(proc)
        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        with open(fifo, "w", encoding="utf-8") as f:  # lets serve read its config and go on
            f.write(yaml.safe_dump(config))
        asker.join(120)
        assert not asker.is_alive(), "no answer"
        assert "error" not in answer, answer.get("error")
        assert answer["resp"].status_code == 200, answer["resp"].text
        assert answer["resp"].json()["choices"][0]["message"]["content"]
    finally:
        _stop(proc)
        fake.stop()


def test_a_busy_port_fails_before_the_config_loader_is_imported(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        script = (
            "import sys\n"
            "from switchyard.cli import main\n"
            f"code = main(['serve', '-c', {str(tmp_path / 'absent.yaml')!r}, '--port', '{port}'])\n"
            "heavy = ('switchyard.config.load', 'pydantic', 'asyncio')\n"
            "print('LOADED', sorted(m for m in heavy if m in sys.modules))\n"
            "sys.exit(code)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    error = f"error: cannot listen on 127.0.0.1:{port}: Address already in use (choose another with --port)"
    assert error in done.stderr
    assert "LOADED []" in done.stdout, done.stdout  # the absent config was never read either
    assert "Traceback" not in done.stderr


def test_a_config_that_does_not_validate_closes_the_port(tmp_path: Path) -> None:
    bad = tmp_path / "router.yaml"
    bad.write_text("routes:\n  r: {type: passthrough, target: nowhere}\n")
    port = _free_port()
    proc = _serve(bad, port)
    out = _stop(proc) if proc.wait(timeout=120) is not None else ""
    assert proc.returncode == 1
    assert "invalid config" in out and "nowhere" in out, out
    assert not _accepts(port)
