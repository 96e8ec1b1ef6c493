"""Two ``switchyard serve`` processes sharing one real redis-server (state.backend: redis).

Each replica is a separate OS process started with the CLI, as behind a load balancer; requests
of one session alternate between them. The upstream is the fake on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from _configs import skeleton_config
from _convo import Step, bash, render, tool
from _redis import RedisServer, free_port
from _waits import serving, stop, wait_until
from prometheus_client.parser import text_string_to_metric_families

from switchyard.testing import FakeModel, FakeUpstream, serve_fake
from switchyard.testing.judges import capability_brain, escalation_brain

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
QUIET: list[Step] = [("system", "You are a coding agent."), ("user", "Fix the parser so that the tests pass.")]
OOM: list[Step] = [*QUIET, bash("python train.py", "RuntimeError: CUDA out of memory.")]
CALM: list[Step] = [*OOM, tool("Write", "ok", path="a.py"), tool("Edit", "ok"), tool("Edit", "ok")]


class Replica:
    """``switchyard serve`` in a subprocess."""

    def __init__(self, config: Path, workdir: Path, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.log = workdir / f"{name}.log"
        args = [sys.executable, "-m", "switchyard", "serve", "-c", str(config), "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*args, "--log-level", "warning"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        serving(f"{self.url}/health", self.proc, 30, f"replica {name}", log=self.log)

    def health(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/health", timeout=5).json())

    def degraded_metric(self) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "switchyard_state_backend_degraded" and sample.labels == {"backend": "redis"}:
                    return float(sample.value)
        raise AssertionError("switchyard_state_backend_degraded{backend='redis'} is missing")

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Replica, RedisServer, FakeUpstream]]:
    workdir = tmp_path_factory.mktemp("replicas")
    server = RedisServer(workdir).start()
    upstream = FakeUpstream(
        [
            FakeModel("fake-judge", brain=escalation_brain(lambda view: "ESCALATE-ME" in view)),
            FakeModel("fake-judge-always", brain=escalation_brain(lambda view: True)),
            FakeModel("fake-forecaster", brain=capability_brain(lambda view: 0.2)),
        ]
    )
    fake = serve_fake(upstream)
    config = skeleton_config(fake.port)
    config["targets"]["judge"] = {"client": "local", "model": "fake-judge"}
    config["targets"]["judge-always"] = {"client": "local", "model": "fake-judge-always"}
    config["targets"]["forecaster"] = {"client": "local", "model": "fake-forecaster"}
    tiers = {"strong_target": "capable", "weak_target": "efficient"}
    config["routes"] |= {
        "watched": {"type": "llm_classifier", "mode": "escalation", "confirmations": 2, "classifier_target": "judge"}
        | tiers,
        # Never latches within the test: every verdict extends the streak, so counts are exact.
        "race": {"type": "llm_classifier", "mode": "escalation", "confirmations": 1000}
        | {"classifier_target": "judge-always"}
        | tiers,
        "classified": {"type": "llm_classifier", "classifier_target": "forecaster", "base_threshold": 0.5}
        | {"classify_trigger": "new_session"}
        | tiers,
        "agent": {"type": "stage_router", "capable": "capable", "efficient": "efficient", "hold_turns": {"capable": 1}},
    }
    config["state"] = {"backend": "redis", "url": server.url, "timeout_s": 1.0, "retry_interval_s": 0.2}
    path = workdir / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    a = Replica(path, workdir, "a")
    try:
        b = Replica(path, workdir, "b")
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b, server, upstream
    finally:
        a.stop()
        b.stop()
        server.stop()
        fake.stop()


def chat(replica: Replica, route: str, session: str, messages: list[dict[str, Any]]) -> httpx.Response:
    response = httpx.post(
        f"{replica.url}/v1/chat/completions",
        json={"model": route, "messages": messages},
        headers={"x-switchyard-session-id": session},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


def said(response: httpx.Response) -> tuple[str, str]:
    return response.headers["x-switchyard-decision-source"], response.headers["x-switchyard-selected-model"]


def stored(server: RedisServer, key: str) -> dict[str, Any] | None:
    raw = redis.Redis.from_url(server.url).get(f"switchyard:{key}")
    return None if raw is None else dict(json.loads(raw))


def conversation(turns: int, text: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    for n in range(turns):
        messages += [{"role": "assistant", "content": f"step {n}"}, {"role": "user", "content": f"{text} {n}"}]
    return messages


def test_latch_affinity_and_hold_carry_over_between_replicas(stack: Any) -> None:
    a, b, server, upstream = stack
    # Escalation: one escalate verdict on A, the confirming one on B, then latched on A.
    assert said(chat(a, "watched", "latch", conversation(0, "ESCALATE-ME"))) == ("escalation", "efficient")
    assert stored(server, "watched:latch:escalation")["streak"] == 1  # type: ignore[index]
    assert said(chat(b, "watched", "latch", conversation(1, "ESCALATE-ME"))) == ("escalation", "capable")
    assert said(chat(a, "watched", "latch", conversation(2, "ESCALATE-ME"))) == ("latched", "capable")
    assert said(chat(b, "watched", "latch", conversation(3, "ESCALATE-ME"))) == ("latched", "capable")

    # Affinity: the judge is asked once per session, on A; B keeps its verdict.
    asked = len(upstream.bodies("fake-forecaster"))
    first = said(chat(a, "classified", "aff", conversation(0, "Refactor the scheduler.")))
    assert first[1] == "capable" and first[0] != "affinity"
    assert said(chat(b, "classified", "aff", conversation(1, "Now the tests."))) == ("affinity", "capable")
    assert len(upstream.bodies("fake-forecaster")) == asked + 1

    # Stage-router hold: escalated on B by an OOM, held on A for one calm turn.
    assert said(chat(a, "agent", "hold", render(QUIET)["messages"])) == ("fall_open", "efficient")
    assert said(chat(b, "agent", "hold", render(OOM)["messages"])) == ("override", "capable")
    assert said(chat(a, "agent", "hold", render(CALM)["messages"])) == ("hold", "capable")


def test_fifty_concurrent_turns_count_exactly_like_fifty_in_sequence(stack: Any) -> None:
    a, b, server, _ = stack
    messages = conversation(3, "Keep going.")
    for n in range(50):
        chat((a, b)[n % 2], "race", "sequential", messages)

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=60) as client:

            async def one(n: int) -> int:
                response = await client.post(
                    f"{(a, b)[n % 2].url}/v1/chat/completions",
                    json={"model": "race", "messages": messages},
                    headers={"x-switchyard-session-id": "concurrent"},
                )
                return response.status_code

            return await asyncio.gather(*(one(n) for n in range(50)))

    assert asyncio.run(burst()) == [200] * 50
    sequential = stored(server, "race:sequential:escalation")
    concurrent = stored(server, "race:concurrent:escalation")
    assert sequential is not None and sequential["streak"] == 50 and sequential["judged_turns"] == 50
    assert concurrent == sequential


def test_redis_killed_mid_run_loses_no_request_and_state_resumes(stack: Any) -> None:
    a, b, server, _ = stack
    chat(a, "watched", "before", conversation(0, "ESCALATE-ME"))
    server.kill()
    try:
        # Every request is served while Redis is gone; each replica goes on with its own copy.
        for n in range(10):
            chat((a, b)[n % 2], "race", "outage", conversation(1, "Keep going."))
        assert a.health()["state"]["degraded"] is True and a.health()["status"] == "degraded"
        assert a.degraded_metric() == 1.0
        # A session latched on A during the outage ...
        chat(a, "watched", "during", conversation(0, "ESCALATE-ME"))
        assert said(chat(a, "watched", "during", conversation(1, "ESCALATE-ME"))) == ("escalation", "capable")
        # ... and A still remembers the session it saw before the outage.
        assert said(chat(a, "watched", "before", conversation(1, "ESCALATE-ME"))) == ("escalation", "capable")
    finally:
        server.start()
    wait_until(
        lambda: not a.health()["state"]["degraded"] and not b.health()["state"]["degraded"],
        15,
        "both replicas out of degraded mode",
        every=0.1,
    )
    assert a.health()["state"]["outages"] == 1
    assert a.degraded_metric() == 0.0
    # State resumed: what A changed during the outage was written back, so B sees the latch ...
    assert said(chat(b, "watched", "during", conversation(2, "ESCALATE-ME"))) == ("latched", "capable")
    # ... and new shared state works across replicas again.
    chat(b, "watched", "after", conversation(0, "ESCALATE-ME"))
    assert said(chat(a, "watched", "after", conversation(1, "ESCALATE-ME"))) == ("escalation", "capable")
    assert said(chat(b, "watched", "after", conversation(2, "ESCALATE-ME"))) == ("latched", "capable")
