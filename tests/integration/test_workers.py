"""``switchyard serve --workers 2`` as a subprocess: both workers serve, metrics are summed,
SIGHUP reloads (a bad config is refused while serving goes on, a stream in flight completes),
and a killed worker is started again.

Every wait is on a condition with a bound (a log line, an answer), never a bare sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _configs import skeleton_config
from _redis import free_port
from _waits import stop, wait_until
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from switchyard.testing import FakeUpstream, serve_fake
from switchyard.testing.streams import check_chat, parse

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
GATED = "fake-gated"


class Gate:
    """Wraps the fake upstream: a stream of model ``fake-gated`` stops after its first content
    frame until :attr:`release` is set, so the test holds a stream open across a reload."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.release = threading.Event()
        self.opened = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        first = await receive()
        gated = GATED.encode() in first.get("body", b"")
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        frames = 0

        async def held(message: Any) -> None:
            nonlocal frames
            if gated and message["type"] == "http.response.body" and message.get("body"):
                frames += 1
                if frames == 3:  # the role frame and the first content frame went out
                    self.opened.set()
                    await asyncio.to_thread(self.release.wait, 120)
            await send(message)

        await self.app(scope, replay, held)


class Served:
    """``switchyard serve --workers 2`` in a subprocess, its output in a log file."""

    def __init__(self, config: Path, workdir: Path, metrics_dir: Path) -> None:
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "serve.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        env["TMPDIR"] = str(workdir)  # the supervisor's private folder, even when it is SIGKILLed
        args = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*args, "--workers", "2", "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        wait_until(
            lambda: "2 worker(s) ready" in self.text() or self.proc.poll() is not None,
            120,
            "2 workers ready",
            every=0.05,
        )
        assert self.proc.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def hup(self) -> None:
        self.proc.send_signal(signal.SIGHUP)

    def health(self) -> dict[str, Any]:
        # A new connection per call, so the kernel picks a worker each time.
        return dict(httpx.get(f"{self.url}/health", timeout=10).json()["process"])

    def stop(self) -> None:
        stop(self.proc, 60)


def config_for(port: int, **routes: Any) -> dict[str, Any]:
    config = skeleton_config(port)
    config["targets"]["gated"] = {"client": "local", "model": GATED}
    config["routes"] |= {
        "slow": {"type": "passthrough", "target": "gated"},
        "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": 1},
    } | routes
    # Long enough that the drain never ends the held stream: the test releases it itself.
    config["server"] = {"drain_s": 120}
    return config


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Gate, Path, int]]:
    workdir = tmp_path_factory.mktemp("workers")
    metrics_dir = Path(tempfile.mkdtemp(prefix="metrics-", dir=workdir))
    gate = Gate(FakeUpstream())
    fake = serve_fake(gate)  # type: ignore[arg-type]
    path = workdir / "router.yaml"
    path.write_text(yaml.safe_dump(config_for(fake.port)))
    server = Served(path, workdir, metrics_dir)
    try:
        yield server, gate, metrics_dir, fake.port
    finally:
        gate.release.set()
        server.stop()
        fake.stop()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def chat(url: str, route: str, **extra: Any) -> httpx.Response:
    body = {"model": route, "messages": [{"role": "user", "content": "hello workers"}], **extra}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response


def pids_seen(server: Served, generation: int, count: int = 2, tries: int = 200) -> set[int]:
    seen: set[int] = set()
    for _ in range(tries):
        process = server.health()
        if process.get("generation") == generation:
            seen.add(process["pid"])
        if len(seen) == count:
            break
    return seen


def decisions(text: str, route: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "switchyard_decisions_total" and sample.labels.get("route") == route:
                total += sample.value
    return total


def test_both_workers_serve_and_warn_about_memory_state(served: Any) -> None:
    server, *_ = served
    assert len(pids_seen(server, 1)) == 2
    # stage_router keeps session state; with memory state each worker would keep its own.
    assert "route(s) agent keep per-session state" in server.text()


def test_metrics_are_summed_over_the_workers(served: Any) -> None:
    server, _, metrics_dir, _ = served
    for _ in range(40):  # a new connection each: the kernel spreads them over both workers
        chat(server.url, "fast")

    def counted() -> list[float]:
        per_worker: list[float] = []
        for db in sorted(metrics_dir.glob("counter_*.db")):
            alone = Path(tempfile.mkdtemp(dir=metrics_dir.parent))
            shutil.copy(db, alone / db.name)
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=str(alone))  # type: ignore[no-untyped-call]
            per_worker.append(decisions(generate_latest(registry).decode(), "fast"))
        return per_worker

    # A worker counts a request once its reply's last byte is out (records_after_reply): the
    # count a caller can read in another process follows the reply by a moment.
    def all_counted() -> list[float] | None:
        per_worker = counted()
        return per_worker if sum(per_worker) == 40 else None

    per_worker = wait_until(all_counted, what="40 decisions counted in the workers' metrics files")
    assert len([n for n in per_worker if n]) == 2, per_worker  # both workers answered some
    for _ in range(4):  # whichever worker answers the scrape, it shows the sum
        assert decisions(httpx.get(f"{server.url}/metrics", timeout=10).text, "fast") == 40


def test_sighup_reloads_keeps_a_stream_and_refuses_a_bad_config(served: Any) -> None:
    server, gate, _, fake_port = served
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "a long story"}]}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=120) as stream:
        assert stream.status_code == 200
        chunks = stream.iter_bytes()
        received = b""
        while not gate.opened.is_set() or b"content" not in received:
            received += next(chunks)
        # A valid new config: one more route.
        server.config.write_text(
            yaml.safe_dump(config_for(fake_port, second={"type": "passthrough", "target": "efficient"}))
        )
        server.hup()
        wait_until(lambda: "reload complete: generation 2" in server.text(), 180, "the reload", every=0.05)
        # No worker of the old config accepts any more: every new connection sees the new route.
        for _ in range(10):
            assert server.health()["generation"] == 2
            chat(server.url, "second")
        assert len(pids_seen(server, 2)) == 2
        # The stream opened before the reload is still open on its old worker; let it finish.
        gate.release.set()
        for chunk in chunks:
            received += chunk
    events = parse(received)
    check_chat(events, include_usage=False)
    deltas = [e.json["choices"][0]["delta"] for e in events if e.json and e.json["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    assert text == "[fake-gated] a long story"

    # An invalid config: refused with its YAML path; the second generation keeps serving.
    broken = config_for(fake_port, second={"type": "passthrough", "target": "nowhere"})
    server.config.write_text(yaml.safe_dump(broken))
    server.hup()
    wait_until(lambda: "reload refused" in server.text(), 60, "the refusal", every=0.05)
    assert "routes.second.target" in server.text()
    for _ in range(10):
        assert server.health()["generation"] == 2
        chat(server.url, "second")


def test_a_config_that_validates_but_cannot_be_built_is_refused(served: Any) -> None:
    server, _, _, fake_port = served
    generation = server.health()["generation"]
    # Valid YAML and schema, but the judge's prompt file is missing: only building it fails,
    # which the first new worker finds out.
    judged = {"type": "llm_classifier", "mode": "escalation", "classifier_target": "capable"}
    judged |= {"strong_target": "capable", "weak_target": "efficient", "prompt_file": "missing-prompt.txt"}
    server.config.write_text(yaml.safe_dump(config_for(fake_port, judged=judged)))
    refusals = server.text().count("reload refused")
    server.hup()
    wait_until(lambda: server.text().count("reload refused") > refusals, 120, "the refusal", every=0.05)
    assert "the new worker 0 did not start" in server.text()
    assert f"cannot build {server.config}" in server.text() and "missing-prompt.txt" in server.text()
    for _ in range(10):
        assert server.health()["generation"] == generation
        chat(server.url, "second")


def test_a_killed_worker_is_started_again(served: Any) -> None:
    server, *_ = served
    generation = server.health()["generation"]
    before = pids_seen(server, generation)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: f"(pid {victim}) exited" in server.text(), 60, "the respawn notice", every=0.05)
    wait_until(lambda: len(pids_seen(server, generation, tries=20) - before) == 1, 120, "a new worker", every=0.05)
    chat(server.url, "fast")


def test_a_reload_that_would_serve_nothing_is_refused_unless_forced(served: Any) -> None:
    # Issue 44: a file saved half-written validates but serves nothing (no routes), or serves
    # none of the routes in use. Both are refused with their reason; --force applies the second.
    from switchyard.cli import main

    server, _, _, fake_port = served
    generation = server.health()["generation"]
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(3):
            body = {"model": "fast", "messages": [{"role": "user", "content": "in use"}]}
            assert client.post("/v1/chat/completions", json=body).status_code == 200
        # A view on the same connection hands the answers' records out first (server/later.py),
        # so the worker has told the supervisor that "fast" serves traffic before the signal.
        assert client.get("/health").status_code == 200

    def refused(config: dict[str, Any], why: str) -> None:
        refusals = server.text().count("reload refused")
        server.config.write_text(yaml.safe_dump(config))
        server.hup()
        wait_until(lambda: server.text().count("reload refused") > refusals, 60, "the refusal", every=0.05)
        assert why in server.text()
        for _ in range(6):
            assert server.health()["generation"] == generation
            chat(server.url, "fast")

    half_written = config_for(fake_port)
    half_written["routes"] = {}
    refused(half_written, "the new config has no routes: every request would get 404")
    elsewhere = config_for(fake_port)
    elsewhere["routes"] = {"other": {"type": "passthrough", "target": "efficient"}}
    refused(elsewhere, "none of the routes that served traffic in the last 60s (")
    assert "fast" in server.text().rsplit("reload refused", 1)[1]

    # Forced: the operator retires the routes in use on purpose.
    assert main(["reload", "--force", str(server.proc.pid)]) == 0
    done = f"reload complete: generation {generation + 1}"
    wait_until(lambda: done in server.text(), 180, "the forced reload", every=0.05)
    assert "routes that served traffic in the last minute are gone: " in server.text()
    chat(server.url, "other")


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited; only its parent's reaping is left


def test_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    config = tmp_path / "router.yaml"
    config.write_text(yaml.safe_dump(skeleton_config(9)))
    server = Served(config, tmp_path, tmp_path)
    try:
        pids = pids_seen(server, 1)
        assert len(pids) == 2
        server.proc.kill()  # SIGKILL: no chance to stop its workers itself
        server.proc.wait(timeout=10)
        wait_until(lambda: not any(_running(p) for p in pids), 60, "the orphaned workers to stop", every=0.05)
        assert server.text().count("the supervisor is gone; stopping") == 2
    finally:
        if server.proc.poll() is None:
            server.stop()
        for pid in pids_or_empty(server):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def pids_or_empty(server: Served) -> set[int]:
    """The worker pids the supervisor announced (none if it never got that far)."""
    found = re.search(r"ready \(pids ([\d, ]+)\)", server.text())
    return {int(p) for p in found.group(1).split(", ")} if found else set()
