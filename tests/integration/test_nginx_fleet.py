"""A fleet in miniature: two ``switchyard serve`` replicas behind a real nginx load balancer,
sharing a real redis-server; one agent session keeps its stage-router state across both.

nginx balances round-robin (its default), so consecutive requests alternate between the
replicas; which replica served each request is read from its own decision log (matched by the
``x-switchyard-request-id`` header), not assumed.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _configs import skeleton_config
from _convo import Step, bash, render, tool
from _redis import RedisServer, free_port
from _waits import serving, stop, wait_until

from switchyard.testing import FakeUpstream, serve_fake

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
CALM: list[Step] = [*OOM, tool("Write", "ok", path="a.py"), tool("Edit", "ok"), tool("Edit", "ok")]


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is not installed; `make test` installs it (apt-get install -y nginx)")
        pytest.skip("nginx is not installed (apt-get install -y nginx, or `make nginx`); the fleet test needs it")
    return found


class Replica:
    """``switchyard serve`` in a subprocess with its own decision log."""

    def __init__(self, config: Path, workdir: Path, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.decisions = workdir / f"{name}.jsonl"
        log = workdir / f"{name}.log"
        args = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(self.port)]
        args += ["--decision-log", str(self.decisions), "--log-level", "warning"]
        with log.open("wb") as out:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        serving(f"http://127.0.0.1:{self.port}/health", self.proc, 60, f"replica {name}", log=log)

    def served(self, request_id: str) -> dict[str, Any] | None:
        if not self.decisions.exists():
            return None
        for line in self.decisions.read_text().splitlines():
            record = json.loads(line)
            if record["request_id"] == request_id:
                return dict(record)
        return None

    def stop(self) -> None:
        stop(self.proc, 30)


class Nginx:
    """nginx in the foreground, round-robin over the replicas, with its own prefix and temp dirs."""

    def __init__(self, workdir: Path, backends: list[int]) -> None:
        prefix = workdir / "nginx"
        prefix.mkdir()
        self.port = free_port()
        servers = "".join(f"    server 127.0.0.1:{p};\n" for p in backends)
        temp = "".join(f"  {k}_temp_path {prefix}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = prefix / "nginx.conf"
        conf.write_text(
            f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log warn;\n"
            f"events {{ worker_connections 64; }}\n"
            f"http {{\n  access_log off;\n{temp}"
            f"  upstream fleet {{\n{servers}  }}\n"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n"
            f"    location / {{\n      proxy_pass http://fleet;\n      proxy_http_version 1.1;\n"
            f"      proxy_set_header Host $http_host;\n      proxy_buffering off;\n    }}\n  }}\n}}\n"
        )
        self.log = prefix / "out.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [nginx_binary(), "-p", str(prefix), "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT
            )
        self.url = f"http://127.0.0.1:{self.port}"
        serving(f"{self.url}/health", self.proc, 60, "nginx", log=prefix / "error.log")

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Nginx, list[Replica]]]:
    nginx_binary()  # skip (or fail in CI) before starting anything
    workdir = tmp_path_factory.mktemp("fleet")
    redis = RedisServer(workdir).start()
    fake = serve_fake(FakeUpstream())
    config = skeleton_config(fake.port)
    config["routes"]["agent"] = {
        "type": "stage_router",
        "capable": "capable",
        "efficient": "efficient",
        "hold_turns": {"capable": 3},
    }
    config["state"] = {"backend": "redis", "url": redis.url, "timeout_s": 1.0}
    path = workdir / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    replicas: list[Replica] = []
    balancer = None
    try:
        replicas = [Replica(path, workdir, "a"), Replica(path, workdir, "b")]
        balancer = Nginx(workdir, [r.port for r in replicas])
        yield balancer, replicas
    finally:
        if balancer is not None:
            balancer.stop()
        for replica in replicas:
            replica.stop()
        redis.stop()
        fake.stop()


def turn(balancer: Nginx, replicas: list[Replica], steps: list[Step]) -> tuple[str, str, str]:
    """Sends one turn of the session through nginx; returns (replica, decision source, target)."""
    response = httpx.post(
        f"{balancer.url}/v1/chat/completions",
        json=render(steps),
        headers={"x-switchyard-session-id": "fleet-session"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    request_id = response.headers["x-switchyard-request-id"]

    def found_in() -> list[tuple[str, dict[str, Any]]]:
        return [(r.name, rec) for r in replicas if (rec := r.served(request_id)) is not None]

    # The record is written as the answer completes.
    found = wait_until(found_in, 10, f"request {request_id} in a decision log", every=0.02)
    assert len(found) == 1, f"request {request_id} in {len(found)} decision logs"
    name, record = found[0]
    assert (record["source"], record["selected"]) == (
        response.headers["x-switchyard-decision-source"],
        response.headers["x-switchyard-selected-model"],
    )
    return name, record["source"], record["selected"]


def test_one_session_keeps_its_state_across_both_replicas(fleet: Any) -> None:
    balancer, replicas = fleet
    first = turn(balancer, replicas, QUIET)
    assert first[1:] == ("fall_open", "efficient")
    escalated = turn(balancer, replicas, OOM)
    assert escalated[1:] == ("override", "capable")
    held = [turn(balancer, replicas, CALM) for _ in range(2)]
    # Round-robin: the requests alternated, so the session was served by both replicas ...
    served_by = [first[0], escalated[0], *(h[0] for h in held)]
    assert set(served_by) == {"a", "b"} and all(x != y for x, y in itertools.pairwise(served_by))
    # ... and the replica that did not see the escalation still holds the capable tier from Redis.
    other = next(h for h in held if h[0] != escalated[0])
    assert other[1:] == ("hold", "capable")
