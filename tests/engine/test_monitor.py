"""Item 57: backend probes, holding a down backend out of routing, re-probes and the report."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from _waits import eventually

from switchyard.clients.health import Probe
from switchyard.engine.core import Target
from switchyard.engine.fallback import Fallback, NoCandidateError, Reliability
from switchyard.engine.health import BreakerPolicy, Health, HealthCheckPolicy
from switchyard.engine.monitor import BackendMonitor
from switchyard.protocol.call import CallOptions
from switchyard.protocol.errors import UpstreamError
from switchyard.protocol.response import ChatResponse, Usage
from switchyard.protocol.targets import TargetInfo


class Upstream:
    """A backend whose health endpoint answers from a list (the last answer repeats)."""

    def __init__(self, *states: str, delay: float = 0.0) -> None:
        self.states = list(states)
        self.delay = delay
        self.probes = 0
        self.calls = 0

    async def probe_health(self, path: str | None, timeout_s: float) -> Probe:
        self.probes += 1
        await asyncio.sleep(self.delay)
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return Probe(state, 200 if state == "up" else 503, "http://up.test/health", 1.0)  # type: ignore[arg-type]

    async def complete(self, *_: Any) -> ChatResponse:
        self.calls += 1
        return ChatResponse(id="r", model="m", content=[], usage=Usage())

    async def aclose(self) -> None:
        return None


class NoProbe:
    async def complete(self, *_: Any) -> ChatResponse:
        return ChatResponse(id="r", model="m", content=[], usage=Usage())


def target(name: str, client: str, backend: Any, **check: Any) -> Target:
    policy = HealthCheckPolicy(**check)
    return Target(
        TargetInfo(name=name, model=name, client=client),
        backend,
        Reliability(breaker=BreakerPolicy(failures=5, cooldown_s=0.2), health_check=policy),
    )


def targets(*items: Target) -> dict[str, Target]:
    return {t.info.name: t for t in items}


async def run(ts: dict[str, Target], health: Health, order: list[str]) -> tuple[Fallback, Any]:
    runner = Fallback(ts, health)
    try:
        served, _ = await runner.run(order, lambda t, o: t.backend.complete(), CallOptions())  # type: ignore[call-arg]
    except UpstreamError as exc:
        return runner, exc
    return runner, served.info.name


async def test_down_backend_is_skipped_until_a_probe_says_up() -> None:
    vllm, cloud = Upstream("down", "up"), Upstream("up")
    ts = targets(target("efficient", "vllm", vllm), target("capable", "cloud", cloud))
    health = Health()
    monitor = BackendMonitor(ts, health)
    await monitor.probe()
    runner, served = await run(ts, health, ["efficient", "capable"])
    assert served == "capable" and vllm.calls == 0
    skip = runner.skipped[0]
    assert (skip.target, skip.reason) == ("efficient", "unhealthy") and skip.retry_in_s and skip.retry_in_s > 0
    assert health.stats()["counters"]["unhealthy_skips"] == 1
    await monitor.probe()  # now up: back in routing
    assert (await run(ts, health, ["efficient", "capable"]))[1] == "efficient"
    await monitor.aclose()


async def test_every_candidate_down_is_a_503_with_retry_after() -> None:
    ts = targets(target("a", "vllm", Upstream("down")))
    health = Health()
    monitor = BackendMonitor(ts, health)
    await monitor.probe()
    _, err = await run(ts, health, ["a"])
    assert isinstance(err, NoCandidateError) and err.status == 503 and "retry-after" in err.headers
    assert "backend unhealthy" in err.message
    await monitor.aclose()


async def test_auth_errors_and_unprobed_backends_stay_in_routing() -> None:
    class AuthFails(Upstream):
        async def probe_health(self, path: str | None, timeout_s: float) -> Probe:
            return Probe("auth_error", 401, "http://x/v1/models", 1.0, "HTTP 401")

    ts = targets(target("a", "claude", AuthFails("up")), target("b", "litellm", NoProbe()))
    health = Health()
    monitor = BackendMonitor(ts, health)
    await monitor.probe()
    assert (await run(ts, health, ["a"]))[1] == "a"
    report = monitor.report(ts)
    assert report["backends"]["claude"]["state"] == "auth_error"
    assert report["backends"]["litellm"] == {"state": "not_probed", "reason": "no health endpoint", "targets": ["b"]}
    await monitor.aclose()


async def test_probes_are_concurrent_and_bounded() -> None:
    slow = [Upstream("up", delay=30) for _ in range(3)]
    ts = targets(*(target(f"t{i}", f"c{i}", b, timeout_s=0.2) for i, b in enumerate(slow)))
    health = Health()
    monitor = BackendMonitor(ts, health)
    started = time.perf_counter()
    await monitor.probe()
    # Bounded by the 0.2 s probe limits, not by the 30 s the upstreams take (the margin is for a
    # busy machine: this is no performance claim; the errors below name the limit that fired).
    assert time.perf_counter() - started < 10.0
    view = health.backend("c0")
    assert view["state"] == "down" and view["error"] == "no answer within 0.2s"
    await monitor.aclose()


async def test_disabled_clients_are_never_probed() -> None:
    up = Upstream("down")
    ts = targets(target("a", "vllm", up, enabled=False))
    monitor = BackendMonitor(ts, Health())
    await monitor.probe()
    assert up.probes == 0 and monitor.report(ts)["backends"]["vllm"]["state"] == "not_probed"


async def test_a_down_backend_is_probed_again_after_its_cooldown() -> None:
    vllm = Upstream("down", "up")
    ts = targets(target("a", "vllm", vllm))  # breaker cooldown_s 0.2, no interval
    health = Health()
    monitor = BackendMonitor(ts, health)
    await monitor.probe()
    assert health.held("vllm") is not None and monitor.running
    await eventually(lambda: health.held("vllm") is None, what="the re-probe released the hold")
    assert vllm.probes == 2 and health.backend("vllm")["state"] == "up"
    # Nothing left to watch: the prober ends by itself.
    await eventually(lambda: not monitor.running, what="the prober ended")
    await monitor.aclose()


async def test_background_probing_every_interval() -> None:
    vllm = Upstream("up", "up", "down")
    ts = targets(target("a", "vllm", vllm, interval_s=0.05, timeout_s=0.04))
    health = Health()
    monitor = BackendMonitor(ts, health)
    assert monitor.background
    monitor.ensure_running()
    await eventually(lambda: vllm.probes >= 3 and health.held("vllm") is not None, what="three probes recorded")
    await monitor.aclose()
    assert not monitor.running
    probes = vllm.probes
    await asyncio.sleep(0.15)
    assert vllm.probes == probes  # stopped


async def test_a_hold_expires_when_no_probe_renews_it() -> None:
    now = [100.0]
    health = Health(clock=lambda: now[0])
    health.record_probe("vllm", Probe("down", 503), hold_s=5.0)
    assert health.held("vllm") == 5.0
    now[0] += 5.1
    assert health.held("vllm") is None


async def test_report_and_stats() -> None:
    ts = targets(target("efficient", "vllm", Upstream("down")), target("capable", "cloud", Upstream("up")))
    health = Health()
    monitor = BackendMonitor(ts, health)
    report = monitor.report(ts)
    assert report["status"] == "ok" and report["backends"]["vllm"]["state"] == "unknown"
    await monitor.probe()
    report = monitor.report(ts)
    assert report["status"] == "degraded"
    vllm = report["backends"]["vllm"]
    assert vllm["state"] == "down" and vllm["status"] == 503 and vllm["targets"] == ["efficient"]
    assert vllm["probed"] == "on GET /health?deep=1" and vllm["held_out_for_s"] > 0
    assert report["targets"]["efficient"] == {
        "client": "vllm",
        "breaker": "closed",
        "available": False,
        "problems": ["backend_down"],
    }
    assert report["targets"]["capable"]["available"] is True
    assert health.stats()["backends"]["vllm"]["failed_probes"] == 1
    await monitor.aclose()


async def test_a_burst_of_deep_checks_sends_one_probe() -> None:
    vllm = Upstream("up", delay=0.1)
    ts = targets(target("a", "vllm", vllm))
    monitor = BackendMonitor(ts, Health())
    await asyncio.gather(*(monitor.probe() for _ in range(5)))
    assert vllm.probes == 1
    await monitor.probe()
    assert vllm.probes == 2  # a later check probes again
    await monitor.aclose()
